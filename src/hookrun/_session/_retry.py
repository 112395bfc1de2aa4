"""``RetryPolicy``: how often and how patiently a monitored session recovers.

Decision logic, the backoff sleep and its log lines. ``max_attempts`` counts
every attempt including the first (``None``, the default: unlimited, like
TensorFlow); the n-th
retry waits ``min(max_delay, initial_delay * multiplier ** (n - 1))``, drawn
uniformly from ``[0, that]`` with ``jitter``; ``max_time`` bounds the time
spent since the first failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from .._log import log_error, log_warning
from .._validate import check_flag, check_int, check_number

if TYPE_CHECKING:
    import random

__all__ = ["RetryBudget", "RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff and limits for recovery.

    The default, ``RetryPolicy()``, retries for ever, as TensorFlow does: waits
    drawn from [0, 0.1 s], [0, 0.2 s], ... doubling up to [0, 30 s]. Set
    ``max_attempts`` (counting the first attempt) or ``max_time`` (seconds since
    the first failure) to bound it. Each retry logs a warning with the error,
    the attempt number and the delay; giving up logs an error.
    ``max_attempts`` counts every attempt, the first included (``None``: no
    limit); the n-th retry waits up to ``min(max_delay, initial_delay *
    multiplier ** (n - 1))`` seconds (a uniform draw below that with
    ``jitter``); ``max_time`` bounds the seconds spent since the first failure.

    Args:
        max_attempts: Attempts in all, the first included. ``None``: no limit.
        initial_delay: Seconds the first retry waits at most.
        max_delay: Seconds a retry waits at most.
        multiplier: The factor by which the wait grows from one retry to the next.
        jitter: Wait a uniform random time below the delay (``True``), or the delay itself.
        max_time: Seconds since the first failure after which it gives up. ``None``: no
            limit.
        rng: The source of jitter. ``None``: a module-wide ``random.Random``.
    """

    max_attempts: int | None = None
    initial_delay: float = 0.1
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: bool = True
    max_time: float | None = None
    #: Source of jitter; ``None`` means a module-wide ``random.Random`` made on first use.
    rng: random.Random | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_int("RetryPolicy(max_attempts=...)", self.max_attempts, minimum=1, optional=True)
        check_number("RetryPolicy(initial_delay=...)", self.initial_delay, unit="seconds")
        check_number("RetryPolicy(max_delay=...)", self.max_delay, unit="seconds")
        check_number("RetryPolicy(multiplier=...)", self.multiplier, minimum=1)
        check_flag("RetryPolicy(jitter=...)", self.jitter)
        check_number(
            "RetryPolicy(max_time=...)", self.max_time, strict=True, optional=True, unit="seconds"
        )

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
        ``cause``, the number of the coming attempt, the limit and the delay; and an
        error when the policy gives up, saying which limit was reached. ``step``: the
        global step, for the records' ``step`` field.
        """
        policy = self.policy
        now = anyio.current_time()
        if self.started is None:
            self.started = now
        if policy.max_attempts is not None and self.attempts >= policy.max_attempts:
            self._give_up(cause, f"max_attempts={policy.max_attempts} reached", step)
            return False
        delay = policy.delay(self.attempts)
        if policy.max_time is not None and now + delay - self.started > policy.max_time:
            self._give_up(cause, f"max_time={policy.max_time:g}s would pass", step)
            return False
        limit = "no limit" if policy.max_attempts is None else f"of {policy.max_attempts}"
        log_warning(
            "%s after %r: attempt %d (%s) in %.3gs", action, cause, self.attempts + 1, limit, delay, step=step
        )
        if delay > 0:
            await anyio.sleep(delay)
        self.attempts += 1
        return True

    def _give_up(self, cause: BaseException | None, why: str, step: int | None) -> None:
        log_error(
            "RetryPolicy gives up after %d attempt%s (%s); the last error was %r",
            self.attempts, "" if self.attempts == 1 else "s", why, cause, step=step,
        )


_RNG: list[random.Random] = []


def _shared_rng() -> random.Random:
    if not _RNG:
        import random  # on first jittered retry: keeps `import hookrun` light

        _RNG.append(random.Random())
    return _RNG[0]
