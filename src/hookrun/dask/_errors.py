"""Which Dask errors mean "the worker, actor or scheduler connection is gone", and awaiting
Dask's futures from anyio code.

``await_dask`` awaits a ``distributed.Future``'s result, fetched on the client's IO
loop, through the engine-free bridge (cancelling the caller cancels the future);
``await_actor_call`` awaits an actor method's ``ActorFuture`` (which has no
done-callback) on the client's own IO loop; both go through ``on_io_loop``, as a step
task does.
A recoverable error is re-raised as ``hookrun.UnavailableError`` with Dask's error
chained; user errors, ``KilledWorker`` (a task that killed every worker it ran on)
and cancellations propagate unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distributed import Client, Future
from distributed.client import ClosedClientError, FutureCancelledError
from distributed.comm.core import CommClosedError

from ..remote._lost import unavailable
from ..remote._waiting import Waiting
from ._io_loop import on_io_loop

__all__ = [
    "RECOVERABLE_ERRORS",
    "DaskActorLostError",
    "await_actor_call",
    "await_dask",
    "is_recoverable",
    "unavailable",
]

#: The message Dask gives an actor call whose worker cannot be reached.
_UNREACHABLE = ("Unable to contact Actor's worker",)


class DaskActorLostError(ConnectionError):
    """The worker holding a session's (or a counter's) actor was lost, and the actor with it."""


#: Dask errors a re-created session can recover from. ``FutureCancelledError`` counts
#: only when the scheduler connection was lost, ``ClosedClientError`` only for a client
#: hookrun made (it is rebuilt); ``is_recoverable`` applies both rules.
RECOVERABLE_ERRORS: tuple[type[Exception], ...] = (
    DaskActorLostError,
    CommClosedError,
    ClosedClientError,
    FutureCancelledError,
)


def is_recoverable(exc: BaseException, *, own_client: bool = True) -> bool:
    """Whether ``exc`` is a lost actor, comm or scheduler connection (not a user error)."""
    if isinstance(exc, FutureCancelledError):
        return getattr(exc, "reason", None) == "scheduler-connection-lost"
    if isinstance(exc, ClosedClientError):
        return own_client
    return isinstance(exc, (DaskActorLostError, CommClosedError))


async def await_dask(future: Future[Any], what: str, *, own_client: bool) -> Any:
    """The result of ``future``; recoverable errors become ``UnavailableError`` naming ``what``.

    The result is fetched by a coroutine on the client's IO loop, the way
    ``Future.result()`` fetches it, and the bridge awaits that coroutine: one hand-off
    to the IO loop and one back per result. ``Future.result()`` itself would block the
    caller's event loop for the whole fetch (a round trip to the scheduler) and
    ``Future.add_done_callback`` adds a hop through Dask's callback thread; on a busy
    machine both cost more than the step's own overhead. Cancelling the caller cancels
    that coroutine and the future.
    """
    try:
        return await on_io_loop(future.client.loop, future._result(), cancel=future.cancel)  # as Future.result()
    except Exception as exc:
        if is_recoverable(exc, own_client=own_client):
            raise unavailable(what, exc) from exc
        raise


async def await_actor_call(
    client: Client, call: Callable[[], Any], *, on_cancel: Callable[[], object] | None = None,
    waits: set[Waiting] | None = None,
) -> Any:
    """Make an actor call (``call()`` returns its ``ActorFuture``) and await its value.

    The ``ActorFuture`` is awaited on the client's IO loop (``on_io_loop``); cancelling
    the caller calls ``on_cancel`` and cancels that wait (Dask cannot stop the running
    method itself). While it waits the call is in
    ``waits`` (if given), where ending it cancels it and raises ``WaitEnded``.
    """
    return await on_io_loop(client.loop, call(), cancel=on_cancel, waits=waits)


def is_unreachable(exc: BaseException) -> bool:
    """Whether an actor call failed because its worker is gone (Dask's own OSError)."""
    return isinstance(exc, CommClosedError) or (type(exc) is OSError and exc.args == _UNREACHABLE)
