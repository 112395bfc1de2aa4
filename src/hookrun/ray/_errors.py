"""Which Ray errors mean "the process holding the session is gone", and awaiting an ``ObjectRef``.

``await_ref`` awaits a Ray call through the engine-free bridge (cancelling the caller
``ray.cancel``-s the call) and re-raises a lost actor, worker, node or object as
``hookrun.UnavailableError`` with the Ray error chained, so a ``MonitoredSession``
re-creates the session without any configuration. Everything else, above all an
error raised by user code inside the remote call (``RayTaskError``, which is also an
instance of the user's exception type), propagates unchanged.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.exceptions import (
    ActorDiedError,
    ActorUnavailableError,
    NodeDiedError,
    ObjectFreedError,
    ObjectLostError,
    WorkerCrashedError,
)

from ..remote._future import wait_future
from ..remote._lost import unavailable
from ..remote._waiting import Waiting

__all__ = ["RECOVERABLE_ERRORS", "await_ref", "is_recoverable"]

#: Ray errors that a re-created session can recover from. ``ActorDiedError`` with
#: ``actor_init_failed`` (the actor's constructor raised) and ``ObjectFreedError`` (the
#: program freed the object) are excluded by ``is_recoverable``: retrying repeats them.
RECOVERABLE_ERRORS: tuple[type[Exception], ...] = (
    ActorDiedError,
    ActorUnavailableError,
    WorkerCrashedError,
    NodeDiedError,
    ObjectLostError,
)


def is_recoverable(exc: BaseException) -> bool:
    """Whether ``exc`` is a lost actor, worker, node or object (not a user or config error)."""
    if not isinstance(exc, RECOVERABLE_ERRORS) or isinstance(exc, ObjectFreedError):
        return False
    return getattr(exc, "actor_init_failed", False) is not True


async def await_ref(ref: ray.ObjectRef[Any], what: object, waits: set[Waiting] | None = None) -> Any:
    """The value of ``ref``; a recoverable Ray error becomes ``UnavailableError`` naming
    ``what`` (formatted only then). While it waits, the wait is in ``waits`` (if given):
    ending it there cancels the call and raises ``WaitEnded``."""
    try:
        return await wait_future(ref.future(), lambda: ray.cancel(ref), waits)
    except Exception as exc:
        if is_recoverable(exc):
            raise unavailable(str(what), exc) from exc
        raise
