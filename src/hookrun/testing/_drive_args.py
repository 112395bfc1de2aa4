"""Checking ``drive()``'s arguments: each is refused, named as the caller wrote it, before
anything runs; what passes comes back in the form the drive uses."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._hook_protocol import RunOptions
from .._timer import Clock
from ._faults import resolve_fault
from ._record import as_mapping

__all__ = [
    "StepScript",
    "check_limits",
    "check_max_in_flight",
    "check_tick",
    "faults_of",
    "hooks_of",
    "lags_of",
    "script_of",
    "sequence_of",
]

#: One step of the script: the values it answers with, or ``(step, feed_dict) -> values``.
StepScript = Mapping[Any, Any] | Callable[[int, Mapping[Any, Any]], Mapping[Any, Any]]


def hooks_of(hooks: object) -> list[object]:
    if isinstance(hooks, (list, tuple)):
        return list(hooks)
    if isinstance(hooks, (str, bytes, Mapping)) or hooks is None:
        raise TypeError(f"drive() needs a hook or a sequence of hooks, got {hooks!r}")
    return [hooks]


def script_of(steps: object) -> list[StepScript]:
    if isinstance(steps, int) and not isinstance(steps, bool):
        if steps < 0:
            raise ValueError(f"drive(steps=...) must be >= 0 steps, got {steps}")
        return [{}] * steps
    script = sequence_of(steps, "steps")
    for index, step in enumerate(script):
        if not (callable(step) or isinstance(step, Mapping)):
            raise TypeError(
                f"drive(steps=[...]): step {index} must be a mapping of fetch key to value "
                f"or a callable (step, feed_dict) -> mapping, got {type(step).__name__}"
            )
    return list(script)


def lags_of(lags: object, steps: int) -> dict[int, int]:
    """``lags`` as script step -> count, each an int >= 0 for a step of the script."""
    if lags is None:
        return {}
    pairs = lags.items() if isinstance(lags, Mapping) else enumerate(sequence_of(lags, "lags"))
    found: dict[int, int] = {}
    for step, count in pairs:
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= steps:
            raise ValueError(f"drive(lags=...) keys are script steps 0..{steps}, got {step!r}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"drive(lags=...) counts are ints >= 0 (times the run lets other tasks run), got {count!r} for step {step}")
        found[step] = count
    return found


def check_max_in_flight(max_in_flight: object, options: RunOptions | None) -> int:
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
        raise TypeError(f"drive(max_in_flight=...) must be an int >= 1, got {max_in_flight!r}")
    if max_in_flight < 1:
        raise ValueError(f"drive(max_in_flight=...) must be an int >= 1, got {max_in_flight!r}")
    if max_in_flight > 1 and options is not None:
        raise ValueError(
            f"drive(max_in_flight={max_in_flight}) runs its steps with session.iterate(), which takes "
            "no options: drop options=... (a hook's before_run can still ask for RunOptions)"
        )
    return max_in_flight


def faults_of(errors: Mapping[int, Any] | None) -> dict[int, list[BaseException | str]]:
    faults: dict[int, list[BaseException | str]] = {}
    for step, planned in as_mapping(errors, "drive(errors=...)").items():
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"drive(errors=...) keys are script steps (ints >= 0), got {step!r}")
        attempts = list(planned) if isinstance(planned, (list, tuple)) else [planned]
        faults[step] = [resolve_fault(fault, f"step {step}") for fault in attempts]
    return faults


def sequence_of(value: object, what: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(f"drive({what}=...) must be a list, got {type(value).__name__}")
    return value


def check_tick(tick: float, clock: Clock | None) -> float:
    if isinstance(tick, bool) or not isinstance(tick, int | float) or not tick >= 0:
        raise ValueError(f"drive(tick=...) must be a number of seconds >= 0, got {tick!r}")
    if tick and not callable(getattr(clock, "jump", None)):
        raise TypeError(
            "drive(tick=...) moves the clock between steps, so it needs a clock with "
            f"jump(seconds) such as hookrun.testing.MockClock; got clock={clock!r}"
        )
    return float(tick)


def check_limits(cancel_after: int | None, timeout: float) -> None:
    if cancel_after is not None and (
        not isinstance(cancel_after, int) or isinstance(cancel_after, bool) or cancel_after < 0
    ):
        raise ValueError(f"drive(cancel_after=...) must be a number of schedule points >= 0, got {cancel_after!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"drive(timeout=...) must be a positive number of seconds, got {timeout!r}")
