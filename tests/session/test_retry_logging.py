"""What a user sees while a monitored session retries: one line per retry, and the give-up."""

from __future__ import annotations

import logging

import anyio
import pytest

from hookrun import AbortedError, MonitoredSession, RetryPolicy, UnavailableError
from hookrun.testing import ScriptedCreator

pytestmark = pytest.mark.anyio

LIMIT = 10.0


def warnings_of(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "hookrun" and r.levelno == level]


async def test_each_recovery_logs_the_error_the_attempt_and_the_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = RetryPolicy(initial_delay=0.001, multiplier=2.0, jitter=False)  # unlimited
    errors: dict[int, dict[int, BaseException]] = {
        0: {0: UnavailableError("lost 0")}, 1: {0: AbortedError("lost 1")}
    }
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(LIMIT):
        async with MonitoredSession(ScriptedCreator({"x": 1}, session_errors=errors), retry=policy) as sess:
            assert await sess.run("x") == 1
    assert warnings_of(caplog) == [
        "recovering: re-creating the session after UnavailableError('lost 0'): "
        "attempt 2 (no limit) in 0.001s",
        "recovering: re-creating the session after AbortedError('lost 1'): "
        "attempt 3 (no limit) in 0.002s",
    ]


async def test_creation_retries_count_against_the_limit_and_giving_up_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=False)
    creator = ScriptedCreator(errors={n: UnavailableError(f"down {n}") for n in range(5)})
    gives_up = pytest.raises(UnavailableError, match="down 2")
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(LIMIT), gives_up:
        async with MonitoredSession(creator, retry=policy):
            pass
    assert warnings_of(caplog) == [
        "creating the session failed; retrying after UnavailableError('down 0'): attempt 2 (of 3) in 0s",
        "creating the session failed; retrying after UnavailableError('down 1'): attempt 3 (of 3) in 0s",
    ]
    assert warnings_of(caplog, logging.ERROR) == [
        "RetryPolicy gives up after 3 attempts (max_attempts=3 reached); "
        "the last error was UnavailableError('down 2')"
    ]


async def test_max_time_giving_up_says_so(caplog: pytest.LogCaptureFixture) -> None:
    policy = RetryPolicy(initial_delay=10.0, jitter=False, max_time=1.0)
    creator = ScriptedCreator(errors={0: UnavailableError("down")})
    gives_up = pytest.raises(UnavailableError)
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(LIMIT), gives_up:
        async with MonitoredSession(creator, retry=policy):
            pass
    assert warnings_of(caplog, logging.ERROR) == [
        "RetryPolicy gives up after 1 attempt (max_time=1s would pass); "
        "the last error was UnavailableError('down')"
    ]


def test_the_default_policy_retries_for_ever() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts is None and policy.max_time is None
    assert [policy.backoff(n) for n in (1, 2, 3)] == [0.1, 0.2, 0.4]
    assert policy.backoff(100) == 30.0
