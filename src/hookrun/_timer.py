"""When should a periodic hook fire: ``SecondOrStepTimer`` and ``NeverTriggerTimer``.

Pure decision logic (h11 style): the timers never sleep and never schedule
anything; a hook asks ``should_trigger_for_step(step)`` and, when it acts,
records it with ``update_last_triggered_step(step)``. Time comes from a
*clock*, a zero-argument callable returning seconds; the default is
``anyio.current_time`` so trio's ``MockClock`` drives it, and tests on any
backend can inject their own.

Invariants: a timer never fires twice for the same step; the first question
after construction or ``reset()`` is always answered True; the validation
messages are TensorFlow's; a step-based timer decides without the clock, so it
works outside an event loop (it then reports no elapsed seconds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import anyio

from ._validate import check_int, check_number

__all__ = ["Clock", "NeverTriggerTimer", "SecondOrStepTimer"]

#: A zero-argument callable returning the current time in seconds.
Clock = Callable[[], float]


class SecondOrStepTimer:
    """Fires at most once every ``every_secs`` seconds or every ``every_steps`` steps.

    Exactly one of the two must be given (TensorFlow's messages). ``clock``
    (keyword-only) replaces :func:`anyio.current_time`, e.g. in tests.

    Args:
        every_secs: Seconds between firings.
        every_steps: Steps between firings (exactly one of the two).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    __slots__ = ("_clock", "_every_secs", "_every_steps", "_last_step", "_last_time")

    def __init__(
        self,
        every_secs: float | None = None,
        every_steps: int | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")
        check_number("SecondOrStepTimer: every_secs", every_secs, optional=True, unit="seconds")
        check_int("SecondOrStepTimer: every_steps", every_steps, optional=True)
        if clock is not None and not callable(clock):
            raise TypeError(f"SecondOrStepTimer: clock must be callable, got {clock!r}")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self._clock: Clock = clock if clock is not None else anyio.current_time
        self._last_step: int | None = None
        self._last_time: float | None = None

    def __repr__(self) -> str:
        every = (
            f"every_secs={self._every_secs}"
            if self._every_secs is not None
            else f"every_steps={self._every_steps}"
        )
        return f"SecondOrStepTimer({every}, last_triggered_step={self._last_step})"

    def reset(self) -> None:
        """Forget the last trigger: the next question is answered True."""
        self._last_step = None
        self._last_time = None

    def should_trigger_for_step(self, step: int) -> bool:
        """True if never triggered, or (for another step) the interval has passed.

        A step-based timer never reads the clock here.
        """
        if self._last_step is None:
            return True
        if step == self._last_step:
            return False
        if self._every_secs is not None:
            assert self._last_time is not None  # a seconds timer always records the time
            return self._clock() >= self._last_time + self._every_secs
        return self._every_steps is not None and step >= self._last_step + self._every_steps

    def should_trigger_after(self, pending: int, step: int) -> bool:
        """Whether ``step`` will be due once a trigger still to be recorded at ``pending``
        is: a seconds timer's interval starts only when it is recorded (so no), a step
        timer's ``every_steps`` after ``pending``."""
        if self._every_steps is None:
            return False
        return step != pending and step >= pending + self._every_steps

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Record a trigger at ``step``; return ``(elapsed_secs, elapsed_steps)`` since the last.

        Both are ``None`` on the first trigger. A step-based timer with the
        default clock used outside an event loop (where there is no clock to
        read) still counts steps; its ``elapsed_secs`` is then ``None``.
        """
        now = self._clock() if self._every_secs is not None else self._step_timer_now()
        elapsed: tuple[float | None, int | None] = (None, None)
        if self._last_step is not None:
            last_time = self._last_time
            seconds = None if now is None or last_time is None else now - last_time
            elapsed = (seconds, step - self._last_step)
        self._last_time = now
        self._last_step = step
        return elapsed

    def _step_timer_now(self) -> float | None:
        """The time for a step-based timer's report, or ``None`` if there is no clock to read.

        Only the default clock can be missing (outside an event loop); a clock the
        caller gave is always read, and its errors propagate.
        """
        if self._clock is not anyio.current_time:
            return self._clock()
        try:
            return anyio.current_time()
        except RuntimeError:  # anyio's NoEventLoopError (no running event loop) is one
            return None

    def last_triggered_step(self) -> int | None:
        """The step of the last trigger, or ``None`` if it never triggered."""
        return self._last_step

    def state_dict(self) -> dict[str, int | None]:
        """The last triggered step (times do not survive a restart)."""
        return {"last_triggered_step": self._last_step}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Take back the last triggered step; the interval in seconds restarts now."""
        step = state.get("last_triggered_step")
        if step is None:
            self.reset()
        elif isinstance(step, int) and not isinstance(step, bool):
            self._last_step = step
            self._last_time = self._clock()
        else:
            raise ValueError(f"timer state: last_triggered_step must be an int or None, got {step!r}")


class NeverTriggerTimer:
    """A timer that never fires (for hooks that only act at ``end``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NeverTriggerTimer()"

    def reset(self) -> None:
        """Nothing to forget."""

    def should_trigger_for_step(self, step: int) -> bool:
        """Always False."""
        return False

    def should_trigger_after(self, pending: int, step: int) -> bool:
        """Always False."""
        return False

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Always ``(None, None)``."""
        return (None, None)

    def last_triggered_step(self) -> int | None:
        """Always ``None``."""
        return None
