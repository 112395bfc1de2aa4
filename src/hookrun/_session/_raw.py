"""What a session and a session creator are, and the everyday ``StepSession``.

``Session`` and ``SessionCreator`` are structural protocols; ``StepSession``
adapts a step function (async, or sync run in a worker thread) that returns a
mapping; ``fetch`` runs a nested structure against a raw session outside a
monitored step. Pure adapters: no session state lives here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import anyio

from .._dispatch import _nest
from .._errors import SessionClosedError
from .._hook_protocol import RunMetadata, RunOptions
from .._validate import check_callable, refuse_awaitable

__all__ = ["Session", "SessionCreator", "SessionCreatorLike", "SessionFactory", "StepSession", "fetch"]

_NO_OPTIONS = RunOptions()


@runtime_checkable
class Session(Protocol):
    """Anything with this ``run``; ``aclose()`` is optional."""

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> Sequence[Any]:
        """Return one value per fetch, in order."""
        ...


@runtime_checkable
class SessionCreator(Protocol):
    """Anything with a ``create_session()`` returning a session (``async def`` as here, or a
    plain method); a function of no arguments, sync or async, works too."""

    async def create_session(self) -> Any: ...


#: A function of no arguments that returns a session: an ``async def``, or a plain
#: function (called in the event loop's thread; an awaitable it returns is awaited).
SessionFactory: TypeAlias = Callable[[], object]

#: What the monitored sessions take as ``session_creator``: a :class:`SessionCreator`
#: (an object whose ``create_session()`` makes a session, ``async def`` or plain), or a
#: :data:`SessionFactory`. Each is called once per session made: at entry, on every
#: recovery, and once per lane with ``max_in_flight``.
SessionCreatorLike: TypeAlias = SessionCreator | SessionFactory


class StepSession:
    """A session whose every ``run`` calls ``step_fn(feed_dict)`` once.

    ``step_fn`` is an async function, or a sync one which then runs in a worker
    thread. It returns a mapping (or ``None``); fetches are answered by key from
    it, and a missing key raises ``KeyError`` listing the keys that exist (its
    ``key`` attribute is the missing key; a monitored session adds a note naming
    who fetched it). A fed key is not fetched back: only what the step returns.

    A step in a worker thread that is cancelled (``RunOptions.timeout``, or a
    cancellation from outside) frees the caller at once; the thread cannot be
    stopped, so it runs on until ``step_fn`` returns, and what it returns is
    discarded. After ``aclose()`` every ``run`` raises ``SessionClosedError``.

    Args:
        step_fn: The step: called with the feed dict, returns a mapping of fetch key → value
            (or ``None``). ``async def``, or plain (run in a worker thread).
    """

    def __init__(self, step_fn: Callable[..., Any]) -> None:
        if not callable(step_fn):
            raise TypeError(f"StepSession needs a callable step_fn, got {step_fn!r}")
        check_callable("StepSession: step_fn", step_fn)
        self.step_fn = step_fn
        self.closed = False
        self._is_async = inspect.iscoroutinefunction(step_fn) or inspect.iscoroutinefunction(
            getattr(step_fn, "__call__", None)  # noqa: B004 - async callable objects
        )

    def __repr__(self) -> str:
        return f"StepSession({getattr(self.step_fn, '__qualname__', self.step_fn)!r})"

    def _call_sync(self, feed_dict: Mapping[Any, Any]) -> Any:
        """Call a plain step function (in a worker thread); it must not return an awaitable."""
        produced = self.step_fn(feed_dict)
        if inspect.isawaitable(produced):
            refuse_awaitable(produced, f"{self!r}: step_fn is a plain function but returned an awaitable; declare it with 'async def'")
        return produced

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: RunOptions = _NO_OPTIONS,
        run_metadata: RunMetadata | None = None,
    ) -> list[Any]:
        if self.closed:
            raise SessionClosedError(
                f"{self!r}.run called after the session was closed (a monitored session closes the "
                "session its creator gives it; lend it with hookrun.borrowed(session) to keep it open)"
            )
        if self._is_async:
            produced = await self.step_fn(feed_dict)
        else:
            produced = await anyio.to_thread.run_sync(self._call_sync, feed_dict, abandon_on_cancel=True)
        if not fetches:
            return []
        if produced is None:
            produced = {}
        if not isinstance(produced, Mapping):
            raise TypeError(
                f"{self!r}: step_fn must return a mapping or None, got {type(produced).__name__}"
            )
        try:
            return [produced[key] for key in fetches]
        except KeyError as exc:
            key = exc.args[0]
            fed = (
                f"; {key!r} is fed, but a fed key is not fetched back: a StepSession answers "
                "only from what its step returns (return it from the step to fetch it)"
                if key in feed_dict else ""
            )
            missing = KeyError(
                f"{self!r}: no value for fetch {key!r}{fed}; the step produced "
                f"{', '.join(sorted(map(repr, produced))) or 'nothing'}"
            )
            missing.key = exc.args[0]  # type: ignore[attr-defined]  # the monitored session names who asked
            raise missing from None

    async def aclose(self) -> None:
        """Close the session: every later ``run`` raises ``SessionClosedError``."""
        self.closed = True


async def fetch(
    session: Any,
    structure: object,
    feed_dict: Mapping[Any, Any] | None = None,
    *,
    options: RunOptions | None = None,
) -> Any:
    """Run a nested fetch ``structure`` against a raw ``session`` (no hooks) and pack it back.

    Args:
        session: A raw session (anything with the ``run`` of :class:`Session`).
        structure: The fetches: a key, or a list, tuple, dict or namedtuple of them, nested
            at will.
        feed_dict: The feeds of the run. ``None``: none.
        options: The run's ``RunOptions``. ``None``: the defaults.

    Returns:
        The values, in the shape of ``structure``.
    """
    keys: list[Hashable] = []
    shape = _nest.index(structure, "fetch()", keys, {})
    values = await session.run(keys, dict(feed_dict or {}), options or _NO_OPTIONS, RunMetadata())
    check_values(session, keys, values)
    return _nest.pack(shape, values)


def check_values(session: object, keys: Sequence[Hashable], values: object) -> Sequence[Any]:
    """Check a session's answer has one value per fetch; return it as a sequence."""
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise TypeError(
            f"{type(session).__name__}.run returned {type(values).__name__}; "
            f"expected a sequence of {len(keys)} values (one per fetch)"
        )
    if len(values) != len(keys):
        raise TypeError(
            f"{type(session).__name__}.run returned {len(values)} values for "
            f"{len(keys)} fetches; it must return exactly one value per fetch"
        )
    return values
