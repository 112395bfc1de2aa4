"""Recovery and the retry policy, including TF's ◆ recovery checklist items."""

from __future__ import annotations

import random

import anyio
import pytest

import hookrun
from hookrun import (
    AbortedError,
    MonitoredSession,
    RetryPolicy,
    SingularMonitoredSession,
    UnavailableError,
)
from hookrun.testing import RecordingHook, ScriptedCreator

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0, jitter=False)


async def test_session_error_recreates_session_and_reruns_the_step() -> None:
    """An AbortedError from the session: new session, after_create_session again with the same
    coordinator, no second begin (◆41, ◆64)."""
    hook = RecordingHook(request=hookrun.SessionRunArgs("a"))
    session_creator = ScriptedCreator({"a": 1}, session_errors={0: {0: AbortedError("preempted")}})
    async with MonitoredSession(session_creator, [hook], retry=NO_WAIT) as sess:
        assert await sess.run("a") == 1
        assert not sess.should_stop()
    first, second = session_creator.sessions
    assert first.closed == 1 and second.closed == 1
    assert hook.phases() == [
        "begin", "after_create_session", "before_run",
        "after_create_session", "before_run", "after_run", "end",
    ]
    assert hook.calls[3].args["session"] is second
    assert hook.calls[1].args["coord"] is hook.calls[3].args["coord"]  # one per monitored session


@pytest.mark.parametrize("error", [AbortedError("a"), UnavailableError("u")])
async def test_hook_error_in_before_run_is_recovered(error: Exception) -> None:
    """A recoverable error from a hook's before_run re-runs the same call on a fresh session (◆64, ◆65)."""
    hook = RecordingHook(raises={"before_run": error})
    session_creator = ScriptedCreator({"a": 1})
    async with MonitoredSession(session_creator, [hook], retry=NO_WAIT) as sess:
        assert await sess.run("a") == 1
    assert len(session_creator.sessions) == 2


async def test_custom_recoverable_types() -> None:
    """Types passed as recoverable= are recovered too."""
    session_creator = ScriptedCreator({"a": 1}, session_errors={0: {0: ConnectionResetError("lost")}})
    async with MonitoredSession(session_creator, retry=NO_WAIT, recoverable=[ConnectionError]) as sess:
        assert await sess.run("a") == 1


async def test_creator_errors_are_retried_and_others_propagate() -> None:
    """A recoverable error from the creator is retried; any other propagates (◆41, ◆63)."""
    session_creator = ScriptedCreator({"a": 1}, errors={0: UnavailableError("busy"), 1: AbortedError("again")})
    async with MonitoredSession(session_creator, retry=NO_WAIT) as sess:
        assert await sess.run("a") == 1
    assert session_creator.attempts == 3
    with pytest.raises(IndexError):
        async with MonitoredSession(ScriptedCreator(errors={0: IndexError("bad")}), retry=NO_WAIT):
            pass


async def test_failed_creation_is_closed() -> None:
    """A session created by an attempt whose after_create_session failed is closed (differs from TF)."""
    hook = RecordingHook(raises={"after_create_session": AbortedError("flaky")})
    session_creator = ScriptedCreator({"a": 1})
    async with MonitoredSession(session_creator, [hook], retry=NO_WAIT):
        pass
    assert [s.closed for s in session_creator.sessions] == [1, 1]
    assert hook.count("begin") == 1 and hook.count("end") == 1


async def test_max_attempts_gives_up_with_the_last_error() -> None:
    """max_attempts counts every attempt; when the policy gives up the last error propagates."""
    session_creator = ScriptedCreator({"a": 1}, session_errors={i: {0: AbortedError(f"fail {i}")} for i in range(5)})
    async with MonitoredSession(session_creator, retry=RetryPolicy(max_attempts=3, initial_delay=0, jitter=False)) as sess:
        with pytest.raises(AbortedError, match="fail 2"):
            await sess.run("a")
        await sess.aclose()
    assert len(session_creator.sessions) == 3
    assert all(s.closed == 1 for s in session_creator.sessions)


async def test_backoff_waits_between_retries() -> None:
    """The n-th retry waits initial_delay * multiplier**(n-1) (no jitter)."""
    times: list[float] = []

    class Timed(ScriptedCreator):
        async def create_session(self) -> hookrun.testing.ScriptedSession:
            times.append(anyio.current_time())
            return await super().create_session()

    session_creator = Timed({"a": 1}, session_errors={0: {0: AbortedError("x")}, 1: {0: AbortedError("y")}})
    policy = RetryPolicy(initial_delay=0.02, multiplier=2, jitter=False)
    async with MonitoredSession(session_creator, retry=policy) as sess:
        await sess.run("a")
    assert times[1] - times[0] >= 0.02 * 0.9
    assert times[2] - times[1] >= 0.04 * 0.9


async def test_max_time_bounds_retrying() -> None:
    """max_time stops retrying once the next wait would pass it."""
    session_creator = ScriptedCreator({"a": 1}, session_errors={i: {0: AbortedError(f"f{i}")} for i in range(10)})
    policy = RetryPolicy(initial_delay=0.05, multiplier=1, jitter=False, max_time=0.12)
    async with MonitoredSession(session_creator, retry=policy) as sess:
        with anyio.fail_after(5), pytest.raises(AbortedError):
            await sess.run("a")
        await sess.aclose()
    assert 2 <= len(session_creator.sessions) <= 4


def test_retry_policy_delays_and_validation() -> None:
    """Backoff is capped by max_delay; jitter draws from [0, backoff]; bad values are rejected."""
    policy = RetryPolicy(initial_delay=1, multiplier=3, max_delay=5, jitter=False)
    assert [policy.delay(n) for n in (1, 2, 3)] == [1, 3, 5]
    jittered = RetryPolicy(initial_delay=1, multiplier=2, rng=random.Random(0))
    assert all(0 <= jittered.delay(3) <= 4 for _ in range(50))
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="initial_delay"):
        RetryPolicy(initial_delay=-1)
    with pytest.raises(ValueError, match="multiplier"):
        RetryPolicy(multiplier=0.5)


async def test_singular_propagates_recoverable_errors() -> None:
    """SingularMonitoredSession never recovers: AbortedError propagates from run() (◆96)."""
    session_creator = ScriptedCreator({"a": 1}, session_errors={0: {0: AbortedError("x")}})
    with pytest.raises(AbortedError):
        async with SingularMonitoredSession(session_creator) as sess:
            await sess.run("a")
    assert len(session_creator.sessions) == 1


async def test_recoverable_error_in_coordinator_recovers_on_next_run() -> None:
    """A background AbortedError: run returns, should_stop() False, the next run recovers first (◆42)."""
    hook = RecordingHook()
    session_creator = ScriptedCreator({"a": 1})
    async with MonitoredSession(session_creator, [hook], retry=NO_WAIT) as sess:
        coord = hook.calls[1].args["coord"]

        async def fails() -> None:
            raise AbortedError("worker lost")

        coord.start_soon(fails)
        await anyio.wait_all_tasks_blocked()
        assert not sess.should_stop()
        assert await sess.run("a") == 1
    assert len(session_creator.sessions) == 2


async def test_non_recoverable_error_in_coordinator_stops_and_raises_at_close() -> None:
    """A background ordinary error: run works, should_stop() True, no new session, raised at close (◆43)."""
    hook = RecordingHook()
    session_creator = ScriptedCreator({"a": 1})
    with pytest.raises(LookupError, match="unknown"):
        async with MonitoredSession(session_creator, [hook], retry=NO_WAIT) as sess:
            hook.calls[1].args["coord"].request_stop(LookupError("unknown"))
            assert await sess.run("a") == 1
            assert sess.should_stop()
    assert len(session_creator.sessions) == 1


async def test_ordinary_step_error_while_coordinator_holds_recoverable_recovers() -> None:
    """A step failing with an ordinary error while the coordinator holds an AbortedError is recovered (◆44)."""
    hook = RecordingHook()

    class Stuck(hookrun.SessionRunHook):
        failed = False

        async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
            if not self.failed:
                self.failed = True
                hook.calls[1].args["coord"].request_stop(AbortedError("coordinator saw preemption"))
                raise RuntimeError("stuck")

    session_creator = ScriptedCreator({"a": 1})
    async with MonitoredSession(session_creator, [hook, Stuck()], retry=NO_WAIT) as sess:
        assert await sess.run("a") == 1
        assert not sess.should_stop()
    assert len(session_creator.sessions) == 2


async def test_step_counter_survives_recovery() -> None:
    """The step counter is not reset by recovery (a creator restoring a checkpoint may set it)."""
    session_creator = ScriptedCreator({"a": 1}, session_errors={1: {0: AbortedError("x")}})
    counter = hookrun.LocalStepCounter()
    async with MonitoredSession(session_creator, retry=NO_WAIT, step_counter=counter) as sess:
        for _ in range(3):
            await sess.run("a")
    assert counter.value == 3
