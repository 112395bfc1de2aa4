"""``RetryPolicy``: how often and how patiently a monitored session recovers.

Decision logic, the backoff sleep and its log lines. ``max_attempts`` counts
every attempt including the first (``None``, the default: unlimited, like
TensorFlow); the n-th
retry waits ``min(max_delay, initial_delay * multiplier ** (n - 1))``, drawn
uniformly from ``[0, that]`` with ``jitter``; ``max_time`` bounds the time
spent since the first failure. Each retry's warning says what is left of the
budget; a policy's warnings go through its ``RetryLog`` (``_retry_log.py``),
which writes one line per ``log_interval`` at most for repeated retries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from .._log import log_error
from .._validate import check_callable, check_flag, check_int, check_number
from ._retry_log import RetryLog

if TYPE_CHECKING:
    import random
    from collections.abc import Callable

__all__ = ["RetryBudget", "RetryPolicy", "flush_retry_log"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff and limits for recovery.

    The default, ``RetryPolicy()``, retries for ever, as TensorFlow does: waits
    drawn from [0, 0.1 s], [0, 0.2 s], ... doubling up to [0, 30 s]. Set
    ``max_attempts`` (counting the first attempt) or ``max_time`` (seconds since
    the first failure) to bound it. A retry logs a warning with the error, the
    attempt number, what is left of the budget (attempts, seconds) and the delay;
    giving up logs an error. Repeated retries are summed up: the first is logged
    in full, then at most one line every ``log_interval`` seconds says how many
    followed, of which error types, over how long, and ends with the last one in
    full; a session writes what is still counted when it closes (``log_interval=0``:
    every retry in full). The count is the policy object's: sessions sharing one
    policy count their retries together.
    ``max_attempts`` counts every attempt, the first included (``None``: no
    limit); the n-th retry waits up to ``min(max_delay, initial_delay *
    multiplier ** (n - 1))`` seconds (a uniform draw below that with
    ``jitter``); ``max_time`` bounds the seconds spent since the first failure.
    ``clock`` (keyword-only, like ``log_interval``): where the policy reads the time
    for ``max_time`` and ``log_interval``; ``None`` (the default) is
    :func:`anyio.current_time`, which trio's ``MockClock`` drives; tests may pass a
    ``hookrun.testing.MockClock``. The backoff itself is slept on the event loop.

    Args:
        max_attempts: Attempts in all, the first included. ``None``: no limit.
        initial_delay: Seconds the first retry waits at most.
        max_delay: Seconds a retry waits at most.
        multiplier: The factor by which the wait grows from one retry to the next.
        jitter: Wait a uniform random time below the delay (``True``), or the delay itself.
        max_time: Seconds since the first failure after which it gives up. ``None``: no
            limit.
        rng: The source of jitter. ``None``: a module-wide ``random.Random``.
        log_interval: Seconds between two warnings summing up repeated retries (the
            first is logged in full); 0 logs every retry.
        clock: Where the policy reads the time for ``max_time`` and ``log_interval``.
            ``None``: :func:`anyio.current_time`, which trio's ``MockClock`` drives.
    """

    max_attempts: int | None = None
    initial_delay: float = 0.1
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: bool = True
    max_time: float | None = None
    #: Source of jitter; ``None`` means a module-wide ``random.Random`` made on first use.
    rng: random.Random | None = field(default=None, compare=False, repr=False)
    #: Seconds between two warnings about repeated retries (0: every retry in full).
    log_interval: float = field(default=10.0, kw_only=True)
    #: Where the time is read (``max_time``, ``log_interval``); ``None``: ``anyio.current_time``.
    clock: Callable[[], float] | None = field(default=None, compare=False, repr=False, kw_only=True)
    #: The warnings of this policy's retries (``_retry_log.py``).
    _log: RetryLog = field(default_factory=RetryLog, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_int("RetryPolicy(max_attempts=...)", self.max_attempts, minimum=1, optional=True)
        check_number("RetryPolicy(initial_delay=...)", self.initial_delay, unit="seconds")
        check_number("RetryPolicy(max_delay=...)", self.max_delay, unit="seconds")
        check_number("RetryPolicy(multiplier=...)", self.multiplier, minimum=1)
        check_flag("RetryPolicy(jitter=...)", self.jitter)
        check_number(
            "RetryPolicy(max_time=...)", self.max_time, strict=True, optional=True, unit="seconds"
        )
        check_number("RetryPolicy(log_interval=...)", self.log_interval, unit="seconds")
        if self.clock is not None:
            check_callable("RetryPolicy(clock=...)", self.clock)

    def backoff(self, retry: int) -> float:
        """The longest wait before the ``retry``-th retry (1-based), before jitter.

        Exact below ``max_delay`` and ``max_delay`` from the first retry that reaches it,
        for any ``retry`` (the power is never computed once it would pass the cap).
        """
        if retry < 1:
            raise ValueError(f"retry numbers start at 1, got {retry}")
        initial, cap, multiplier = self.initial_delay, self.max_delay, float(self.multiplier)
        if initial >= cap or multiplier == 1.0:
            return float(min(cap, initial))
        if initial == 0.0:
            return 0.0
        # initial * multiplier ** (retry - 1) >= cap  <=>  retry - 1 >= log(cap / initial) / log(multiplier)
        if retry - 1 >= math.log(cap / initial) / math.log(multiplier):
            return float(cap)
        return min(cap, initial * multiplier ** (retry - 1))

    def delay(self, retry: int) -> float:
        """The wait before the ``retry``-th retry, jitter applied."""
        ceiling = self.backoff(retry)
        if not self.jitter:
            return ceiling
        return (self.rng or _shared_rng()).uniform(0.0, ceiling)

    def _now(self) -> float:
        return anyio.current_time() if self.clock is None else self.clock()

    def budget(self) -> RetryBudget:
        """A fresh budget for one operation (one ``run()`` call, one creation)."""
        return RetryBudget(self)


class RetryBudget:
    """Counts the attempts of one operation against its policy."""

    __slots__ = ("attempts", "policy", "started")

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.attempts = 1
        self.started: float | None = None

    async def wait_to_retry(
        self, cause: BaseException | None = None, *, action: str = "retrying", step: int | None = None
    ) -> bool:
        """Sleep the backoff and count one more attempt; False when the policy gives up.

        Logs (logger ``hookrun``) a warning before sleeping: ``action``, the error
        ``cause``, the number of the coming attempt, what is left of the budget and
        the delay (summed up with other retries within the policy's ``log_interval``);
        and an error when the policy gives up, saying which limit was reached.
        ``step``: the global step, for the records' ``step`` field.
        """
        policy = self.policy
        now = policy._now()
        if self.started is None:
            self.started = now
        if policy.max_attempts is not None and self.attempts >= policy.max_attempts:
            self._give_up(cause, f"max_attempts={policy.max_attempts} reached", step, now)
            return False
        delay = policy.delay(self.attempts)
        elapsed = now - self.started
        if policy.max_time is not None and elapsed + delay > policy.max_time:
            self._give_up(cause, f"max_time={policy.max_time:g}s would pass", step, now)
            return False
        message = (
            f"{action} after {cause!r}: attempt {self.attempts + 1}"
            f"{_budget_left(policy, self.attempts + 1, elapsed)} in {delay:.3g}s"
        )
        policy._log.retried(message, cause, now=now, interval=policy.log_interval, step=step)
        if delay > 0:
            await anyio.sleep(delay)
        self.attempts += 1
        return True

    def _give_up(self, cause: BaseException | None, why: str, step: int | None, now: float) -> None:
        self.policy._log.flush(now)  # the retries still counted come before the error
        log_error(
            "RetryPolicy gives up after %d attempt%s (%s); the last error was %r",
            self.attempts, "" if self.attempts == 1 else "s", why, cause, step=step,
        )


def flush_retry_log(policy: RetryPolicy) -> None:
    """Write the retries ``policy`` counted and has not written yet; its next retry is
    written in full. A session calls it when it closes (inside the event loop)."""
    policy._log.flush(policy._now(), afresh=True)


def _budget_left(policy: RetryPolicy, coming: int, elapsed: float) -> str:
    """`` of 5 (3 more allowed, 42s left of max_time=60s)``: what is left after the
    ``coming`` attempt, ``elapsed`` seconds after the first failure; `` (no limit)``."""
    total, left = "", []
    if policy.max_attempts is not None:
        total = f" of {policy.max_attempts}"
        more = policy.max_attempts - coming
        left.append("the last" if more == 0 else f"{more} more allowed")
    if policy.max_time is not None:
        left.append(f"{max(0.0, policy.max_time - elapsed):.3g}s left of max_time={policy.max_time:g}s")
    return f"{total} ({', '.join(left) or 'no limit'})"


_RNG: list[random.Random] = []


def _shared_rng() -> random.Random:
    if not _RNG:
        import random  # on first jittered retry: keeps `import hookrun` light

        _RNG.append(random.Random())
    return _RNG[0]
