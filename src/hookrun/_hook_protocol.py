"""The hook protocol and the value objects exchanged in one step.

``SessionRunHook`` is the base class users subclass; ``SessionRunArgs`` is what
``before_run`` asks for; ``SessionRunContext`` is the one object shared by every
hook during a step; ``SessionRunValues`` is what ``after_run`` receives.
``RunOptions`` and ``RunMetadata`` travel with the session's ``run``.

Invariants: value objects are immutable except ``RunMetadata`` (one per step,
shared) and the stop flag of ``SessionRunContext``, which can only go from
False to True.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from ._validate import check_flag, check_number

if TYPE_CHECKING:
    from ._coordinator._tasks import Coordinator

__all__ = [
    "HOOK_METHODS",
    "InFlightRunContext",
    "RunMetadata",
    "RunOptions",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "TimingRecord",
    "check_feed_dict",
]

#: The methods of the hook protocol, in lifecycle order: TensorFlow's five, then
#: ``on_exception`` (called instead of ``end`` when the session exits with an error).
HOOK_METHODS = ("begin", "after_create_session", "before_run", "after_run", "end", "on_exception")

_EMPTY: Mapping[str, object] = MappingProxyType({})
_INF = float("inf")


class SessionRunHook:
    """Base class of hooks: every method is a no-op unless overridden.

    Override any of the methods as ``async def`` or as a plain ``def``
    (plain methods are called inline on the event loop and must not block;
    wrap a blocking hook with :func:`hookrun.in_thread`). Only the methods a
    hook overrides are ever called.

    A hook whose ``before_run`` may return ``RunOptions(trace=True)`` sets the
    class attribute ``traces_before_run = True``: the session then times every
    ``before_run`` call, so a traced step also holds the ``before_run`` spans
    (timing them costs a little on every step, so it is opt-in).

    A hook that is right when steps overlap (a session made with
    ``max_in_flight > 1``, where the ``before_run`` of later steps may come
    between a step's ``before_run`` and its ``after_run``) sets the class
    attribute ``overlapping_steps = True``: it keeps no per-step state on itself
    from one to the other (it carries it in ``run_context.step_state``). Such a
    session refuses a hook that does not say so.
    """

    traces_before_run = False

    #: Whether the hook is right when steps overlap (see the class docstring).
    overlapping_steps = False

    def begin(self) -> object:
        """Called once, before the first session is created."""
        return None

    def after_create_session(self, session: Any, coord: Coordinator) -> object:
        """Called after every (re)creation of the session, with its coordinator."""
        return None

    def before_run(self, run_context: SessionRunContext) -> object:
        """Called before each step; may return a :class:`SessionRunArgs`."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> object:
        """Called after each successful step with the values this hook asked for."""
        return None

    def end(self, session: Any) -> object:
        """Called once when the monitored session ends cleanly."""
        return None

    def on_exception(self, session: Any, exception: BaseException) -> object:
        """Called once instead of ``end`` when the monitored session exits with an error
        or is cancelled (``exception``: that error, or the cancellation exception).

        ``session`` is the raw session, or ``None`` when there is none (the error came
        before a session was ready, or re-creating it failed). Release what
        ``begin`` acquired here as in ``end``. It runs shielded from cancellation, bounded
        by ``stop_grace_period``; an error it raises is logged and added as a note to
        ``exception``, which still propagates. Only hooks whose ``begin`` was called get it.
        """
        return None


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Per-step options: a ``timeout`` in seconds, ``trace`` timings, ``tags`` for the session.

    Compares by value. ``tags`` is stored as a read-only mapping.

    Args:
        timeout: Seconds the session's ``run`` may take before ``DeadlineExceededError``.
            ``None``: no limit.
        trace: Record the step's timings (``run_metadata``), as a ``ProfilerHook`` asks.
        tags: Values passed to the session with the run (an actor session receives them as
            ``tags=``).
    """

    timeout: float | None = None
    trace: bool = False
    tags: Mapping[str, object] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        timeout = self.timeout
        if timeout is not None and not (type(timeout) is float and 0.0 < timeout < _INF):
            check_number("RunOptions(timeout=...)", timeout, strict=True, optional=True, unit="seconds")
        if self.trace is not True and self.trace is not False:
            check_flag("RunOptions(trace=...)", self.trace)
        if not isinstance(self.tags, MappingProxyType):
            if not isinstance(self.tags, Mapping):
                raise TypeError(f"RunOptions.tags must be a mapping, got {type(self.tags).__name__}")
            object.__setattr__(self, "tags", MappingProxyType(dict(self.tags)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunOptions):
            return NotImplemented
        return (
            self.timeout == other.timeout
            and self.trace == other.trace
            and dict(self.tags) == dict(other.tags)
        )

    def __hash__(self) -> int:
        return hash((self.timeout, self.trace, frozenset(self.tags.items())))


@dataclass(frozen=True, slots=True)
class TimingRecord:
    """One traced interval: a hook call (``name`` is the hook's) or the session run (``"run"``)."""

    phase: str
    name: str
    start: float
    end: float


class RunMetadata:
    """Mutable, one per step, shared by every hook of the step.

    With ``RunOptions(trace=True)`` the runtime appends a :class:`TimingRecord`
    to ``timings`` for every hook call and for the session's run. Sessions may
    store anything they like in ``data``. Both are created on first use.
    """

    # No __init__: one is made per step, and an unset slot is what "not used yet" means
    # (building one costs half as much as with an __init__ setting both to None).
    __slots__ = ("_data", "_timings")

    _timings: list[TimingRecord]
    _data: dict[str, object]

    @property
    def timings(self) -> list[TimingRecord]:
        """The traced intervals of the step."""
        try:
            return self._timings
        except AttributeError:
            self._timings = []
            return self._timings

    @property
    def data(self) -> dict[str, object]:
        """Anything a session or hook wants to pass along with the step."""
        try:
            return self._data
        except AttributeError:
            self._data = {}
            return self._data

    def __repr__(self) -> str:
        return f"RunMetadata(timings={len(self.timings)} records, data={self.data!r})"


class SessionRunArgs(NamedTuple):
    """What a hook's ``before_run`` asks for: fetches, feeds and options.

    ``fetches`` is any nested structure of lists, tuples, namedtuples and dicts
    whose leaves are hashable keys (or ``None``). A named tuple, as in
    TensorFlow: immutable and compared by value.

    Args:
        fetches: What to fetch: a key, or a nested structure of keys. ``None``: nothing.
        feed_dict: Feeds to add to the step's. ``None``: none.
        options: ``RunOptions`` to merge into the step's. ``None``: none.
    """

    fetches: Any = None
    feed_dict: Mapping[Any, Any] | None = None
    options: RunOptions | None = None


def check_feed_dict(feed_dict: object, party: str) -> None:
    """Refuse a ``feed_dict`` that is neither a mapping nor ``None``, naming the party
    (``"the caller"`` or ``"hook <name>"``) that passed it."""
    if feed_dict is not None and not isinstance(feed_dict, Mapping):
        shown = repr(feed_dict)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(
            f"{party} passed feed_dict={shown}, a {type(feed_dict).__name__}; a feed_dict "
            "must be a mapping of key -> value (or None)"
        )


class SessionRunContext:
    """The one context object shared by every hook during one step.

    ``original_args`` holds the caller's fetches, feeds and options; ``session``
    is the raw session; ``global_step`` is the step counter's value when the
    step began. ``request_stop()`` is sticky at once: the monitored session
    will stop after this step even if another hook then raises.
    """

    __slots__ = ("_args", "_on_stop", "_step_state", "_stop_requested", "global_step", "session")

    _step_state: dict[object, Any]  # set on first use (``step_state``): a step pays nothing for it

    def __init__(
        self,
        original_args: SessionRunArgs | tuple[Any, Any, Any],
        session: Any,
        global_step: int = 0,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self._args = original_args
        self.session = session
        self.global_step = global_step
        self._stop_requested = False
        self._on_stop = on_stop

    @property
    def original_args(self) -> SessionRunArgs:
        """The caller's ``SessionRunArgs(fetches, feed_dict, options)``."""
        args = self._args
        if type(args) is not SessionRunArgs:
            args = self._args = SessionRunArgs(*args)
        return args

    @property
    def step_state(self) -> dict[object, Any]:
        """A dict that lives as long as this step: where a hook keeps what its ``before_run``
        computed for its ``after_run`` (key it by the hook, ``run_context.step_state[self]``),
        so the hook stays right when steps overlap."""
        try:
            return self._step_state
        except AttributeError:
            state: dict[object, Any] = {}
            self._step_state = state
            return state

    @property
    def stop_requested(self) -> bool:
        """Whether any hook (or the caller) asked to stop during this step."""
        return self._stop_requested

    def request_stop(self) -> None:
        """Ask the monitored session to stop after this step (idempotent)."""
        self._stop_requested = True
        if self._on_stop is not None:
            self._on_stop()

    def __repr__(self) -> str:
        return (
            f"SessionRunContext(global_step={self.global_step}, "
            f"stop_requested={self._stop_requested})"
        )


class InFlightRunContext(SessionRunContext):
    """The run context of a step in flight (``max_in_flight > 1``): other steps may be in
    flight with this one, and ``ended`` turns True once the step is over, however it ended
    (its ``after_run`` phase done, or the step given up: failed, cancelled, re-run with a
    new context). A plain :class:`SessionRunContext` is one step at a time's: no other step
    is in flight during it."""

    __slots__ = ("_ended",)

    # No constructor of its own: a step in flight makes its context with one call
    # (``SessionRunContext.__init__``); the engine sets ``_ended`` when the step is over.
    _ended: bool

    @property
    def ended(self) -> bool:
        """Whether the step is over, however it ended."""
        try:
            return self._ended
        except AttributeError:  # not set: the step goes on
            return False


class SessionRunValues(NamedTuple):
    """What ``after_run`` receives: this hook's ``results`` (its own structure, or ``None``),
    the merged ``options``, the step's ``run_metadata`` and the ``global_step`` after the step."""

    results: Any
    options: RunOptions
    run_metadata: RunMetadata
    global_step: int
