"""Which Ray errors mean "the process holding the session is gone", and awaiting an ``ObjectRef``.

``await_ref`` awaits a Ray call (cancelling the caller ``ray.cancel``-s the call) and
re-raises a lost actor, worker, node or object as ``hookrun.UnavailableError`` with
the Ray error chained, so a ``MonitoredSession`` re-creates the session without any
configuration. Everything else, above all an error raised by user code inside the
remote call (``RayTaskError``, which is also an instance of the user's exception
type), propagates unchanged.

The wait is the hot path of every Ray step. ``ref.future()`` would cost a
``concurrent.futures.Future`` (a lock and a condition) and its callbacks per call, on
Ray's callback thread, which then competes with the event loop for the GIL; so the
parked task's ``Waiting`` is itself the callback Ray calls with the object's value
(``ObjectRef._on_completed``, what ``ref.future()`` is built on), and the value or
error is read the way ``ref.future()`` reads it. Other references (a Ray Client's)
go through ``ref.future()``.
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
    RayError,
    RayTaskError,
    WorkerCrashedError,
)

from ..remote._future import wait_future
from ..remote._lost import unavailable
from ..remote._waiting import Waiting, park

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
        if type(ref) is not ray.ObjectRef:  # a Ray Client's reference
            return await wait_future(ref.future(), lambda: ray.cancel(ref), waits)
        waiting = _RefWaiting(ref)
        ref._on_completed(waiting)
        await park(waiting, waits, waiting.answered, waiting.cancel, ref)
        value = waiting.value
        if isinstance(value, RayError):  # as ref.future() reads it
            raise value.as_instanceof_cause() if isinstance(value, RayTaskError) else value  # type: ignore[no-untyped-call]
        return value
    except Exception as exc:
        if is_recoverable(exc):
            raise unavailable(str(what), exc) from exc
        raise


_PENDING: Any = object()


class _RefWaiting(Waiting):
    """The wait for one ``ObjectRef``, and the callback Ray calls with its value (a
    ``RayError`` if the call failed). It holds the reference until the value comes, as
    ``ref.future()`` does (Ray's reference counting)."""

    __slots__ = ("ref", "value")

    def __init__(self, ref: ray.ObjectRef[Any]) -> None:
        super().__init__()
        self.ref = ref
        self.value = _PENDING

    def __call__(self, value: Any) -> None:  # on Ray's callback thread
        self.value = value
        self.wake()

    def answered(self) -> bool:
        return self.value is not _PENDING

    def cancel(self) -> None:
        ray.cancel(self.ref)
