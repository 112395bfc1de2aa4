"""``DaskActorSessionCreator``: one Dask actor per session.

The session's ``run`` is one actor call ``method(fetches, feed_dict)`` (with ``tags=``
when the run's options carry tags). Dask never restarts an actor: when the worker
holding it dies, the session raises ``UnavailableError`` (from ``DaskActorLostError``)
and the monitored session creates a new actor. Invariants: the actor's state is
checked before every call and after a failed one (its future's status, not a
message); closing a session releases its actor; the creator's own client is closed
with the creator. Each session actor runs its calls on a thread of its own
(``_concurrent``), so N lanes run N calls at once however few workers hold them.
A creator spreads its actors over the workers in turn (the scheduler left to itself
puts quick actor constructions all on one worker, whose loss would take every
lane); a worker that is gone is out of the turn at once. The first call that finds
a worker unreachable, once the loss is confirmed (the scheduler no longer lists the
worker, or it refuses a connection), ends the calls of the creator's other sessions
waiting on it (``WorkerWatch``), so a lost worker costs only its lanes, never a
connect timeout, and a passing comm error with a live worker costs only one lane.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar

import anyio
from distributed import Client, Future
from distributed.client import ClosedClientError

from ..remote._actor_session import RemoteActorSession, RemoteActorSessionCreator, check_step_method
from ..remote._waiting import WaitEnded
from ._client import ClientSource
from ._concurrent import construct
from ._errors import (
    DaskActorLostError,
    await_actor_call,
    await_dask,
    is_recoverable,
    is_unreachable,
    unavailable,
)
from ._io_loop import on_io_loop
from ._watch import WorkerWatch, worker_gone

__all__ = ["DaskActorSession", "DaskActorSessionCreator"]

_ALIVE = ("finished", "pending")


class DaskActorSession(RemoteActorSession):
    """A session backed by one Dask actor (made by ``DaskActorSessionCreator``); closing
    it releases the actor.

    ``actor`` is Dask's actor proxy, for calls outside a step.
    """

    _kind: ClassVar[str] = "DaskActorSession"

    def __init__(
        self, client: Client, future: Future[Any], actor: Any, method: str, label: str, *, own_client: bool,
        watch: WorkerWatch | None = None,
    ) -> None:
        super().__init__(actor, method, label)
        self._client = client
        self._own_client = own_client
        self._future = future
        self._watch = watch
        self._address: str | None = getattr(actor, "_address", None)  # the worker holding the actor
        self._made = time.monotonic()

    async def _call(
        self, fetches: list[Hashable], feed_dict: dict[Any, Any], tags: dict[str, Any] | None
    ) -> Sequence[Any]:
        if self._client.status in ("closing", "closed"):
            closed = ClosedClientError(f"the Dask client of {self!r} is closed")
            if self._own_client:
                raise unavailable(repr(self), closed) from closed
            raise closed
        self._check_alive(None)
        watch, address = self._watch, self._address
        kwargs = {"tags": tags} if tags else {}
        try:
            values: Sequence[Any] = await await_actor_call(
                self._client, lambda: getattr(self.actor, self._method)(fetches, feed_dict, **kwargs),
                waits=None if watch is None or address is None else watch.calls(address),
            )
        except WaitEnded as exc:  # another session found this actor's worker gone meanwhile
            lost = DaskActorLostError(f"the worker {address} holding {self._label} was lost")
            raise unavailable(repr(self), lost) from exc
        except (OSError, RuntimeError) as exc:
            if is_unreachable(exc):
                if watch is not None and address is not None:
                    await watch.suspect(address, self._worker_gone)
                raise unavailable(repr(self), DaskActorLostError(str(exc))) from exc
            self._check_alive(exc)
            raise
        return values

    def _check_alive(self, cause: BaseException | None) -> None:
        status = self._future.status
        address, watch = self._address, self._watch
        if status not in _ALIVE:
            lost = DaskActorLostError(f"the worker holding {self._label} was lost (status {status})")
            if watch is not None and address is not None:
                watch.lost(address)
            raise unavailable(repr(self), lost) from (cause or lost)
        if watch is not None and address is not None and watch.lost_since(address, self._made):
            lost = DaskActorLostError(f"the worker {address} holding {self._label} was lost")
            raise unavailable(repr(self), lost) from (cause or lost)

    async def _worker_gone(self) -> bool:
        """Whether the worker holding the actor is gone (asked on the client's IO loop; a
        client closed meanwhile cannot ask: taken as gone)."""
        assert self._address is not None
        try:
            return bool(await on_io_loop(self._client.loop, worker_gone(self._client, self._address)))
        except ClosedClientError:
            return True

    def _end(self) -> None:
        self._future.release()


class DaskActorSessionCreator(RemoteActorSessionCreator[DaskActorSession]):
    """Creates a ``DaskActorSession`` per session: a new actor ``actor_cls(*args, **kwargs)``.

    ``client`` is a synchronous ``distributed.Client`` that stays yours; ``address``
    makes the creator connect a client of its own (rebuilt if it closes, closed by
    ``aclose()`` or on leaving ``async with``); with neither, the default client is
    used. An error in the actor's constructor is raised by ``create_session``.

    The creator puts its actors on the cluster's workers in turn, so the loss of a
    worker costs only its share of the lanes.

    A Dask worker runs the synchronous methods of all its actors on one thread; the
    session actors made here run their step method (``method``) on a thread of
    their own instead, so N lanes run N calls at once even on fewer workers (each
    actor still runs its own calls one at a time). A step method that is a
    coroutine (``async def``) runs on the worker's event loop, as Dask runs it.

    Args:
        actor_cls: The actor's class; its ``run(fetches, feed_dict)`` answers a step.
        *args: The arguments of its constructor.
        address: A scheduler's address to connect a client of the creator's own to.
        client: A synchronous ``distributed.Client`` to use (never closed here).
        method: The name of the actor's method each run calls.
        **kwargs: The keyword arguments of its constructor.
    """

    _kind: ClassVar[str] = "DaskActorSessionCreator"

    def __init__(
        self,
        actor_cls: type,
        *args: Any,
        address: str | None = None,
        client: Client | None = None,
        method: str = "run",
        **kwargs: Any,
    ) -> None:
        if not isinstance(actor_cls, type):
            raise TypeError(f"DaskActorSessionCreator needs a class, got {type(actor_cls).__name__}")
        check_step_method("DaskActorSessionCreator", actor_cls, actor_cls.__qualname__, method)
        super().__init__(actor_cls.__qualname__, method, args, kwargs)
        self._cls = actor_cls
        self._source = ClientSource(f"DaskActorSessionCreator({self._label})", client, address)
        self._turn = 0
        self._watch = WorkerWatch()

    async def aclose(self) -> None:
        """Close the client this creator connected (never one that was passed in)."""
        await self._source.aclose()

    async def _start(self) -> DaskActorSession:
        client = await self._source.get()
        own = self._source.owned
        what = f"creating {self._label}"
        place = {}
        info = await anyio.to_thread.run_sync(client.scheduler_info)  # one RPC: not on the loop
        workers = sorted(info.get("workers", ()))
        if workers:  # in turn; the scheduler may still choose another if that one is gone
            self._turn += 1
            place = {"workers": [workers[self._turn % len(workers)]], "allow_other_workers": True}
        try:
            future = client.submit(
                construct, self._cls, self._method, self._args, self._kwargs, actor=True, pure=False, **place
            )
        except Exception as exc:
            if is_recoverable(exc, own_client=own):
                raise unavailable(what, exc) from exc
            raise
        with client.as_current():  # the actor proxy binds to the current client
            actor = await await_dask(future, what, own_client=own)
        return DaskActorSession(client, future, actor, self._method, self._label, own_client=own, watch=self._watch)

