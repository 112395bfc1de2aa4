"""What ``drive`` records: every hook call, every session run, and the outcome.

Plain data filled in while the session runs (``HookCall`` and ``SessionRun``
are completed when their call ends), then read by the test through
``Record``'s questions: what did this hook ask for, at which steps, what did it
receive, who requested stop, how many sessions were created.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._hook_protocol import RunOptions, SessionRunArgs, SessionRunValues

__all__ = ["HookCall", "Record", "SessionRun"]


@dataclass(slots=True, eq=False)
class HookCall:
    """One call of one hook method.

    ``step`` is ``run_context.global_step`` (the step before the run) for
    ``before_run``/``after_run``, else ``None``; ``time`` is the clock's
    reading when the call began; ``session`` numbers the session of the call's step (or
    the one it was given, for ``after_create_session``; else the session created last:
    0 for the first, -1 before any). ``outcome`` is ``"running"``,
    ``"returned"``, ``"raised"`` or ``"cancelled"``. ``exception`` is what an
    ``on_exception`` call received (the error, or the cancellation), else ``None``.
    """

    hook: object
    name: str
    phase: str
    step: int | None
    time: float
    session: int
    request: SessionRunArgs | None = None
    run_values: SessionRunValues | None = None
    requested_stop: bool = False
    outcome: str = "running"
    error: BaseException | None = None
    exception: BaseException | None = None

    @property
    def results(self) -> Any:
        """What ``after_run`` received as ``run_values.results`` (``None`` otherwise)."""
        return None if self.run_values is None else self.run_values.results

    @property
    def asked(self) -> bool:
        """Whether this ``before_run`` asked for fetches, feeds or options."""
        request = self.request
        return request is not None and any(part is not None for part in request)


@dataclass(slots=True, eq=False)
class SessionRun:
    """One ``run`` of a scripted session: script position ``index``, what it was asked,
    and ``outcome`` (``"returned"``, ``"raised"``, ``"hang"`` then ``"cancelled"``)."""

    session: int
    index: int
    fetches: list[Hashable]
    feed_dict: dict[Hashable, Any]
    options: RunOptions
    outcome: str = "running"
    error: BaseException | None = None
    values: list[Any] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class Record:
    """The life ``drive`` ran: ask it questions about one hook (by object or name;
    ``None`` means the first hook given).

    ``results`` holds what each caller ``run()`` returned (each step's, in step order);
    ``sessions`` and ``closed`` count scripted sessions created and closed (one per lane
    with ``max_in_flight=N``: ``lanes``); ``creation_attempts``
    counts creations tried; ``error`` is what escaped the monitored session (only
    when ``drive(raises=...)`` expected it); ``cancelled`` tells whether
    ``cancel_after`` cancelled the life before it ended.
    """

    hooks: list[object]
    calls: list[HookCall] = field(default_factory=list)
    runs: list[SessionRun] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    sessions: int = 0
    closed: int = 0
    creation_attempts: int = 0
    error: BaseException | None = None
    cancelled: bool = False
    lanes: int = 1

    def __repr__(self) -> str:
        return (
            f"<Record steps={self.steps} runs={len(self.runs)} calls={len(self.calls)} "
            f"sessions={self.sessions} stop={self.stopped_at} error={self.error!r} "
            f"cancelled={self.cancelled}>"
        )

    @property
    def steps(self) -> int:
        """How many session runs returned values (steps completed)."""
        return sum(run.outcome == "returned" for run in self.runs)

    @property
    def recoveries(self) -> int:
        """How many times a session was re-created (past one per lane)."""
        return max(self.sessions - self.lanes, 0)

    @property
    def stop(self) -> HookCall | None:
        """The first hook call that requested stop, or ``None``."""
        return next((call for call in self.calls if call.requested_stop), None)

    @property
    def stopped_at(self) -> int | None:
        """The step (before the run) in which a hook first requested stop, or ``None``."""
        stop = self.stop
        return None if stop is None else stop.step

    def of(self, hook: object = None, phase: str | None = None) -> list[HookCall]:
        """The calls of ``hook`` (of ``phase`` only, if given), in the order they began."""
        target = self._hook(hook)
        return [
            call
            for call in self.calls
            if call.hook is target and (phase is None or call.phase == phase)
        ]

    def phases(self, hook: object = None) -> list[str]:
        """The phases ``hook`` was called in, in order."""
        return [call.phase for call in self.of(hook)]

    def requests(self, hook: object = None) -> list[SessionRunArgs | None]:
        """What each ``before_run`` of ``hook`` returned."""
        return [call.request for call in self.of(hook, "before_run")]

    def requested_at(self, hook: object = None) -> list[int]:
        """The steps at which ``hook``'s ``before_run`` asked for fetches, feeds or options."""
        return [call.step for call in self.of(hook, "before_run") if call.asked and call.step is not None]

    def received(self, hook: object = None) -> list[Any]:
        """What each ``after_run`` of ``hook`` received as ``run_values.results``."""
        return [call.results for call in self.of(hook, "after_run")]

    def raised(self, hook: object = None) -> list[BaseException]:
        """The exceptions ``hook``'s calls raised, in order."""
        return [call.error for call in self.of(hook) if call.error is not None]

    def _hook(self, hook: object) -> object:
        if hook is None:
            if not self.hooks:
                raise LookupError("drive() was given no hooks")
            return self.hooks[0]
        if any(hook is known for known in self.hooks):
            return hook
        if isinstance(hook, str):
            named = [known for known in self.hooks if _name(known) == hook]
            if len(named) == 1:
                return named[0]
            if named:
                raise LookupError(f"{len(named)} hooks are named {hook!r}; pass the hook object")
        names = ", ".join(_name(known) for known in self.hooks)
        raise LookupError(f"{hook!r} is not one of the hooks drive() ran ({names})")


def _name(hook: object) -> str:
    name = getattr(hook, "name", None)
    return name if isinstance(name, str) else type(hook).__name__


def as_mapping(value: object, where: str) -> Mapping[Hashable, Any]:
    """``value`` if it is a mapping (``None`` is empty), else a ``TypeError`` naming ``where``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a mapping of fetch key to value, got {type(value).__name__}")
    return value
