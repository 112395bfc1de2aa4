"""Generated scenarios run on the real runtime (asyncio and trio) and checked against
the sequential reference model in ``model.py``; plus the regressions they found."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun import AbortedError, MonitoredSession, RetryPolicy, SingularMonitoredSession
from hookrun.testing import ScriptedCreator

NO_WAIT = RetryPolicy(max_attempts=3, initial_delay=0, jitter=False)

# -- regressions found by the generated scenarios -------------------------------------------


@pytest.mark.anyio
async def test_monitored_session_recovers_from_aborted_session_run() -> None:
    """An AbortedError from the session's run re-creates the session and re-runs the step."""
    creator = ScriptedCreator({"x": 1}, session_errors={0: {0: AbortedError("preempted")}})
    async with MonitoredSession(creator, [], retry=NO_WAIT) as sess:
        with anyio.fail_after(5):
            assert await sess.run(["x"]) == [1]
    assert len(creator.sessions) == 2
    assert [s.closed for s in creator.sessions] == [1, 1]


@pytest.mark.anyio
async def test_singular_monitored_session_never_recovers() -> None:
    """SingularMonitoredSession lets a recoverable error propagate, creating one session only."""
    creator = ScriptedCreator({"x": 1}, session_errors={0: {0: AbortedError("preempted")}})
    async with SingularMonitoredSession(creator, []) as sess:
        with anyio.fail_after(5), pytest.raises(AbortedError, match="preempted"):
            await sess.run(["x"])
    assert len(creator.sessions) == 1


@pytest.mark.anyio
async def test_singular_should_stop_with_recoverable_error_in_coordinator() -> None:
    """A recorded error, even a recoverable one, stops a SingularMonitoredSession (§8);
    run() still works (a coordinator stop does not block it) and the error is raised at exit."""
    with pytest.raises(AbortedError, match="background"):
        async with SingularMonitoredSession(ScriptedCreator({"x": 1}), []) as sess:
            assert sess._coord is not None
            sess._coord.request_stop(AbortedError("background"))
            assert sess.should_stop()
            assert await sess.run(["x"]) == [1]


@pytest.mark.anyio
async def test_run_after_failed_recovery_creates_the_session_again() -> None:
    """After re-creating the session failed, the creator's error propagates, should_stop() stays
    False and the next run() tries again."""
    creator = ScriptedCreator(
        {"x": 1},
        session_errors={0: {0: AbortedError("preempted")}},
        errors={1: ValueError("cannot create")},
    )
    async with MonitoredSession(creator, [], retry=NO_WAIT) as sess:
        with pytest.raises(ValueError, match="cannot create"):
            await sess.run(["x"])
        assert not sess.should_stop()
        assert await sess.run(["x"]) == [1]
        assert not sess.should_stop()
    assert creator.attempts == 3
    assert [s.closed for s in creator.sessions] == [1, 1]


@pytest.mark.anyio
async def test_run_cancelled_during_recovery_leaves_the_session_usable() -> None:
    """Cancelling run() while the session is being re-created: the next run() re-creates it."""
    release = anyio.Event()

    class SlowCreator(ScriptedCreator):
        async def create_session(self) -> Any:
            if self.attempts == 1:
                self.attempts += 1
                await release.wait()
            return await super().create_session()

    creator = SlowCreator({"x": 1}, session_errors={0: {0: AbortedError("preempted")}})
    async with MonitoredSession(creator, [], retry=NO_WAIT) as sess:
        with anyio.move_on_after(0.05) as scope:
            await sess.run(["x"])
        assert scope.cancelled_caught
        release.set()
        with anyio.fail_after(5):
            assert await sess.run(["x"]) == [1]
    assert all(s.closed == 1 for s in creator.sessions)


@pytest.mark.anyio
async def test_a_recovery_cancelled_by_the_caller_is_resumed_by_the_next_run() -> None:
    """Several hooks fail with AbortedError in the same step and the caller cancels run()
    while recovery waits: the failed session is not stepped again; the next run() closes
    it and creates a new one first (the long profile's "(2, 3) sessions" scenario)."""
    raised = anyio.Event()
    creator = ScriptedCreator({"x": 1})

    class Aborts(hookrun.SessionRunHook):
        async def after_run(self, run_context: Any, run_values: Any) -> None:
            if run_context.session is creator.sessions[0]:  # every hook fails on the first session
                await anyio.lowlevel.checkpoint()
                raised.set()
                raise AbortedError("lost")

    slow_retry = RetryPolicy(max_attempts=None, initial_delay=30, jitter=False)
    async with MonitoredSession(creator, [Aborts(), Aborts(), Aborts()], retry=slow_retry) as sess:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as scope:

                    async def cancel_once_recovering() -> None:
                        await raised.wait()
                        await anyio.wait_all_tasks_blocked()  # run() waits to retry
                        scope.cancel()

                    tg.start_soon(cancel_once_recovering)
                    await sess.run("x")
        assert scope.cancelled_caught
        assert len(creator.sessions) == 1 and creator.sessions[0].closed == 0
        assert not sess.should_stop()
        assert await sess.run("x") == 1
        assert len(creator.sessions) == 2 and creator.sessions[0].closed == 1
        assert sess.raw_session() is creator.sessions[1]
        assert creator.sessions[0].steps == 1 and creator.sessions[1].steps == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_long_profile_scenario_matches_the_model(backend: str) -> None:
    """The generated scenario that once failed: three hooks whose async after_run raises
    AbortedError on its first call after a short sleep, runs mixed with runs cancelled
    after 0.5-1 ms, an OutOfRangeError exit; the outcome depends on timing, and the model,
    which reads what happened, agrees with the runtime every time."""
    from .model import check_scenario, run_scenario
    from .strategies import SLEEP, Action, CallerAction, HookPlan, Scenario

    hooks = [
        HookPlan(f"h{i}", {"after_run": "async"}, {"after_run": (Action(delay=SLEEP, sleep=s, effect="aborted"),)})
        for i, s in enumerate((0.001, 0.001, 0.002))
    ]
    hooks.append(HookPlan("h3", {"before_run": "async", "after_run": "sync"}, {}))
    for delay in (0.0005, 0.001):
        for kinds in (("cancel", "run"), ("run", "cancel", "run"), ("cancel", "cancel", "run")):
            scenario = Scenario(
                singular=False, hooks=tuple(hooks), session_errors={}, hang_at={}, creator_errors={},
                max_attempts=3, actions=tuple(CallerAction(kind, None, {}, delay) for kind in kinds), exit="oor",
            )
            for _ in range(5):
                check_scenario(scenario, anyio.run(run_scenario, scenario, backend=backend))


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_hang_cancelled_by_a_sibling_then_timed_out_on_the_retry(backend: str) -> None:
    """The generated scenario that once failed: an async after_run that hangs (cut short
    by a sibling's AbortedError on the first attempt, by its hook_timeout on the retry)
    beside a plain after_run that raises AbortedError once. The run() ends with the
    retry's HookTimeoutError; the first attempt's hang is the sibling's doing."""
    from .model import check_scenario, run_scenario
    from .strategies import Action, CallerAction, HookPlan, Scenario

    hang = Action(delay=0, sleep=0.0, effect="hang")
    scenario = Scenario(
        singular=False,
        hooks=(
            HookPlan("h0", {"after_run": "async"}, {"after_run": (hang, hang)}),
            HookPlan("h1", {"before_run": "sync", "after_run": "sync"}, {"after_run": (Action(effect="aborted"),)}),
        ),
        session_errors={}, hang_at={0: (0,)}, creator_errors={}, max_attempts=2,
        actions=(CallerAction("run", None, {}, 0.0),) * 3, exit="normal",
    )
    observed = anyio.run(run_scenario, scenario, backend=backend)
    assert observed.outcomes[2][:4] == ("raise", "HookTimeoutError", "after_run", "h0")
    check_scenario(scenario, observed)
