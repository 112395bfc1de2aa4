"""StepCounterHook (TF basic_session_run_hooks_test 142-148)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hookrun import LocalStepCounter
from hookrun.hooks import StepCounterHook, StopAtStepHook, read_eval_metrics

from ._support import FakeClock, ListWriter, context, drive, values


def feed_steps(
    hook: StepCounterHook, steps: list[int], clock: FakeClock, secs: float = 0.1
) -> None:
    """Call after_run for runs reaching each of ``steps``, ``secs`` apart."""
    previous = 0
    for step in steps:
        clock.advance(secs)
        hook.after_run(context(previous), values(step))
        previous = step


def test_requires_exactly_one_frequency() -> None:
    """Both or neither frequency is a ValueError with TF's message."""
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        StepCounterHook(every_n_steps=10, every_n_secs=1.0)
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        StepCounterHook(every_n_steps=None)


def test_rejects_both_output_dir_and_writer(tmp_path: Path) -> None:
    """output_dir and summary_writer together are ambiguous: ValueError."""
    with pytest.raises(ValueError, match="give output_dir or summary_writer, not both"):
        StepCounterHook(output_dir=tmp_path, summary_writer=ListWriter())


def test_rejects_a_writer_without_the_protocol() -> None:
    """A summary_writer lacking add_scalar/flush/close is a TypeError."""
    with pytest.raises(TypeError, match="summary_writer must have add_scalar"):
        StepCounterHook(summary_writer=object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_step_counter_every_n_steps(caplog: pytest.LogCaptureFixture) -> None:
    """Every 10 steps over 30 runs writes summaries at 11 and 21, without a warning."""
    writer, clock = ListWriter(), FakeClock()
    hook = StepCounterHook(every_n_steps=10, summary_writer=writer, clock=clock)
    await hook.begin()
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        feed_steps(hook, list(range(1, 31)), clock)
    assert writer.steps("global_step/sec") == [11, 21]
    assert writer.scalars[0][1] == pytest.approx(10 / 1.0)
    assert caplog.records == []
    await hook.end(None)
    assert writer.flushes == 1 and not writer.closed


@pytest.mark.anyio
async def test_step_counter_every_n_secs() -> None:
    """Every 0.1 s: summaries at steps 2 and 3 when each run takes 0.2 s."""
    writer, clock = ListWriter(), FakeClock()
    hook = StepCounterHook(every_n_steps=None, every_n_secs=0.1, summary_writer=writer, clock=clock)
    await hook.begin()
    feed_steps(hook, [1, 2, 3], clock, secs=0.2)
    assert writer.steps("global_step/sec") == [2, 3]
    assert writer.scalars[0][1] == pytest.approx(5.0)


def test_summary_tag_can_be_chosen() -> None:
    """The tag (TF: derived from the global step op name) is a keyword argument."""
    writer, clock = ListWriter(), FakeClock()
    hook = StepCounterHook(
        every_n_steps=1, summary_writer=writer, summary_tag="bar/foo/sec", clock=clock
    )
    feed_steps(hook, [1, 2], clock)
    assert writer.steps("bar/foo/sec") == [2]


def test_log_warning_if_global_step_not_increased(caplog: pytest.LogCaptureFixture) -> None:
    """A step that does not advance is warned about, at most five times."""
    hook = StepCounterHook(every_n_steps=1000, clock=FakeClock())
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        for _ in range(10):
            hook.after_run(context(0), values(1))
    warnings = [r for r in caplog.records if "has not been increased" in r.getMessage()]
    assert len(warnings) == 5


@pytest.mark.parametrize(
    ("every_n_steps", "jump", "expected"),
    [(10, 5, [15, 25]), (5, 5, [10, 15, 20, 25]), (5, 10, [20, 30, 40, 50])],
    ids=["less_than", "equal", "greater_than"],
)
def test_steps_per_run(every_n_steps: int, jump: int, expected: list[int]) -> None:
    """A counter advancing several steps per run (TF's steps_per_run tests 146-148)."""
    writer, clock = ListWriter(), FakeClock()
    hook = StepCounterHook(every_n_steps=every_n_steps, summary_writer=writer, clock=clock)
    last = 25 if jump == 5 else 50
    feed_steps(hook, list(range(jump, last + 1, jump)), clock)
    assert writer.steps("global_step/sec") == expected


@pytest.mark.anyio
async def test_logs_steps_per_second(caplog: pytest.LogCaptureFixture) -> None:
    """Each later trigger logs '<tag>: <rate>' at INFO."""
    clock = FakeClock()
    hook = StepCounterHook(every_n_steps=2, clock=clock)
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        feed_steps(hook, [1, 2, 3], clock, secs=0.5)
    assert [r.getMessage() for r in caplog.records] == ["global_step/sec: 2"]


@pytest.mark.anyio
async def test_writes_tensorboard_events(tmp_path: Path, session_kind: str) -> None:
    """With output_dir the rate lands in real TensorBoard event files, at the expected steps."""
    hook = StepCounterHook(every_n_steps=4, output_dir=tmp_path)
    await drive(
        [hook, StopAtStepHook(num_steps=10)],
        lambda i: {},
        kind=session_kind,
        step_counter=LocalStepCounter(),
    )
    assert sorted(read_eval_metrics(tmp_path)) == [5, 9]
    assert set(read_eval_metrics(tmp_path)[5]) == {"global_step/sec"}
