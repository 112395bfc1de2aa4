"""RetryPolicy's back-off for any attempt number: a service down for hours is retried for ever."""

from __future__ import annotations

import logging
import math
import random
from typing import Any

import anyio
import pytest
import trio.testing

from hookrun import MonitoredSession, RetryPolicy, StepSession, UnavailableError

FAILURES = 10_000


def test_default_backoff_reaches_the_cap_and_stays_there_for_a_million_retries() -> None:
    """The default policy's ceiling doubles from 0.1 s to 30 s and never overflows after."""
    policy = RetryPolicy()
    assert [policy.backoff(n) for n in (1, 2, 3, 9)] == pytest.approx([0.1, 0.2, 0.4, 25.6])
    for retry in range(10, 10**6 + 1, 997):
        assert policy.backoff(retry) == 30.0
    assert policy.backoff(10**6) == policy.backoff(10**18) == 30.0


@pytest.mark.parametrize("multiplier", [2, 1.5, 1.0000001, 10.0**300])
def test_backoff_never_overflows_and_never_decreases(multiplier: float) -> None:
    """Whatever the multiplier (an int too), the ceiling is finite, capped and monotone."""
    policy = RetryPolicy(initial_delay=1e-3, max_delay=60.0, multiplier=multiplier)
    last = 0.0
    for retry in [*range(1, 2_000), 10**6, 10**9]:
        ceiling = policy.backoff(retry)
        assert math.isfinite(ceiling)
        assert last <= ceiling <= 60.0
        last = ceiling


def test_backoff_below_the_cap_is_the_exact_power() -> None:
    """Below the cap the ceiling is ``initial_delay * multiplier ** (retry - 1)``."""
    policy = RetryPolicy(initial_delay=0.5, max_delay=1e300, multiplier=3.0)
    for retry in (1, 2, 10, 100, 600):
        assert policy.backoff(retry) == pytest.approx(0.5 * 3.0 ** (retry - 1))
    assert policy.backoff(10**6) == 1e300


@pytest.mark.parametrize(("initial", "cap", "multiplier"), [(0.0, 30.0, 2.0), (5.0, 1.0, 2.0), (0.2, 30.0, 1.0)])
def test_degenerate_policies_have_a_constant_ceiling(initial: float, cap: float, multiplier: float) -> None:
    """No delay, a first delay above the cap, or a multiplier of 1: the same ceiling every time."""
    policy = RetryPolicy(initial_delay=initial, max_delay=cap, multiplier=multiplier)
    assert policy.backoff(1) == policy.backoff(10**6) == min(initial, cap)


def test_jittered_delay_of_a_late_retry_stays_within_the_cap() -> None:
    """delay() of the millionth retry is a draw in [0, max_delay]."""
    policy = RetryPolicy(rng=random.Random(7))
    draws = [policy.delay(10**6 + n) for n in range(200)]
    assert all(0.0 <= draw <= 30.0 for draw in draws)
    assert max(draws) > 15.0


def _flaky_factory(failures: int) -> tuple[Any, list[int]]:
    """An async session factory failing with UnavailableError ``failures`` times, then working."""
    calls = [0]

    async def create() -> StepSession:
        calls[0] += 1
        if calls[0] <= failures:
            raise UnavailableError(f"service down (attempt {calls[0]})")
        return StepSession(lambda feeds: {"loss": 0.5})

    return create, calls


@pytest.mark.anyio
async def test_a_session_recovers_after_ten_thousand_failed_attempts(caplog: pytest.LogCaptureFixture) -> None:
    """Creation failing 10,000 times in a row is retried until it works (no OverflowError)."""
    caplog.set_level(logging.ERROR, logger="hookrun")  # one warning per retry: keep them out
    create, calls = _flaky_factory(FAILURES)
    with anyio.fail_after(120):
        async with MonitoredSession(create, retry=RetryPolicy(initial_delay=0.0)) as sess:
            assert await sess.run("loss") == 0.5
    assert calls[0] == FAILURES + 1


@pytest.mark.anyio
async def test_a_lost_session_is_recovered_through_ten_thousand_failed_re_creations(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A step loses its session, then re-creating it fails 10,000 times: the step is re-run once it works."""
    caplog.set_level(logging.ERROR, logger="hookrun")
    calls = [0]

    def lose_once(feeds: Any) -> dict[str, float]:
        raise UnavailableError("worker lost")

    async def create() -> StepSession:
        calls[0] += 1
        if calls[0] == 1:
            return StepSession(lose_once)
        if calls[0] <= FAILURES + 1:
            raise UnavailableError(f"service down (attempt {calls[0]})")
        return StepSession(lambda feeds: {"loss": 0.25})

    with anyio.fail_after(120):
        async with MonitoredSession(create, retry=RetryPolicy(initial_delay=0.0)) as sess:
            assert await sess.run("loss") == 0.25
            assert await sess.global_step() == 1
    assert calls[0] == FAILURES + 2


@pytest.mark.parametrize("anyio_backend", [pytest.param(("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)}), id="trio-mock-clock")])
@pytest.mark.anyio
async def test_the_default_policy_retries_ten_thousand_times_on_a_mock_clock(
    anyio_backend: object, caplog: pytest.LogCaptureFixture
) -> None:
    """The default RetryPolicy() keeps waiting (up to 30 s a time) through 10,000 failures.

    No ``fail_after`` here: trio's autojumping clock would jump to its deadline whenever
    the session waits on a worker thread. The factory succeeds after a fixed count and
    every wait is virtual, so the test cannot hang.
    """
    caplog.set_level(logging.ERROR, logger="hookrun")
    create, calls = _flaky_factory(FAILURES)
    started = anyio.current_time()
    async with MonitoredSession(create) as sess:
        assert await sess.run("loss") == 0.5
    assert calls[0] == FAILURES + 1
    waited = anyio.current_time() - started
    assert 30.0 * FAILURES * 0.4 < waited < 30.0 * FAILURES * 0.6  # uniform draws below 30 s: about 15 s each
