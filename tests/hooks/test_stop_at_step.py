"""StopAtStepHook (TF basic_session_run_hooks_test 107-110, trace T19)."""

from __future__ import annotations

import pytest

from hookrun import LocalStepCounter
from hookrun.hooks import StopAtStepHook

from ._support import context, drive, values


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
    with pytest.raises(TypeError, match="num_steps must be an int"):
        StopAtStepHook(num_steps=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_steps must be >= 0"):
        StopAtStepHook(num_steps=-1)


def test_stop_based_on_last_step() -> None:
    """last_step 10: steps 5 and 9 do not stop, 10 does, and 11 again on a fresh context."""
    hook = StopAtStepHook(last_step=10)
    for step, expected in ((5, False), (9, False), (10, True), (11, True)):
        ctx = context(step - 1)
        hook.after_run(ctx, values(step))
        assert ctx.stop_requested is expected, step


@pytest.mark.anyio
async def test_stop_based_on_num_step() -> None:
    """num_steps 10 from global step 5 stops at 15 (not 13 or 14; 16 too)."""
    hook = StopAtStepHook(num_steps=10)

    class Coord:
        step_counter = LocalStepCounter(5)

    await hook.after_create_session(None, Coord())
    assert hook.last_step == 15
    for step, expected in ((13, False), (14, False), (15, True), (16, True)):
        ctx = context(step - 1)
        hook.after_run(ctx, values(step))
        assert ctx.stop_requested is expected, step


def test_stop_based_with_multiple_steps() -> None:
    """A counter jumping from 5 to 15 in one run still stops at last_step 10."""
    hook = StopAtStepHook(last_step=10)
    ctx = context(5)
    hook.after_run(ctx, values(15))
    assert ctx.stop_requested


def test_num_steps_falls_back_to_the_step_context() -> None:
    """Without a coordinator step counter, last_step comes from the first step's global step."""
    hook = StopAtStepHook(num_steps=3)
    hook.before_run(context(7))
    assert hook.last_step == 10


@pytest.mark.anyio
async def test_stops_a_monitored_session_after_num_steps(session_kind: str) -> None:
    """In a session starting at step 5, num_steps=3 stops after the run reaching 8 (T19)."""
    hook = StopAtStepHook(num_steps=3)
    runs = await drive([hook], lambda i: {}, kind=session_kind, step_counter=LocalStepCounter(5))
    assert len(runs) == 3
    assert hook.last_step == 8


@pytest.mark.anyio
async def test_last_step_already_passed_stops_after_one_run(session_kind: str) -> None:
    """A last_step at or below the current step stops after the first run."""
    runs = await drive(
        [StopAtStepHook(last_step=2)],
        lambda i: {},
        kind=session_kind,
        step_counter=LocalStepCounter(4),
    )
    assert len(runs) == 1
