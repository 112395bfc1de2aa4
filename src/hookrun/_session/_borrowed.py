"""``borrowed(session)``: lend a raw session to a monitored session that must not close it.

A monitored session closes every session its creator gives it. An evaluation pass with
hooks of its own, run by a second monitored session over the training session's raw
session, must leave that session open for the training steps after it. ``borrowed``
is the creator for that: it gives the nested monitored session a ``Lent`` view of the
session, whose ``aclose`` does nothing (the owner closes the session), whose ``run`` is
the session's own bound ``run`` (no extra call per step), and whose other attributes
read through to the session. Every creation lends the same session again. No state
beyond the session lent.
"""

from __future__ import annotations

from typing import Any

from .._dispatch._plan import is_async_callable
from ._raw import SessionCreator

__all__ = ["Lent", "borrowed"]

#: Not lent: closing the session or entering it as a context is its owner's business.
_OWNERS_ONLY = frozenset({"close", "aclose", "__enter__", "__exit__", "__aenter__", "__aexit__"})


class Lent:
    """A borrowed session as the monitored session that borrowed it sees it: the same
    ``run`` and attributes, and an ``aclose`` that leaves the session open."""

    __slots__ = ("run", "session")

    def __init__(self, session: Any) -> None:
        self.session = session
        self.run = session.run

    def __repr__(self) -> str:
        return f"borrowed({self.session!r})"

    def __getattr__(self, name: str) -> Any:
        if name in _OWNERS_ONLY:
            raise AttributeError(f"{self!r} is borrowed: its {name} belongs to the session's owner")
        return getattr(self.session, name)

    async def aclose(self) -> None:
        """Nothing: the borrowed session stays open for its owner, who closes it."""


class _Borrowed:
    """The session creator ``borrowed(session)`` returns."""

    __slots__ = ("session",)

    def __init__(self, session: Any) -> None:
        self.session = session

    def __repr__(self) -> str:
        return f"hookrun.borrowed({self.session!r})"

    async def create_session(self) -> Lent:
        return Lent(self.session)


def borrowed(session: object) -> SessionCreator:
    """A session creator that lends ``session`` to a monitored session without giving it
    away: the monitored session runs its hooks over ``session`` and never closes it.

    For an evaluation pass with hooks of its own over the raw session of a training
    session (``train.raw_session()``) that goes on training afterwards. Every creation
    lends the same session again, so run the pass with a ``SingularMonitoredSession``:
    its errors reach you, and the owner recovers its own session.

    Args:
        session: The raw session to lend (a training session's ``raw_session()``).

    Returns:
        A session creator whose every ``create_session()`` returns ``session``.
    """
    if isinstance(session, Lent):
        return _Borrowed(session.session)  # lent again: still the owner's session
    if session is None:
        raise TypeError(
            "borrowed(None): there is no session to lend; a monitored session's raw_session() "
            "is None outside its 'async with' block and after re-creating its session failed"
        )
    if callable(getattr(session, "raw_session", None)):
        raise TypeError(
            f"borrowed() lends a raw session, but {type(session).__name__} is a monitored session "
            "(its run would run its own hooks); pass its raw_session()"
        )
    run = getattr(session, "run", None)
    if run is None or not is_async_callable(run):
        raise TypeError(
            f"borrowed() needs a session with 'async def run(fetches, feed_dict, options, "
            f"run_metadata)', got {type(session).__name__}"
        )
    return _Borrowed(session)
