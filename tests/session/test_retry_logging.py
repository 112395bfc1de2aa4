"""What a user sees while a monitored session retries: the first retry in full, then at most
one line per interval summing the others up, what is left of the budget, and the give-up."""

from __future__ import annotations

import logging

import anyio
import pytest

from hookrun import AbortedError, MonitoredSession, RetryPolicy, UnavailableError
from hookrun._session._retry import flush_retry_log
from hookrun.testing import MockClock, ScriptedCreator

pytestmark = pytest.mark.anyio

LIMIT = 10.0


def warnings_of(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "hookrun" and r.levelno == level]


async def test_each_recovery_logs_the_error_the_attempt_and_the_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With log_interval=0 every recovery is a line of its own: error, attempt, budget, delay."""
    policy = RetryPolicy(initial_delay=0.001, multiplier=2.0, jitter=False, log_interval=0)  # unlimited
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
    """Creation retries count against max_attempts, each says how many are left; giving up says why."""
    policy = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=False, log_interval=0)
    creator = ScriptedCreator(errors={n: UnavailableError(f"down {n}") for n in range(5)})
    gives_up = pytest.raises(UnavailableError, match="down 2")
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(LIMIT), gives_up:
        async with MonitoredSession(creator, retry=policy):
            pass
    assert warnings_of(caplog) == [
        "creating the session failed; retrying after UnavailableError('down 0'): "
        "attempt 2 of 3 (1 more allowed) in 0s",
        "creating the session failed; retrying after UnavailableError('down 1'): "
        "attempt 3 of 3 (the last) in 0s",
    ]
    assert warnings_of(caplog, logging.ERROR) == [
        "RetryPolicy gives up after 3 attempts (max_attempts=3 reached); "
        "the last error was UnavailableError('down 2')"
    ]


async def test_max_time_giving_up_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """Giving up because max_time would pass names max_time."""
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
    """RetryPolicy() has no limit and backs off from 0.1 s up to 30 s."""
    policy = RetryPolicy()
    assert policy.max_attempts is None and policy.max_time is None
    assert [policy.backoff(n) for n in (1, 2, 3)] == [0.1, 0.2, 0.4]
    assert policy.backoff(100) == 30.0


# -- what is left of the budget -------------------------------------------------------------------


class _DownFor:
    """A creator that fails ``failures`` times, the clock ``step`` seconds later each time."""

    def __init__(self, clock: MockClock, failures: int, step: float) -> None:
        self.clock, self.failures, self.step = clock, failures, step
        self.scripted = ScriptedCreator()

    async def create_session(self) -> object:
        self.clock.jump(self.step)
        if self.failures:
            self.failures -= 1
            raise UnavailableError("down")
        return await self.scripted.create_session()


async def _enter(creator: _DownFor, policy: RetryPolicy) -> None:
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(creator, retry=policy):
            pass


async def test_a_warning_under_max_time_says_the_time_left(caplog: pytest.LogCaptureFixture) -> None:
    """Under max_time alone, each retry says the seconds left of it, not "no limit"."""
    clock = MockClock()
    policy = RetryPolicy(initial_delay=0.0, jitter=False, max_time=60, log_interval=0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await _enter(_DownFor(clock, failures=2, step=15.0), policy)
    assert warnings_of(caplog) == [
        "creating the session failed; retrying after UnavailableError('down'): "
        "attempt 2 (60s left of max_time=60s) in 0s",
        "creating the session failed; retrying after UnavailableError('down'): "
        "attempt 3 (45s left of max_time=60s) in 0s",
    ]


async def test_a_warning_under_both_limits_says_the_attempts_and_the_time_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Under max_attempts and max_time, a retry says the attempts and the seconds left."""
    clock = MockClock()
    policy = RetryPolicy(
        max_attempts=5, initial_delay=0.0, jitter=False, max_time=60, log_interval=0, clock=clock
    )
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await _enter(_DownFor(clock, failures=2, step=2.5), policy)
    assert warnings_of(caplog)[1] == (
        "creating the session failed; retrying after UnavailableError('down'): "
        "attempt 3 of 5 (2 more allowed, 57.5s left of max_time=60s) in 0s"
    )


# -- repeated retries summed up -------------------------------------------------------------------


def _recovering(error: BaseException) -> str:
    return f"recovering: re-creating the session after {error!r}: attempt 2 (no limit) in 0s"


async def _recoveries(policy: RetryPolicy, clock: MockClock, failures: list[tuple[float, BaseException]]) -> None:
    """One run() per failure, each at the time given: its session fails once, recovery re-runs it."""
    errors = {0: {0: failures[0][1]}} | {n: {1: exc} for n, (_, exc) in enumerate(failures[1:], start=1)}
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(ScriptedCreator({"x": 1}, session_errors=errors), retry=policy) as sess:
            for at, _error in failures:
                clock.jump(at - clock())
                assert await sess.run("x") == 1


async def test_repeated_recoveries_are_summed_up_once_the_interval_has_passed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first recovery in full; those within log_interval are counted, then one line sums them up."""
    clock = MockClock()
    policy = RetryPolicy(initial_delay=0.0, jitter=False, log_interval=10, clock=clock)
    a, b, c, d = AbortedError("a"), UnavailableError("b"), AbortedError("c"), AbortedError("d")
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await _recoveries(policy, clock, [(0, a), (1, b), (2, c), (12, d)])
    assert warnings_of(caplog) == [
        _recovering(a),
        f"3 more retries in 12s (2 AbortedError, 1 UnavailableError); the last: {_recovering(d)}",
    ]


async def test_a_recovery_after_a_quiet_interval_is_logged_in_full(caplog: pytest.LogCaptureFixture) -> None:
    """A recovery log_interval or more after the last line, nothing counted since, is in full."""
    clock = MockClock()
    policy = RetryPolicy(initial_delay=0.0, jitter=False, log_interval=10, clock=clock)
    a, b = AbortedError("a"), UnavailableError("b")
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await _recoveries(policy, clock, [(0, a), (10, b)])
    assert warnings_of(caplog) == [_recovering(a), _recovering(b)]


async def test_flushing_writes_the_recoveries_still_counted(caplog: pytest.LogCaptureFixture) -> None:
    """flush_retry_log (a session's close) writes what is counted; the next retry is in full."""
    clock = MockClock()
    policy = RetryPolicy(initial_delay=0.0, jitter=False, log_interval=10, clock=clock)
    a, b, c = AbortedError("a"), UnavailableError("b"), AbortedError("c")
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await _recoveries(policy, clock, [(0, a), (3, b)])
        flush_retry_log(policy)
        flush_retry_log(policy)  # nothing counted: nothing more
        await _recoveries(policy, clock, [(4, c)])
    assert warnings_of(caplog) == [
        _recovering(a),
        f"1 more retry in 3s (1 UnavailableError); the last: {_recovering(b)}",
        _recovering(c),
    ]


async def test_giving_up_writes_the_retries_still_counted_before_its_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A retry counted and not yet written comes out before the give-up's error line."""
    # the default log_interval; a clock of its own, which stays put
    policy = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=False, clock=MockClock())
    creator = ScriptedCreator(errors={n: UnavailableError(f"down {n}") for n in range(5)})
    with caplog.at_level(logging.WARNING, logger="hookrun"), pytest.raises(UnavailableError, match="down 2"):
        await _enter_scripted(creator, policy)
    assert [r.levelno for r in caplog.records if r.name == "hookrun"] == [logging.WARNING] * 2 + [logging.ERROR]
    assert warnings_of(caplog)[1] == (
        "1 more retry in 0s (1 UnavailableError); the last: creating the session failed; retrying after "
        "UnavailableError('down 1'): attempt 3 of 3 (the last) in 0s"
    )


async def _enter_scripted(creator: ScriptedCreator, policy: RetryPolicy) -> None:
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(creator, retry=policy):
            pass


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_policy_used_again_in_a_new_event_loop_starts_afresh(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A later anyio.run writes what an earlier one left counted, then its first retry in full."""
    clock = MockClock()
    policy = RetryPolicy(initial_delay=0.0, jitter=False, log_interval=10, clock=clock)
    a, b, c = AbortedError("a"), UnavailableError("b"), AbortedError("c")
    first: list[tuple[float, BaseException]] = [(0, a), (1, b)]
    later: list[tuple[float, BaseException]] = [(2, c)]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        anyio.run(_recoveries, policy, clock, first, backend=backend)
        anyio.run(_recoveries, policy, clock, later, backend=backend)
    assert warnings_of(caplog) == [
        _recovering(a),
        f"1 more retry in 1s (1 UnavailableError); the last: {_recovering(b)}",
        _recovering(c),
    ]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"log_interval": -1}, ValueError, r"RetryPolicy\(log_interval=\.\.\.\) must be a number of seconds >= 0"),
        ({"log_interval": "10"}, TypeError, r"RetryPolicy\(log_interval=\.\.\.\) must be a number of seconds"),
        ({"clock": 5}, TypeError, r"RetryPolicy\(clock=\.\.\.\) must be callable, got 5"),
    ],
)
def test_log_interval_and_clock_are_checked(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    """A bad log_interval or clock is refused at construction, naming it."""
    with pytest.raises(error, match=match):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


async def test_closing_the_session_writes_the_recoveries_still_counted(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing counted is lost: leaving the block writes the recoveries not yet written."""
    clock = MockClock()
    policy = RetryPolicy(initial_delay=0.0, jitter=False, log_interval=10, clock=clock)
    a, b = AbortedError("a"), UnavailableError("b")
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await _recoveries(policy, clock, [(0, a), (3, b)])
    assert warnings_of(caplog) == [_recovering(a), f"1 more retry in 3s (1 UnavailableError); the last: {_recovering(b)}"]
