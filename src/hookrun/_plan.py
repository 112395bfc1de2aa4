"""What each phase calls, decided once when the hooks are frozen. Pure, no I/O.

``plan_hooks`` validates the hooks (an object with none of the five methods is
a ``TypeError`` naming it) and records, for every phase, the hooks that really
override that method, each marked sync or async. ``PhasePlan`` also carries what
the dispatcher learns at run time: whether the phase needs a cancel scope.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ._hooks import HOOK_METHODS, SessionRunHook

__all__ = ["QUIET_RUNS_BEFORE_UNSCOPED", "Call", "PhasePlan", "hook_name", "is_async_callable", "plan_hooks"]

_BASE_METHODS = {name: getattr(SessionRunHook, name) for name in HOOK_METHODS}


def hook_name(hook: object) -> str:
    """A hook's display name: its ``name`` attribute if it is a string, else its class name."""
    name = getattr(hook, "name", None)
    return name if isinstance(name, str) else type(hook).__name__


def _overrides(hook: object, method: str) -> Callable[..., Any] | None:
    """The bound method if ``hook`` really implements ``method``, else None."""
    bound = getattr(hook, method, None)
    if bound is None:
        return None
    if not callable(bound):
        raise TypeError(f"hook {hook_name(hook)}: attribute {method!r} is not callable")
    func = getattr(bound, "__func__", None)
    if func is not None and func is _BASE_METHODS[method]:
        return None
    return bound  # type: ignore[no-any-return]


def is_async_callable(fn: object) -> bool:
    """Whether calling ``fn`` returns a coroutine (async def, or an object with async __call__)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )


class Call:
    """One hook method of one phase: the hook's position, name, function and kind."""

    __slots__ = ("fn", "hook", "index", "is_async", "name", "party", "phase")

    def __init__(self, index: int, hook: object, phase: str, fn: Callable[..., Any]) -> None:
        self.index = index
        self.hook = hook
        self.name = hook_name(hook)
        self.party = f"hook {self.name}"  # how errors about its requests name it
        self.phase = phase
        self.fn = fn
        self.is_async = is_async_callable(fn)


#: Runs in a row without any suspension after which a hot phase drops its cancel scope.
QUIET_RUNS_BEFORE_UNSCOPED = 16
_HOT_PHASES = frozenset({"before_run", "after_run"})


class PhasePlan:
    """The calls of one phase, in hook list order, and what the dispatcher learnt about them.

    A phase with several async hooks runs under a cancel scope (so a failing hook can
    cancel every other one) until it has run ``QUIET_RUNS_BEFORE_UNSCOPED`` times in a
    row without any hook suspending; then it runs unscoped (no scope cost per step)
    until a hook suspends again. ``begin``, ``after_create_session`` and ``end`` are
    always scoped.
    """

    __slots__ = (
        "all_async", "calls", "can_unscope", "fns", "n_async", "phase", "quiet", "runs", "scoped", "single",
        "waiters",
    )

    def __init__(self, phase: str, calls: Sequence[Call]) -> None:
        self.phase = phase
        self.calls = tuple(calls)
        self.n_async = sum(call.is_async for call in self.calls)
        self.scoped = True
        self.can_unscope = phase in _HOT_PHASES
        self.quiet = 0
        #: How many hooks suspended in the phase's last run under the scoped or the
        #: suspension path (0: none did, or the phase never ran there).
        self.waiters = 0
        self.refresh()

    def refresh(self) -> None:
        """Recompute the fast path's ``(function, is_async)`` pairs after wrapping calls."""
        self.fns = tuple((call.fn, call.is_async) for call in self.calls)
        #: Per position: the functions of the async calls from there up to the next plain
        #: function (or the end), which the fast path starts in one loop; None at a plain one.
        runs: list[tuple[Callable[..., Any], ...] | None] = []
        run: tuple[Callable[..., Any], ...] = ()
        for call in reversed(self.calls):  # from the end: each run extends the one after it
            run = (call.fn, *run) if call.is_async else ()
            runs.append(run if call.is_async else None)
        runs.reverse()
        self.runs = tuple(runs)
        #: The functions of every call when all are async (several, or ``single`` is set), else None.
        self.all_async = runs[0] if len(runs) > 1 and self.n_async == len(runs) else None
        #: The function of the phase's only call, when that call is async (the K=1 fast path).
        self.single = self.calls[0].fn if len(self.calls) == 1 and self.calls[0].is_async else None

    def suspended(self) -> None:
        """A hook of this phase suspended: scope the phase again."""
        self.scoped = True
        self.quiet = 0

    def ran_quietly(self) -> None:
        """A run through the scoped path in which no hook suspended."""
        self.quiet += 1
        if self.can_unscope and self.quiet >= QUIET_RUNS_BEFORE_UNSCOPED:
            self.scoped = False


def plan_hooks(hooks: Sequence[object]) -> dict[str, PhasePlan]:
    """Validate ``hooks`` and compute each phase's plan; a non-hook is a ``TypeError`` naming it."""
    calls: dict[str, list[Call]] = {phase: [] for phase in HOOK_METHODS}
    for index, hook in enumerate(hooks):
        if isinstance(hook, type):
            raise TypeError(
                f"hooks[{index}] is the class {hook.__name__}, not a hook object; "
                f"pass an instance ({hook.__name__}())"
            )
        found = False
        for phase in HOOK_METHODS:
            fn = _overrides(hook, phase)
            if fn is not None:
                calls[phase].append(Call(index, hook, phase, fn))
                found = True
        if not found and not isinstance(hook, SessionRunHook):
            raise TypeError(
                f"hooks[{index}] = {hook!r} ({type(hook).__name__}) is not a hook: it has "
                f"none of the methods {', '.join(HOOK_METHODS)}"
            )
    return {phase: PhasePlan(phase, phase_calls) for phase, phase_calls in calls.items()}
