"""Generated scenarios run on the real runtime (asyncio and trio) and checked against
the sequential reference model in ``model.py``; plus the regressions they found."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

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
