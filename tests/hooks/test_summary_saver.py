"""SummarySaverHook (TF basic_session_run_hooks_test 149-156) and TensorBoard output."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookrun.hooks import StopAtStepHook, SummarySaverHook, TensorBoardWriter, read_eval_metrics

from ._support import FakeClock, ListWriter, context, drive, values


def run_steps(hook: SummarySaverHook, count: int, clock: FakeClock, secs: float = 0.0) -> list[int]:
    """Drive ``count`` runs by hand; return the global steps on which scalars were fetched."""
    fetched = []
    for step in range(count):
        ctx = context(step)
        args = hook.before_run(ctx)
        results = None if args is None else {tag: float(step) for tag in args.fetches}
        if args is not None:
            fetched.append(step + 1)
        hook.after_run(ctx, values(step + 1, results))
        clock.advance(secs)
    return fetched


def test_raise_when_scalars_missing() -> None:
    """Nothing to write (TF: no summary op) is a ValueError."""
    with pytest.raises(ValueError, match="at least one scalar"):
        SummarySaverHook(save_steps=1, summary_writer=ListWriter())


def test_raise_when_no_destination() -> None:
    """Neither output_dir nor summary_writer is a ValueError at construction."""
    with pytest.raises(ValueError, match="give output_dir or summary_writer"):
        SummarySaverHook(save_steps=1, scalars=["loss"])


def test_raise_in_both_secs_and_steps() -> None:
    """Both save_steps and save_secs: TF's timer message."""
    with pytest.raises(ValueError, match=r"Can not provide both every_secs and every_steps\."):
        SummarySaverHook(save_steps=1, save_secs=1, summary_writer=ListWriter(), scalars=["x"])


def test_raise_in_none_secs_and_steps() -> None:
    """Neither save_steps nor save_secs: TF's timer message."""
    with pytest.raises(ValueError, match=r"Either every_secs or every_steps should be provided\."):
        SummarySaverHook(summary_writer=ListWriter(), scalars=["x"])


def test_scalars_must_be_keys_with_string_tags() -> None:
    """A bare string or non-string tags are TypeErrors."""
    with pytest.raises(TypeError, match="scalars must be a mapping"):
        SummarySaverHook(save_steps=1, summary_writer=ListWriter(), scalars="loss")
    with pytest.raises(TypeError, match="summary tags must be strings"):
        SummarySaverHook(save_steps=1, summary_writer=ListWriter(), scalars={1: "loss"})  # type: ignore[dict-item]


@pytest.mark.anyio
async def test_save_steps() -> None:
    """Every 8 steps over 30: written at 1, 9, 17, 25, fetched only then."""
    writer, clock = ListWriter(), FakeClock()
    hook = SummarySaverHook(save_steps=8, summary_writer=writer, scalars=["loss"], clock=clock)
    await hook.begin()
    assert run_steps(hook, 30, clock) == [1, 9, 17, 25]
    assert writer.steps("loss") == [1, 9, 17, 25]
    await hook.end(None)
    assert writer.flushes == 1 and not writer.closed


@pytest.mark.anyio
async def test_multiple_summaries() -> None:
    """Several scalars are written together at the same steps, under their tags."""
    writer, clock = ListWriter(), FakeClock()
    hook = SummarySaverHook(
        save_steps=8, summary_writer=writer, scalars={"a": "x", "b": "y"}, clock=clock
    )
    await hook.begin()
    run_steps(hook, 10, clock)
    assert writer.scalars == [("a", 0.0, 1), ("b", 0.0, 1), ("a", 8.0, 9), ("b", 8.0, 9)]


@pytest.mark.anyio
async def test_save_secs_saving_once_every_step() -> None:
    """A 0.5 s interval with 0.5 s steps writes every step."""
    writer, clock = ListWriter(), FakeClock()
    hook = SummarySaverHook(save_secs=0.5, summary_writer=writer, scalars=["loss"], clock=clock)
    await hook.begin()
    assert run_steps(hook, 4, clock, secs=0.5) == [1, 2, 3, 4]


@pytest.mark.anyio
async def test_save_secs_saving_once_every_three_steps() -> None:
    """A 9 s interval with 3.1 s steps writes at steps 1, 4, 7."""
    writer, clock = ListWriter(), FakeClock()
    hook = SummarySaverHook(save_secs=9, summary_writer=writer, scalars=["loss"], clock=clock)
    await hook.begin()
    assert run_steps(hook, 8, clock, secs=3.1) == [1, 4, 7]


def test_non_numeric_value_is_a_type_error() -> None:
    """A fetched value float() refuses names the scalar."""
    hook = SummarySaverHook(
        save_steps=1, summary_writer=ListWriter(), scalars=["loss"], clock=FakeClock()
    )
    ctx = context(0)
    hook.before_run(ctx)
    with pytest.raises(TypeError, match="scalar 'loss' is not a number"):
        hook.after_run(ctx, values(1, {"loss": "high"}))


@pytest.mark.anyio
async def test_writes_real_event_files(tmp_path: Path, session_kind: str) -> None:
    """With output_dir the scalars are TensorBoard events TensorFlow's reader finds by step."""
    hook = SummarySaverHook(
        save_steps=2, output_dir=tmp_path, scalars={"loss": "loss", "acc": "accuracy"}
    )
    await drive(
        [hook, StopAtStepHook(num_steps=5)],
        lambda i: {"loss": 1.0 / (i + 1), "accuracy": i / 10},
        kind=session_kind,
    )
    metrics = read_eval_metrics(tmp_path)
    assert sorted(metrics) == [1, 3, 5]
    assert metrics[3] == {"loss": pytest.approx(1 / 3), "acc": pytest.approx(0.2)}


@pytest.mark.anyio
async def test_given_writer_is_flushed_not_closed(tmp_path: Path) -> None:
    """A writer the user passed stays open at end; one the hook made is closed."""
    writer = TensorBoardWriter(tmp_path)
    hook = SummarySaverHook(save_steps=1, summary_writer=writer, scalars=["v"])
    await drive([hook, StopAtStepHook(num_steps=2)], lambda i: {"v": i})
    writer.add_scalar("after", 1.0, 9)
    writer.close()
    assert read_eval_metrics(tmp_path)[9] == {"after": 1.0}


@pytest.mark.anyio
async def test_given_tensorboard_writer_holds_the_scalars_when_the_session_ends(
    tmp_path: Path, session_kind: str
) -> None:
    """The hook flushes a writer it was given at end: the directory then holds every scalar."""
    writer = TensorBoardWriter(tmp_path)
    hook = SummarySaverHook(save_steps=1, summary_writer=writer, scalars=["v"])
    await drive([hook, StopAtStepHook(num_steps=3)], lambda i: {"v": i * 2}, kind=session_kind)
    assert read_eval_metrics(tmp_path) == {1: {"v": 0.0}, 2: {"v": 2.0}, 3: {"v": 4.0}}
    writer.close()
