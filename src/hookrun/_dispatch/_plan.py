"""What each phase calls, decided once when the hooks are frozen. Pure, no I/O.

``plan_hooks`` validates the hooks (an object with none of the hook methods is
a ``TypeError`` naming it) and records, for every phase, the hooks that really
override that method, each marked sync or async, and each async one marked as
one that may suspend or not (``may_suspend``: an ``async def`` whose own code has no
``await``, ``async for`` or ``async with`` cannot).
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

from .._hook_protocol import HOOK_METHODS, SessionRunHook

__all__ = ["Call", "PhasePlan", "hook_name", "is_async_callable", "may_suspend", "plan_hooks"]

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


#: The instructions through which a coroutine's own code can suspend (``await``,
#: ``async for``, ``async with``; ``YIELD_FROM`` before Python 3.11).
_SUSPENDING = frozenset({
    "YIELD_VALUE", "YIELD_FROM", "SEND", "GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH",
    "END_ASYNC_FOR",
})


def may_suspend(fn: object) -> bool:
    """Whether a call of the async callable ``fn`` may suspend. ``False`` only for an
    ``async def`` function, or a method of one, whose own code has none of the
    instructions of ``await``, ``async for`` and ``async with``: its coroutine cannot
    yield to the event loop, so it runs to its end at the first ``send``, whatever it
    calls. Anything else (a decorated or partial function, an object with an async
    ``__call__``, compiled code) may."""
    func = getattr(fn, "__func__", fn)  # a bound method's function
    if type(func) is not types.FunctionType or not func.__code__.co_flags & inspect.CO_COROUTINE:
        return True
    return any(instruction.opname in _SUSPENDING for instruction in dis.get_instructions(func.__code__))


class Call:
    """One hook method of one phase: the hook's position, name, function and kind
    (``is_async``; ``may_suspend``: async, and able to wait)."""

    __slots__ = ("fn", "hook", "index", "is_async", "may_suspend", "name", "party", "phase")

    def __init__(
        self, index: int, hook: object, phase: str, fn: Callable[..., Any], *, waits: bool | None = None
    ) -> None:
        self.index = index
        self.hook = hook
        self.name = hook_name(hook)
        self.party = f"hook {self.name}"  # how errors about its requests name it
        self.phase = phase
        self.fn = fn
        self.is_async = is_async_callable(fn)
        self.may_suspend = self.is_async and (may_suspend(fn) if waits is None else waits)

    def wrapped(self, fn: Callable[..., Any]) -> Call:
        """This call running ``fn`` instead: a wrapper of its function of the same kind
        (plain stays plain; async stays async, and awaits nothing but the function, so it
        waits only where the function does), for the same hook, name and position."""
        copy = Call(self.index, self.hook, self.phase, fn, waits=self.may_suspend)
        copy.name, copy.party = self.name, self.party
        return copy


class PhasePlan:
    """The calls of one phase, in hook list order, and how the dispatcher starts them.

    Everything here is fixed when the hooks are frozen, except ``waiters``: how many
    hooks waited in the phase's last run that had one wait. It only decides how many
    pooled workers are woken at once when a hook waits, never whether or how a call is
    cancelled, so a wrong guess costs a wake-up, not correctness.
    """

    __slots__ = ("calls", "cancellable", "lone", "n_async", "phase", "plain", "runs", "waiters")

    def __init__(self, phase: str, calls: Sequence[Call]) -> None:
        self.phase = phase
        self.calls = tuple(calls)
        self.waiters = 0
        self.refresh()

    def refresh(self) -> None:
        """Recompute what depends on the calls' functions (after the dispatcher wraps them)."""
        self.n_async = sum(call.is_async for call in self.calls)
        #: Whether a call may be waiting while another fails (any call after one that may
        #: suspend), so that running the phase needs a cancel scope around the calling task.
        #: An async call that cannot suspend (``may_suspend``) has ended before the next
        #: one starts, like a plain function's: a phase of those needs no scope.
        first_waiting = next((p for p, call in enumerate(self.calls) if call.may_suspend), len(self.calls))
        self.cancellable = first_waiting < len(self.calls) - 1
        #: The two shapes of phase the step starts without the dispatcher (``_start.py``):
        #: every call a plain function (their functions), or one async call (its function).
        self.plain = tuple(call.fn for call in self.calls) if self.calls and not self.n_async else None
        self.lone = self.calls[0].fn if len(self.calls) == 1 and self.n_async else None
        #: Per position: ``(is_async, functions)``, the functions of the calls from there up
        #: to the next call of the other kind (or the end), which are started in one loop.
        runs: list[tuple[bool, tuple[Callable[..., Any], ...]]] = []
        for call in reversed(self.calls):  # from the end: each run extends the one after it
            after = runs[-1] if runs and runs[-1][0] is call.is_async else (call.is_async, ())
            runs.append((call.is_async, (call.fn, *after[1])))
        runs.reverse()
        self.runs = tuple(runs)


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
