"""read_eval_metrics (tensorflow_estimator early_stopping_test 190-191) and TensorBoardWriter."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hookrun.hooks import SummaryWriter, TensorBoardWriter, read_eval_metrics


def write_events(logdir: Path, rows: list[tuple[int, float, float]]) -> None:
    writer = TensorBoardWriter(logdir)
    for step, loss, accuracy in rows:
        writer.add_scalar("loss", loss, step)
        writer.add_scalar("accuracy", accuracy, step)
    writer.close()


def test_read_eval_metrics(tmp_path: Path) -> None:
    """Steps map to {tag: value}, in ascending step order."""
    write_events(tmp_path, [(3000, 5, 6), (1000, 1, 2), (2000, 3, 4)])
    assert read_eval_metrics(tmp_path) == {
        1000: {"loss": 1, "accuracy": 2},
        2000: {"loss": 3, "accuracy": 4},
        3000: {"loss": 5, "accuracy": 6},
    }
    assert list(read_eval_metrics(tmp_path)) == [1000, 2000, 3000]


def test_read_eval_metrics_when_no_events(tmp_path: Path) -> None:
    """An empty or missing directory reads as {}."""
    assert read_eval_metrics(tmp_path) == {}
    assert read_eval_metrics(tmp_path / "missing") == {}


def test_corrupt_file_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A corrupt record ends that file's reading with a warning; earlier records count."""
    write_events(tmp_path, [(1, 1.0, 2.0)])
    (path,) = tmp_path.glob("events.out.tfevents.*")
    path.write_bytes(path.read_bytes() + b"\x05\x00\x00\x00\x00\x00\x00\x00garbage!")
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        assert read_eval_metrics(tmp_path) == {1: {"loss": 1.0, "accuracy": 2.0}}
    assert "Skipping rest of the event file" in caplog.text


def test_two_writers_share_a_directory(tmp_path: Path) -> None:
    """Two writers on one directory get distinct files and both are read."""
    first, second = TensorBoardWriter(tmp_path), TensorBoardWriter(tmp_path)
    first.add_scalar("a", 1.0, 1)
    second.add_scalar("b", 2.0, 1)
    first.close()
    second.close()
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    assert read_eval_metrics(tmp_path) == {1: {"a": 1.0, "b": 2.0}}


def test_tensorboard_writer_is_a_summary_writer(tmp_path: Path) -> None:
    """TensorBoardWriter satisfies the SummaryWriter protocol."""
    writer = TensorBoardWriter(tmp_path)
    assert isinstance(writer, SummaryWriter)
    writer.flush()
    writer.close()


def test_missing_tensorboardx_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without tensorboardX the error says to install hookrun[tensorboard]."""
    import sys

    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(ImportError, match=r"pip install 'hookrun\[tensorboard\]'"):
        TensorBoardWriter(tmp_path)


@pytest.mark.anyio
async def test_hooks_opening_one_new_directory_concurrently(tmp_path: Path) -> None:
    """Two writers created at once in worker threads for a missing directory both succeed."""
    import anyio

    target = tmp_path / "new" / "board"
    writers: list[TensorBoardWriter] = []

    async def open_one() -> None:
        writers.append(await anyio.to_thread.run_sync(TensorBoardWriter, target))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(open_one)
    for writer in writers:
        writer.close()
    assert len(list(target.glob("events.out.tfevents.*"))) == 4


def test_flush_writes_every_queued_event(tmp_path: Path) -> None:
    """After add_scalar + flush, reading the directory back finds the value, every time."""
    for attempt in range(20):
        logdir = tmp_path / str(attempt)
        writer = TensorBoardWriter(logdir)
        writer.add_scalar("loss", 1.0, 7)
        writer.flush()
        assert read_eval_metrics(logdir) == {7: {"loss": 1.0}}
        writer.add_scalar("loss", 2.0, 8)
        writer.flush()
        assert read_eval_metrics(logdir) == {7: {"loss": 1.0}, 8: {"loss": 2.0}}
        writer.close()


def test_a_live_reader_sees_each_value_once_flushed(tmp_path: Path) -> None:
    """A reader of a live directory (metrics-based early stopping) is never one write late."""
    writer = TensorBoardWriter(tmp_path)
    for step in range(1, 6):
        writer.add_scalar("eval/loss", 1.0 / step, step)
        writer.flush()
        assert max(read_eval_metrics(tmp_path)) == step
    writer.close()


def test_flush_secs_zero_flushes_on_every_add(tmp_path: Path) -> None:
    writer = TensorBoardWriter(tmp_path, flush_secs=0)
    writer.add_scalar("x", 3.0, 1)
    assert read_eval_metrics(tmp_path) == {1: {"x": 3.0}}
    writer.close()


def test_closed_writer_refuses_new_values_and_close_is_idempotent(tmp_path: Path) -> None:
    writer = TensorBoardWriter(tmp_path)
    writer.add_scalar("x", 1.0, 1)
    writer.close()
    writer.close()
    writer.flush()  # nothing to do
    with pytest.raises(RuntimeError, match="is closed"):
        writer.add_scalar("x", 2.0, 2)
    assert read_eval_metrics(tmp_path) == {1: {"x": 1.0}}


def test_bad_flush_secs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="flush_secs must be a number of seconds >= 0"):
        TensorBoardWriter(tmp_path, flush_secs=-1)
