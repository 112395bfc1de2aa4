"""One admission rule at every ``max_in_flight``: ``run()`` and ``run_step_fn()`` from up to N
tasks run at once, and a further caller waits, in arrival order, then runs, or is refused
as it would be if it called then (``RunAfterStopError`` after a stop, ``SessionClosedError``
after a close). A call from inside one of the session's own steps is refused at once. Each
test runs with one lane and with two where the rule is the same."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    MonitoredSession,
    RetryPolicy,
    RunAfterStopError,
    SessionClosedError,
    SessionRunContext,
    SessionRunValues,
    StepContext,
    StepSession,
    UnavailableError,
)

pytestmark = pytest.mark.anyio

LIMIT = 10.0
LANES = [1, 2]


class Phases:
    """Records each hook phase with its step number; counts phases that overlapped and the
    calls of ``end``. Asks for a stop in the ``after_run`` of step ``stop_at``."""

    overlapping_steps = True

    def __init__(self, stop_at: int = 0) -> None:
        self.log: list[tuple[str, int]] = []
        self.active = 0
        self.overlapped = 0
        self.ends = 0
        self.stop_at = stop_at

    async def _phase(self, phase: str, step: int) -> None:
        self.active += 1
        self.overlapped += self.active > 1
        self.log.append((phase, step))
        await anyio.lowlevel.checkpoint()
        self.active -= 1

    async def before_run(self, run_context: SessionRunContext) -> None:
        await self._phase("before_run", run_context.global_step)

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await self._phase("after_run", run_values.global_step)
        if run_values.global_step == self.stop_at:
            run_context.request_stop()

    def end(self, session: Any) -> None:
        self.ends += 1


class Gate:
    """A raw run that waits for ``gate`` (once set, runs go straight through) and records
    which caller's feed it ran, in order of start."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.started: list[Any] = []

    async def __call__(self, feeds: Mapping[Any, Any]) -> dict[str, Any]:
        self.started.append(feeds.get("who"))
        if not self.gate.is_set():
            await self.gate.wait()
        await anyio.lowlevel.checkpoint()
        return {"y": feeds.get("who")}


def _session(run: Gate, hooks: list[Any], n: int, **kwargs: Any) -> MonitoredSession:
    return MonitoredSession(lambda: StepSession(run), hooks, max_in_flight=n, **kwargs)


def _each_lane(n: int, value: Any = None, **others: Any) -> dict[Any, Any]:
    """What the callers ``0 .. n-1`` got (their own number, or ``value``), and ``others``."""
    expected: dict[Any, Any] = {who: who if value is None else value for who in range(n)}
    expected.update(others)
    return expected


async def _hold_every_lane(tg: Any, sess: MonitoredSession, results: dict[Any, Any], n: int) -> None:
    """Start ``n`` callers ``0 .. n-1`` of ``run()`` in ``tg`` (their outcomes go to ``results``)
    and wait until each holds a lane, its run waiting at the gate."""
    for who in range(n):
        tg.start_soon(_outcome, results, who, lambda who=who: sess.run("y", {"who": who}))
    await anyio.wait_all_tasks_blocked()


async def _outcome(results: dict[Any, Any], who: Any, call: Any) -> None:
    """Await ``call()``; its value, or its exception's type, goes to ``results[who]``."""
    try:
        results[who] = await call()
    except Exception as exc:
        results[who] = type(exc)


@pytest.mark.parametrize("n", LANES)
async def test_more_callers_than_lanes_all_complete_one_phase_at_a_time(n: int) -> None:
    hook = Phases()
    run = Gate()
    callers = n + 3
    results: dict[Any, Any] = {}
    async with _session(run, [hook], n) as sess:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                for who in range(callers):
                    tg.start_soon(_outcome, results, who, lambda who=who: sess.run("y", {"who": who}))
                await anyio.wait_all_tasks_blocked()
                assert len(run.started) == n  # the others wait for a lane
                run.gate.set()
        assert results == {who: who for who in range(callers)}
        assert await sess.step_counter.get() == callers
    assert hook.overlapped == 0
    assert sorted(step for phase, step in hook.log if phase == "after_run") == list(range(1, callers + 1))
    assert sorted(step for phase, step in hook.log if phase == "before_run") == list(range(callers))
    assert hook.ends == 1


class Admitted:
    """Records whose step each ``before_run`` is: with lanes, the steps' admission order."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.order: list[Any] = []

    def before_run(self, run_context: SessionRunContext) -> None:
        feeds = run_context.original_args.feed_dict
        assert feeds is not None
        self.order.append(feeds["who"])


@pytest.mark.parametrize("n", LANES)
async def test_callers_looping_on_run_cannot_overtake_a_waiting_caller(n: int) -> None:
    run = Gate()
    admitted = Admitted()
    async with _session(run, [admitted], n) as sess:

        async def loop() -> None:
            for _ in range(5):
                await sess.run("y", {"who": "loop"})

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                for _ in range(n):
                    tg.start_soon(loop)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(sess.run, "y", {"who": "waiter"})
                await anyio.wait_all_tasks_blocked()
                run.gate.set()
    # The first lane freed goes to the caller waiting, before any looping caller's next step:
    # with one lane its step is the second. (With lanes the caller handed a lane is admitted
    # once it is scheduled, which on trio may come after steps on the other lanes.)
    waited = admitted.order.index("waiter")
    assert waited == 1 if n == 1 else n <= waited < 5 * n
    assert len(admitted.order) == len(run.started) == 5 * n + 1


@pytest.mark.parametrize("n", LANES)
async def test_a_caller_cancelled_while_it_waits_leaves_the_others_their_turn(n: int) -> None:
    run = Gate()
    results: dict[Any, Any] = {}
    async with _session(run, [], n) as sess:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                await _hold_every_lane(tg, sess, results, n)
                cancelled = anyio.CancelScope()

                async def cancelled_caller() -> None:
                    with cancelled:
                        await sess.run("y", {"who": "cancelled"})
                    results["cancelled"] = "cancelled" if cancelled.cancelled_caught else "ran"

                tg.start_soon(cancelled_caller)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(_outcome, results, "after", lambda: sess.run("y", {"who": "after"}))
                await anyio.wait_all_tasks_blocked()
                cancelled.cancel()
                await anyio.wait_all_tasks_blocked()
                run.gate.set()
            assert await sess.run("y", {"who": "last"}) == "last"
    assert results == _each_lane(n, cancelled="cancelled", after="after")
    assert "cancelled" not in run.started


@pytest.mark.parametrize("n", LANES)
async def test_a_caller_cancelled_as_it_is_handed_a_lane_passes_it_on(n: int) -> None:
    """The caller whose step ends cancels the first caller waiting at once: the lane it was
    just handed goes on to the next one, which runs; nothing waits for ever."""
    run = Gate()
    results: dict[Any, Any] = {}
    async with _session(run, [], n) as sess:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                cancelled = anyio.CancelScope()

                async def holder(who: int) -> None:
                    results[who] = await sess.run("y", {"who": who})
                    cancelled.cancel()  # no checkpoint since its step ended and handed its lane on

                async def first_waiter() -> None:
                    with cancelled:
                        await sess.run("y", {"who": "first"})

                for who in range(n):
                    tg.start_soon(holder, who)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(first_waiter)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(_outcome, results, "next", lambda: sess.run("y", {"who": "next"}))
                await anyio.wait_all_tasks_blocked()
                run.gate.set()
            assert await sess.run("y", {"who": "last"}) == "last"
    assert results == _each_lane(n, next="next")


@pytest.mark.parametrize("n", LANES)
@pytest.mark.parametrize("close_first", [False, True])
async def test_a_close_while_callers_wait_refuses_them_and_returns(n: int, close_first: bool) -> None:
    """A close from another task waits for the steps in progress, not for the callers queued:
    they are refused with ``SessionClosedError``, as a call after the close is, and ``end``
    runs once, after the steps in progress."""
    hook = Phases()
    run = Gate()
    results: dict[Any, Any] = {}
    async with _session(run, [hook], n) as sess:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                await _hold_every_lane(tg, sess, results, n)
                if close_first:
                    tg.start_soon(_outcome, results, "close", sess.aclose)
                    await anyio.wait_all_tasks_blocked()
                for name in ("a", "b", "c"):
                    tg.start_soon(_outcome, results, name, lambda: sess.run_step_fn(_noop))
                    await anyio.wait_all_tasks_blocked()
                if not close_first:
                    tg.start_soon(_outcome, results, "close", sess.aclose)
                    await anyio.wait_all_tasks_blocked()
                assert "close" not in results and hook.ends == 0  # it waits for the steps in progress
                run.gate.set()
    assert results == _each_lane(n, a=SessionClosedError, b=SessionClosedError, c=SessionClosedError, close=None)
    assert hook.ends == 1
    assert hook.log[-1] == ("after_run", n)  # end came after the last step's after_run


@pytest.mark.parametrize("n", LANES)
async def test_a_stop_while_callers_wait_refuses_them(n: int) -> None:
    hook = Phases(stop_at=1)
    run = Gate()
    results: dict[Any, Any] = {}
    async with _session(run, [hook], n) as sess:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                await _hold_every_lane(tg, sess, results, n)
                for name in ("a", "b"):
                    tg.start_soon(_outcome, results, name, lambda name=name: sess.run("y", {"who": name}))
                    await anyio.wait_all_tasks_blocked()
                tg.start_soon(_outcome, results, "step_fn", lambda: sess.run_step_fn(_noop))
                await anyio.wait_all_tasks_blocked()
                run.gate.set()
        assert sess.should_stop()
    assert results == _each_lane(n, a=RunAfterStopError, b=RunAfterStopError, step_fn=RunAfterStopError)
    assert hook.ends == 1


@pytest.mark.parametrize("n", LANES)
@pytest.mark.parametrize("where", ["hook", "step function", "task of a step function", "raw run"])
async def test_a_call_from_inside_the_sessions_own_step_is_refused_at_once(n: int, where: str) -> None:
    holder: list[MonitoredSession] = []
    refused: list[BaseException] = []

    async def again() -> None:
        try:
            await holder[0].run("y", {"who": "inside"})
        except RuntimeError as exc:
            refused.append(exc)

    class Reenters:
        overlapping_steps = True

        async def before_run(self, run_context: SessionRunContext) -> None:
            if where == "hook":
                await again()

    async def raw(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        if where == "raw run" and feeds.get("who") != "inside":
            await again()
        return {"y": 1}

    async def step_fn(ctx: StepContext) -> Any:
        if where == "step function":
            await again()
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(again)  # a task of its own, inside the step all the same
        return await ctx.run_with_hooks("y")

    async with MonitoredSession(lambda: StepSession(raw), [Reenters()], max_in_flight=n) as sess:
        holder.append(sess)
        with anyio.fail_after(LIMIT):
            if where in ("hook", "raw run"):
                assert await sess.run("y") == 1
            else:
                assert await sess.run_step_fn(step_fn) == 1
    assert len(refused) == 1
    assert "from inside one of its own steps" in str(refused[0])


@pytest.mark.parametrize("n", LANES)
async def test_iterate_in_one_task_and_run_in_another_take_turns(n: int) -> None:
    hook = Phases()
    run = Gate()
    run.gate.set()
    async with _session(run, [hook], n) as sess:
        taken: list[Any] = []
        ran: list[Any] = []

        async def iterate() -> None:
            async for y in sess.iterate("y", ({"who": ("it", i)} for i in range(6))):
                taken.append(y)

        async def runs() -> None:
            for i in range(6):
                ran.append(await sess.run("y", {"who": ("run", i)}))

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(iterate)
                tg.start_soon(runs)
    assert taken == [("it", i) for i in range(6)] and ran == [("run", i) for i in range(6)]
    assert hook.overlapped == 0
    assert sorted(step for phase, step in hook.log if phase == "after_run") == list(range(1, 13))


@pytest.mark.parametrize("n", LANES)
async def test_a_run_waits_for_step_functions_holding_the_lanes(n: int) -> None:
    run = Gate()
    run.gate.set()
    hold = anyio.Event()
    results: dict[Any, Any] = {}
    async with _session(run, [], n) as sess:

        async def holding(ctx: StepContext) -> Any:
            await hold.wait()
            return await ctx.run_with_hooks("y", {"who": "step_fn"})

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                for who in range(n):
                    tg.start_soon(_outcome, results, who, lambda: sess.run_step_fn(holding))
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(_outcome, results, "run", lambda: sess.run("y", {"who": "run"}))
                await anyio.wait_all_tasks_blocked()
                assert run.started == []  # the run waits for a lane
                hold.set()
    assert results == _each_lane(n, "step_fn", run="run")
    assert run.started == ["step_fn"] * n + ["run"]


async def test_a_close_while_a_step_recovers_and_a_caller_waits() -> None:
    """One lane: the step in progress waits to retry after losing its session, a caller waits
    for it; a close stops the retry at once (the step raises ``SessionClosedError``) and the
    caller is refused the same way; the close returns."""
    calls = {"n": 0}

    async def lost_once(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise UnavailableError("lost")
        return {"y": 1}

    results: dict[Any, Any] = {}
    slow = RetryPolicy(initial_delay=3600, max_delay=3600)
    async with MonitoredSession(lambda: StepSession(lost_once), [], retry=slow) as sess:
        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_outcome, results, "step", lambda: sess.run("y"))
                await anyio.wait_all_tasks_blocked()  # waiting to retry
                tg.start_soon(_outcome, results, "waiter", lambda: sess.run("y"))
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(_outcome, results, "close", sess.aclose)
    assert results == {"step": SessionClosedError, "waiter": SessionClosedError, "close": None}


async def test_a_second_hooked_run_cancelled_while_it_waits_leaves_the_lane_to_a_third() -> None:
    """One lane: a step function's hooked runs from three tasks take turns; the second one,
    cancelled while it waits, is skipped."""
    hook = Phases()
    run = Gate()
    async with _session(run, [hook], 1) as sess:

        async def step_fn(ctx: StepContext) -> Any:
            results: dict[Any, Any] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(_outcome, results, 1, lambda: ctx.run_with_hooks("y", {"who": 1}))
                await anyio.wait_all_tasks_blocked()
                cancelled = anyio.CancelScope()

                async def second() -> None:
                    with cancelled:
                        await ctx.run_with_hooks("y", {"who": 2})

                tg.start_soon(second)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(_outcome, results, 3, lambda: ctx.run_with_hooks("y", {"who": 3}))
                await anyio.wait_all_tasks_blocked()
                cancelled.cancel()
                await anyio.wait_all_tasks_blocked()
                run.gate.set()
            return results

        with anyio.fail_after(LIMIT):
            assert await sess.run_step_fn(step_fn) == {1: 1, 3: 3}
    assert run.started == [1, 3]
    assert hook.log == [("before_run", 0), ("after_run", 1), ("before_run", 1), ("after_run", 2)]


@pytest.mark.parametrize("n", [1, 2])
async def test_a_hooked_run_from_inside_the_hooked_run_in_progress_is_refused_at_once(n: int) -> None:
    """A hook of a step function's hooked run that calls ``run_with_hooks`` again (the step
    function's context, reached from the hook) would wait for its own hooked run."""
    contexts: list[StepContext] = []
    refused: list[BaseException] = []

    class Reenters:
        overlapping_steps = True

        async def before_run(self, run_context: SessionRunContext) -> None:
            if contexts:
                try:
                    await contexts.pop().run_with_hooks("y", {"who": "inside"})
                except RuntimeError as exc:
                    refused.append(exc)

    run = Gate()
    run.gate.set()
    async with _session(run, [Reenters()], n) as sess:

        async def step_fn(ctx: StepContext) -> Any:
            contexts.append(ctx)
            return await ctx.run_with_hooks("y", {"who": "step_fn"})

        with anyio.fail_after(LIMIT):
            assert await sess.run_step_fn(step_fn) == "step_fn"
            assert await sess.run("y", {"who": "after"}) == "after"  # nothing left held
    assert len(refused) == 1 and "from inside one of its own steps" in str(refused[0])
    assert run.started == ["step_fn", "after"]


async def _noop(ctx: StepContext) -> None:
    return None


@pytest.mark.parametrize("n", LANES)
@pytest.mark.parametrize("how", ["error", "cancel"])
async def test_callers_waiting_are_refused_when_the_block_leaves_without_waiting(n: int, how: str) -> None:
    """The block is left with an error, or cancelled, while every lane's step is stuck and
    callers wait: the close does not wait for those steps, and the callers waiting are refused
    at once with ``SessionClosedError`` (not when the steps end)."""
    run = Gate()
    results: dict[Any, Any] = {}
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            with pytest.raises(ValueError) if how == "error" else contextlib.nullcontext():
                with anyio.CancelScope() as block:
                    async with _session(run, [], n, stop_grace_period=0.1) as sess:
                        await _hold_every_lane(tg, sess, results, n)
                        tg.start_soon(_outcome, results, "b", lambda: sess.run("y", {"who": "b"}))
                        tg.start_soon(_outcome, results, "c", lambda: sess.run_step_fn(_noop))
                        await anyio.wait_all_tasks_blocked()
                        if how == "error":
                            raise ValueError("the block fails")
                        block.cancel()
                        await anyio.lowlevel.checkpoint()
            for _ in range(10):  # the callers waiting end without the steps in progress ending
                await anyio.lowlevel.checkpoint()
            assert results.get("b") is SessionClosedError and results.get("c") is SessionClosedError
            run.gate.set()  # the steps stuck with one lane end too (with lanes the close cancelled them)
    assert set(results) == {*range(n), "b", "c"}
