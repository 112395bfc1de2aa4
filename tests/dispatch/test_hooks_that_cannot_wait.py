"""Async hooks whose code cannot wait (an ``async def`` with no ``await``, ``async for`` or
``async with``): a phase of them needs no cancel scope, since each call ends before the
next one starts, and every guarantee holds as on every other path, cold and warm: results,
errors, context isolation, a sibling that does wait, cancellation from outside; a hook
whose code is replaced by one that waits after the session was made is refused, naming it.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from hookrun._dispatch._plan import may_suspend, plan_hooks
from hookrun.testing import ScriptedCreator

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("no_wait_var", default="unset")
WARM_STEPS = 300


# -- what may wait ----------------------------------------------------------------------------


async def _returns(x: int) -> int:
    return x + 1


async def _awaits(x: int) -> None:
    await anyio.lowlevel.checkpoint()


async def _awaits_in_a_branch(x: int) -> None:
    if x > 10**9:
        await anyio.lowlevel.checkpoint()


async def _async_for(items: AsyncIterator[int]) -> None:
    async for _ in items:
        pass


async def _async_with(lock: anyio.Lock) -> None:
    async with lock:
        pass


async def _async_comprehension(items: AsyncIterator[int]) -> list[int]:
    return [item async for item in items]


async def _await_in_a_comprehension(xs: list[Any]) -> list[Any]:
    return [await x for x in xs]


def _plain(x: int) -> int:
    return x


class _AsyncCall:
    async def __call__(self, x: int) -> int:
        return x


class _Methods:
    async def quiet(self, x: int) -> int:
        return x

    async def waits(self, x: int) -> None:
        await anyio.lowlevel.checkpoint()


def _decorated(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any) -> Any:
        return await fn(*args)

    return wrapper


@pytest.mark.parametrize(
    ("fn", "waits"),
    [
        (_returns, False),
        (_Methods().quiet, False),
        (_awaits, True),
        (_awaits_in_a_branch, True),  # what the code could do, not what it did once
        (_async_for, True),
        (_async_with, True),
        (_async_comprehension, True),
        (_await_in_a_comprehension, True),
        (_Methods().waits, True),
        (_decorated(_returns), True),  # a wrapper awaits: never looked through
        (functools.partial(_returns, 1), True),  # not a function: assumed to wait
        (_AsyncCall(), True),  # an async __call__: assumed to wait
        (_plain, True),  # not a coroutine function: only ever asked of async calls
    ],
    ids=lambda value: getattr(value, "__name__", type(value).__name__) if not isinstance(value, bool) else str(value),
)
def test_may_suspend_reads_the_code_of_an_async_def(fn: Any, waits: bool) -> None:
    assert may_suspend(fn) is waits


class Quiet(SessionRunHook):
    """Async methods that cannot wait; ``sets`` sets the variable, ``fails`` raises."""

    overlapping_steps = True

    def __init__(self, name: str = "quiet", *, sets: bool = False) -> None:
        self.name = name
        self.sets, self.fails = sets, False
        self.seen: list[str] = []

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self.seen.append(VAR.get())
        if self.sets:
            VAR.set(f"set by {self.name}")
        if self.fails:
            raise ValueError(f"{self.name} failed")
        return None

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.seen.append(VAR.get())


class Waits(SessionRunHook):
    """An async ``before_run`` that waits ``seconds``, noting a cancellation."""

    overlapping_steps = True

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.cancelled = 0
        self.calls = 0

    async def before_run(self, run_context: SessionRunContext) -> None:
        self.calls += 1
        try:
            await anyio.sleep(self.seconds)
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise


def test_a_phase_of_hooks_that_cannot_wait_needs_no_cancel_scope() -> None:
    """Only a call that may wait with a call after it makes a phase need a scope."""
    assert not plan_hooks([Quiet(str(i)) for i in range(10)])["before_run"].cancellable
    assert not plan_hooks([Quiet(), Quiet(), Waits()])["before_run"].cancellable  # the one that waits is last
    assert plan_hooks([Quiet(), Waits(), Quiet()])["before_run"].cancellable
    assert plan_hooks([Waits(), Waits()])["before_run"].cancellable


async def _warm(sess: hookrun.MonitoredSession, warm: bool) -> None:
    if warm:
        for _ in range(WARM_STEPS):
            await sess.run()


@pytest.mark.anyio
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
async def test_each_call_starts_in_the_callers_context_and_leaves_it_unchanged(warm: bool) -> None:
    hooks = [Quiet("a"), Quiet("b", sets=True), Quiet("c"), Quiet("d", sets=True), Quiet("e")]
    VAR.set("the caller's")
    async with hookrun.MonitoredSession(ScriptedCreator(), hooks) as sess:
        await _warm(sess, warm)
        for hook in hooks:
            hook.seen.clear()
        await sess.run()
    assert all(hook.seen == ["the caller's", "the caller's"] for hook in hooks), [hook.seen for hook in hooks]
    assert VAR.get() == "the caller's"


@pytest.mark.anyio
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
async def test_an_error_ends_the_phase_and_no_later_call_starts(warm: bool) -> None:
    first, failing, later = Quiet("first"), Quiet("failing"), Quiet("later")
    async with hookrun.MonitoredSession(ScriptedCreator(), [first, failing, later]) as sess:
        await _warm(sess, warm)
        calls = len(later.seen)
        failing.fails = True
        with pytest.raises(ValueError, match="failing failed"):
            await sess.run()
        assert len(later.seen) == calls  # its before_run did not start
        failing.fails = False
        await sess.run()
        assert sess.statistics().hook("failing", "before_run").errors == 1


@pytest.mark.anyio
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
async def test_a_hook_that_waits_after_them_is_driven_to_its_end(warm: bool) -> None:
    waits = Waits(0.001)
    hooks: list[SessionRunHook] = [Quiet("a"), Quiet("b"), waits]
    async with hookrun.MonitoredSession(ScriptedCreator(), hooks) as sess:
        await _warm(sess, warm)
        with anyio.fail_after(5):
            await sess.run()
    assert waits.calls == (WARM_STEPS + 1 if warm else 1) and waits.cancelled == 0


@pytest.mark.anyio
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
async def test_one_that_fails_beside_a_waiting_hook_cancels_it(warm: bool) -> None:
    """A hook that waits, then one that cannot wait and fails: the phase needs and has a
    scope, and the failure cancels the waiting hook at once."""
    waits, failing = Waits(), Quiet("failing")
    async with hookrun.MonitoredSession(ScriptedCreator(), [waits, failing]) as sess:
        await _warm(sess, warm)
        waits.seconds, failing.fails = 60, True
        with anyio.fail_after(5), pytest.raises(ValueError, match="failing failed"):
            await sess.run()
    assert waits.cancelled == 1


@pytest.mark.anyio
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
async def test_a_step_cancelled_from_outside_while_the_last_hook_waits(warm: bool) -> None:
    waits = Waits()
    async with hookrun.MonitoredSession(ScriptedCreator(), [Quiet("a"), Quiet("b"), waits]) as sess:
        await _warm(sess, warm)
        waits.seconds = 60
        with anyio.move_on_after(0.05) as scope:
            await sess.run()
        assert scope.cancelled_caught and waits.cancelled == 1


async def _waits_instead(self: Any, run_context: SessionRunContext) -> None:
    await anyio.lowlevel.checkpoint()


@pytest.mark.anyio
async def test_a_hook_whose_code_is_replaced_after_the_session_was_made_is_refused() -> None:
    """The plan was made from code that could not wait: code that waits put in its place
    later (beside another hook) is refused with an error naming the hook, not run with a
    sibling left unstarted."""

    class Replaced(SessionRunHook):
        overlapping_steps = True

        async def before_run(self, run_context: SessionRunContext) -> None:
            return None

    after = Quiet("after")
    async with hookrun.MonitoredSession(ScriptedCreator(), [Replaced(), after]) as sess:
        await sess.run()
        Replaced.before_run.__code__ = _waits_instead.__code__
        with pytest.raises(RuntimeError, match="hook Replaced waited in before_run, but its code had no await"):
            await sess.run()
    assert len(after.seen) == 2  # before_run and after_run of the first step only
