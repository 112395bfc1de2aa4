"""``DaskActorSessionCreator``: one Dask actor per session.

The session's ``run`` is one actor call ``method(fetches, feed_dict)`` (with ``tags=``
when the run's options carry tags). Dask never restarts an actor: when the worker
holding it dies, the session raises ``UnavailableError`` (from ``DaskActorLostError``)
and the monitored session creates a new actor. Invariants: the actor's state is
checked before every call and after a failed one (its future's status, not a
message); closing a session releases its actor; the creator's own client is closed
with the creator.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from types import TracebackType
from typing import Any

from distributed import Client, Future
from distributed.client import ClosedClientError

from .._errors import SessionClosedError
from .._hook_protocol import RunMetadata, RunOptions
from ._client import ClientSource
from ._errors import (
    DaskActorLostError,
    await_actor_call,
    await_dask,
    is_recoverable,
    is_unreachable,
    unavailable,
)

__all__ = ["DaskActorSession", "DaskActorSessionCreator"]

_NO_OPTIONS = RunOptions()
_ALIVE = ("finished", "pending")


class DaskActorSession:
    """A session backed by one Dask actor (made by ``DaskActorSessionCreator``).

    ``actor`` is Dask's actor proxy, for calls outside a step.
    """

    def __init__(
        self, client: Client, future: Future[Any], actor: Any, method: str, label: str, *, own_client: bool
    ) -> None:
        self.actor = actor
        self._client = client
        self._own_client = own_client
        self._future = future
        self._method = method
        self._label = label
        self._closed = False

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"DaskActorSession({self._label}.{self._method}{state})"

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: RunOptions = _NO_OPTIONS,
        run_metadata: RunMetadata | None = None,
    ) -> Sequence[Any]:
        if self._closed:
            raise SessionClosedError(f"{self!r}: run() after the session was closed")
        if self._client.status in ("closing", "closed"):
            closed = ClosedClientError(f"the Dask client of {self!r} is closed")
            if self._own_client:
                raise unavailable(repr(self), closed) from closed
            raise closed
        self._check_alive(None)
        args = (list(fetches), dict(feed_dict))
        kwargs = {"tags": dict(options.tags)} if options.tags else {}
        try:
            values: Sequence[Any] = await await_actor_call(
                self._client, lambda: getattr(self.actor, self._method)(*args, **kwargs)
            )
        except (OSError, RuntimeError) as exc:
            if is_unreachable(exc):
                raise unavailable(repr(self), DaskActorLostError(str(exc))) from exc
            self._check_alive(exc)
            raise
        return values

    def _check_alive(self, cause: BaseException | None) -> None:
        status = self._future.status
        if status not in _ALIVE:
            lost = DaskActorLostError(f"the worker holding {self._label} was lost (status {status})")
            raise unavailable(repr(self), lost) from (cause or lost)

    async def aclose(self) -> None:
        """Release the actor (closing twice does nothing)."""
        if not self._closed:
            self._closed = True
            self._future.release()


class DaskActorSessionCreator:
    """Creates a ``DaskActorSession`` per session: a new actor ``actor_cls(*args, **kwargs)``.

    ``client`` is a synchronous ``distributed.Client`` that stays yours; ``address``
    makes the creator connect a client of its own (rebuilt if it closes, closed by
    ``aclose()`` or on leaving ``async with``); with neither, the default client is
    used. An error in the actor's constructor is raised by ``create_session``.
    """

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
        if not isinstance(method, str) or not callable(getattr(actor_cls, method, None)):
            raise AttributeError(
                f"DaskActorSessionCreator: {actor_cls.__qualname__} has no method {method!r} "
                "to run the session's steps (pass method=...)"
            )
        self._cls = actor_cls
        self._label = actor_cls.__qualname__
        self._method = method
        self._args = args
        self._kwargs = kwargs
        self._source = ClientSource(f"DaskActorSessionCreator({self._label})", client, address)
        #: How many sessions (actors) this creator made.
        self.created = 0

    def __repr__(self) -> str:
        return f"DaskActorSessionCreator({self._label}, method={self._method!r})"

    async def create_session(self) -> DaskActorSession:
        client = await self._source.get()
        own = self._source.owned
        what = f"creating {self._label}"
        try:
            future = client.submit(_construct, self._cls, self._args, self._kwargs, actor=True, pure=False)
        except Exception as exc:
            if is_recoverable(exc, own_client=own):
                raise unavailable(what, exc) from exc
            raise
        with client.as_current():  # the actor proxy binds to the current client
            actor = await await_dask(future, what, own_client=own)
        self.created += 1
        return DaskActorSession(client, future, actor, self._method, self._label, own_client=own)

    async def aclose(self) -> None:
        """Close the client this creator connected (never one that was passed in)."""
        await self._source.aclose()

    async def __aenter__(self) -> DaskActorSessionCreator:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def _construct(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Build the actor on the worker (keeps the actor's keywords apart from submit's)."""
    return cls(*args, **kwargs)
