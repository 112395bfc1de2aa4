"""Composable triggers: pure "should it fire at this step, at this time" decisions.

``every(steps=N)``, ``every(seconds=S)``, ``at_step(N)`` and ``when(predicate)``
build triggers; ``a | b`` fires when either does and ``a & b`` when both do.
A trigger is asked ``should_fire(step, now)`` and told ``fired(step, now)``
when its owner acted; composites forward ``fired`` to every member, so
``every(steps=100) | every(seconds=60)`` restarts both periods whichever
fired. Triggers never read a clock themselves: the owner passes ``now``.

Invariant: ``every`` fires on the first question (like TensorFlow's timers)
and never twice for the same step.
"""

from __future__ import annotations

from collections.abc import Callable

from .._validate import check_callable, check_int, check_number

__all__ = ["Trigger", "at_step", "every", "when"]


class Trigger:
    """Base class of triggers; compose them with ``|`` (either) and ``&`` (both)."""

    def should_fire(self, step: int, now: float) -> bool:
        """Whether the owner should act at ``step`` (``now`` in seconds)."""
        raise NotImplementedError

    def fired(self, step: int, now: float) -> None:
        """Record that the owner acted at ``step``."""

    def reset(self) -> None:
        """Forget every recorded firing."""

    def __or__(self, other: Trigger) -> Trigger:
        return _AnyOf(self, _check(other))

    def __and__(self, other: Trigger) -> Trigger:
        return _AllOf(self, _check(other))


def _check(other: object) -> Trigger:
    if not isinstance(other, Trigger):
        raise TypeError(f"triggers compose only with triggers, got {other!r}")
    return other


class _Every(Trigger):
    __slots__ = ("_last_step", "_last_time", "seconds", "steps")

    def __init__(self, steps: int | None, seconds: float | None) -> None:
        self.steps = steps
        self.seconds = seconds
        self._last_step: int | None = None
        self._last_time = 0.0

    def __repr__(self) -> str:
        return (
            f"every(steps={self.steps})"
            if self.steps is not None
            else f"every(seconds={self.seconds})"
        )

    def should_fire(self, step: int, now: float) -> bool:
        last = self._last_step
        if last is None:
            return True
        if step == last:
            return False
        if self.seconds is not None:
            return now >= self._last_time + self.seconds
        assert self.steps is not None
        return step >= last + self.steps

    def fired(self, step: int, now: float) -> None:
        self._last_step, self._last_time = step, now

    def reset(self) -> None:
        self._last_step = None


class _AtStep(Trigger):
    __slots__ = ("done", "step")

    def __init__(self, step: int) -> None:
        self.step = step
        self.done = False

    def __repr__(self) -> str:
        return f"at_step({self.step})"

    def should_fire(self, step: int, now: float) -> bool:
        return not self.done and step >= self.step

    def fired(self, step: int, now: float) -> None:
        self.done = self.done or step >= self.step

    def reset(self) -> None:
        self.done = False


class _When(Trigger):
    __slots__ = ("predicate",)

    def __init__(self, predicate: Callable[[int], object]) -> None:
        self.predicate = predicate

    def __repr__(self) -> str:
        return f"when({getattr(self.predicate, '__qualname__', self.predicate)})"

    def should_fire(self, step: int, now: float) -> bool:
        return bool(self.predicate(step))


class _AnyOf(Trigger):
    __slots__ = ("members",)

    def __init__(self, *members: Trigger) -> None:
        self.members = members

    def __repr__(self) -> str:
        return "(" + " | ".join(map(repr, self.members)) + ")"

    def should_fire(self, step: int, now: float) -> bool:
        return any(member.should_fire(step, now) for member in self.members)

    def fired(self, step: int, now: float) -> None:
        for member in self.members:
            member.fired(step, now)

    def reset(self) -> None:
        for member in self.members:
            member.reset()


class _AllOf(_AnyOf):
    __slots__ = ()

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.members)) + ")"

    def should_fire(self, step: int, now: float) -> bool:
        return all(member.should_fire(step, now) for member in self.members)


def every(*, steps: int | None = None, seconds: float | None = None) -> Trigger:
    """Fire on the first step, then every ``steps`` steps or every ``seconds`` seconds.

    Args:
        steps: Fire every this many steps.
        seconds: Fire every this many seconds (exactly one of the two).
    """
    if steps is None and seconds is None:
        raise ValueError("every() needs steps=... or seconds=...")
    if steps is not None and seconds is not None:
        raise ValueError(
            "every() takes steps=... or seconds=..., not both; compose them: "
            "every(steps=...) | every(seconds=...)"
        )
    check_int("every(steps=...)", steps, minimum=1, optional=True)
    check_number("every(seconds=...)", seconds, strict=True, optional=True, unit="seconds")
    return _Every(steps, seconds)


def at_step(step: int) -> Trigger:
    """Fire once, at the first step >= ``step``.

    Args:
        step: The step to fire at (or at the first one past it).
    """
    check_int("at_step(step)", step)
    return _AtStep(step)


def when(predicate: Callable[[int], object]) -> Trigger:
    """Fire at every step for which ``predicate(step)`` is true.

    Args:
        predicate: A function of the global step; a true result fires.
    """
    check_callable("when(predicate)", predicate)
    return _When(predicate)
