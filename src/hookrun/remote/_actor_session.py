"""A session backed by one remote actor, and the creator that makes one actor per session.

What the engines' actor sessions share, engine-free: the session's ``run`` is one call
``<method>(fetches, feed_dict)`` on its actor (with ``tags=`` when the run's options
carry tags) returning one value per fetch; ``run`` after ``aclose`` is refused; closing
ends the actor once. The creator checks the step method when it is built, counts the
sessions it made and closes with ``async with``. An adapter says how to call its
engine's actor (``_call``), how to end it (``_end``) and how to start one (``_start``).

Invariants: a closed session never calls its actor; ``aclose`` ends the actor exactly
once however often it is called; ``created`` counts only sessions whose actor is up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from .._errors import SessionClosedError
from .._hook_protocol import RunMetadata, RunOptions
from ._closeable import AsyncCloseable

__all__ = ["RemoteActorSession", "RemoteActorSessionCreator", "check_step_method"]

_NO_OPTIONS = RunOptions()

SessionT = TypeVar("SessionT", bound="RemoteActorSession")


class RemoteActorSession:
    """A session whose every ``run`` is one call to ``actor`` (see the module docstring).

    Subclasses set ``_kind`` (the name in ``repr``) and implement ``_call`` and ``_end``.
    """

    _kind: ClassVar[str] = "RemoteActorSession"

    def __init__(self, actor: Any, method: str, label: str) -> None:
        self.actor = actor
        self._method = method
        self._label = label
        self._closed = False

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"{self._kind}({self._label}.{self._method}{state})"

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: RunOptions = _NO_OPTIONS,
        run_metadata: RunMetadata | None = None,
    ) -> Sequence[Any]:
        if self._closed:
            raise SessionClosedError(f"{self!r}: run() after the session was closed")
        tags = dict(options.tags) if options.tags else None
        values: Sequence[Any] = await self._call(list(fetches), dict(feed_dict), tags)
        return values

    async def aclose(self) -> None:
        """End the session's actor (closing twice does nothing)."""
        if not self._closed:
            self._closed = True
            self._end()

    def _call(
        self, fetches: list[Hashable], feed_dict: dict[Any, Any], tags: dict[str, Any] | None
    ) -> Awaitable[Sequence[Any]]:
        """One call ``<method>(fetches, feed_dict[, tags=tags])`` to the actor."""
        raise NotImplementedError

    def _end(self) -> None:
        """End the actor (kill or release it); called once."""
        raise NotImplementedError


class RemoteActorSessionCreator(AsyncCloseable, Generic[SessionT]):
    """Creates a session per ``create_session``: a new actor each time (see the module docstring).

    Subclasses set ``_kind`` and implement ``_start``.
    """

    _kind: ClassVar[str] = "RemoteActorSessionCreator"

    def __init__(self, label: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._label = label
        self._method = method
        self._args = args
        self._kwargs = kwargs
        #: How many sessions (actors) this creator made.
        self.created = 0

    def __repr__(self) -> str:
        return f"{self._kind}({self._label}, method={self._method!r})"

    async def create_session(self) -> SessionT:
        session = await self._start()
        self.created += 1
        return session

    async def _start(self) -> SessionT:
        """Start a new actor, wait until it is up, and return its session."""
        raise NotImplementedError


def check_step_method(kind: str, cls: object, label: str, method: object) -> None:
    """Refuse a ``method`` that ``cls`` does not have, naming the class and the method."""
    if not isinstance(method, str) or not callable(getattr(cls, method, None)):
        raise AttributeError(
            f"{kind}: {label} has no method {method!r} to run the session's steps (pass method=...)"
        )
