"""StopAtStepHook (TF basic_session_run_hooks_test 107-110, trace T19), driven with hookrun.testing."""

from __future__ import annotations

import pytest

from hookrun import LocalStepCounter
from hookrun.hooks import StopAtStepHook
from hookrun.testing import Drive

pytestmark = pytest.mark.anyio


def test_raise_in_both_last_step_and_num_steps() -> None:
    """Both arguments is a ValueError with TF's message."""
    with pytest.raises(
        ValueError, match=r"^Only one of num_steps or last_step can be specified\.$"
    ):
        StopAtStepHook(num_steps=10, last_step=20)


def test_raise_in_neither() -> None:
    """Neither argument is a ValueError with TF's message."""
    with pytest.raises(ValueError, match=r"^One of num_steps or last_step must be specified\.$"):
        StopAtStepHook()


def test_rejects_bad_values() -> None:
    """Non-int or negative step counts are rejected at construction."""
    with pytest.raises(TypeError, match=r"num_steps must be None or an int >= 0, got 2\.5"):
        StopAtStepHook(num_steps=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_steps must be None or an int >= 0, got -1"):
        StopAtStepHook(num_steps=-1)


async def test_stop_based_on_last_step(drive: Drive) -> None:
    """last_step 10: the runs reaching 5 and 9 do not stop, the one reaching 10 does."""
    hook = StopAtStepHook(last_step=10)
    record = await drive(hook, steps=20)
    assert record.stopped_at == 9 and record.steps == 10


async def test_stop_based_on_num_step(drive: Drive) -> None:
    """num_steps 10 from global step 5 stops at 15: the run from 14 to 15 asks to stop."""
    hook = StopAtStepHook(num_steps=10)
    record = await drive(hook, steps=20, step_counter=LocalStepCounter(5))
    assert hook.last_step == 15
    assert record.stopped_at == 14 and record.steps == 10


class JumpingCounter(LocalStepCounter):
    """A shared, distributed counter as seen from one worker: +10 per run."""

    def increment_nowait(self, n: int = 1) -> int:
        return super().increment_nowait(10 * n)

    async def increment(self, n: int = 1) -> int:
        return self.increment_nowait(n)


async def test_stop_based_with_multiple_steps(drive: Drive) -> None:
    """A counter jumping from 5 to 15 in one run still stops at last_step 10."""
    record = await drive(
        StopAtStepHook(last_step=10), steps=5, step_counter=JumpingCounter(5)
    )
    assert record.stopped_at == 5 and record.steps == 1


async def test_num_steps_is_fixed_once_and_survives_recovery(drive: Drive) -> None:
    """last_step comes from the step when the first session is created; a recovery at
    step 2 does not move it (TF: not recomputed after recovery)."""
    hook = StopAtStepHook(num_steps=3)
    record = await drive(hook, steps=10, errors={2: "aborted"}, step_counter=LocalStepCounter(5))
    assert record.sessions == 2 and hook.last_step == 8
    assert record.steps == 3 and record.stopped_at == 7


async def test_num_steps_falls_back_to_the_step_context() -> None:
    """Without a coordinator step counter, last_step comes from the first step's global step."""

    class Coord:
        step_counter = None

    hook = StopAtStepHook(num_steps=3)
    await hook.after_create_session(None, Coord())
    assert hook.last_step is None
    hook.before_run(_Context(7))  # type: ignore[arg-type]
    assert hook.last_step == 10


class _Context:
    def __init__(self, step: int) -> None:
        self.global_step = step


async def test_last_step_already_passed_stops_after_one_run(drive: Drive) -> None:
    """A last_step at or below the current step stops after the first run."""
    record = await drive(StopAtStepHook(last_step=2), steps=5, step_counter=LocalStepCounter(4))
    assert record.steps == 1 and record.stopped_at == 4


async def test_requests_nothing_and_only_stops(drive: Drive) -> None:
    """The hook fetches nothing: every before_run returns None, the session runs no fetches."""
    hook = StopAtStepHook(num_steps=3)
    record = await drive(hook, steps=5)
    assert record.requests(hook) == [None, None, None]
    assert all(run.fetches == [] for run in record.runs)
