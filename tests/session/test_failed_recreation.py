"""After re-creating the session fails for good: what run(), should_stop() and the exit do."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from hookrun import AbortedError, MonitoredSession, RetryPolicy, UnavailableError
from hookrun.testing import RecordingHook, ScriptedCreator

pytestmark = pytest.mark.anyio

LIMIT = 10.0
NO_WAIT = RetryPolicy(initial_delay=0.0, jitter=False)


def failing_creator(error: BaseException) -> ScriptedCreator:
    """Session 0 is preempted at its second step; every later creation raises ``error``."""
    errors = {n: error for n in range(1, 50)}
    return ScriptedCreator({"x": 1}, session_errors={0: {1: AbortedError("preempted")}}, errors=errors)


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        (ValueError("bad config"), NO_WAIT),  # not recoverable: propagates at once
        (UnavailableError("still down"), RetryPolicy(max_attempts=3, initial_delay=0.0)),  # gave up
    ],
)
async def test_the_creators_error_propagates_and_end_never_gets_none(
    error: BaseException, retry: RetryPolicy, caplog: pytest.LogCaptureFixture
) -> None:
    creator = failing_creator(error)
    hook = RecordingHook()
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with MonitoredSession(creator, [hook], retry=retry) as sess:
            assert await sess.run("x") == 1
            with pytest.raises(type(error)) as caught:
                await sess.run("x")
            assert caught.value is error
            # The next run() would create the session again: not stopped.
            assert not sess.should_stop()
        # Leaving the block cleanly: no session to end with, so no end; nothing raised.
    assert hook.count("end") == 0
    assert all(call.args.get("session", 0) is not None for call in hook.calls)
    assert [s.closed for s in creator.sessions] == [1]
    assert any("the hooks' end is not called" in r.getMessage() for r in caplog.records)


async def test_a_later_run_creates_the_session_again() -> None:
    creator = ScriptedCreator(
        {"x": 7}, session_errors={0: {0: UnavailableError("lost")}}, errors={1: ValueError("once")}
    )
    hook = RecordingHook()
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(creator, [hook], retry=NO_WAIT) as sess:
            with pytest.raises(ValueError, match="once"):
                await sess.run("x")
            assert await sess.run("x") == 7  # created again
            assert not sess.should_stop()
    assert hook.count("end") == 1
    assert hook.calls[-1].args["session"] is creator.sessions[1]
    assert [s.closed for s in creator.sessions] == [1, 1]


async def test_a_later_run_step_fn_creates_the_session_again() -> None:
    creator = ScriptedCreator(
        {"x": 7}, session_errors={0: {0: UnavailableError("lost")}}, errors={1: ValueError("once")}
    )

    async def step(context: Any) -> Any:
        return await context.run_with_hooks("x")

    with anyio.fail_after(LIMIT):
        async with MonitoredSession(creator, retry=NO_WAIT) as sess:
            with pytest.raises(ValueError, match="once"):
                await sess.run_step_fn(step)
            assert not sess.should_stop()
            assert await sess.run_step_fn(step) == 7
