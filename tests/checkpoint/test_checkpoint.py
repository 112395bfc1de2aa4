"""Checkpointer and latest_checkpoint: atomic, checksummed files, an index, retention,
corruption detected and skipped, cancellation that leaves nothing half-written."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

import hookrun
from hookrun import (
    CheckpointCorruptionWarning,
    Checkpointer,
    CorruptCheckpointError,
    latest_checkpoint,
)
from hookrun._checkpoint import _file as _checkpoint_file

pytestmark = pytest.mark.anyio


def names(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def flip_byte(path: str, offset: int) -> None:
    """Flip one bit of the byte at ``offset`` (negative: from the end)."""
    if offset < 0:
        offset += os.path.getsize(path)
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)
        file.seek(offset)
        file.write(bytes([byte[0] ^ 0x10]))


def truncate(path: str, keep: int) -> None:
    with open(path, "r+b") as file:
        file.truncate(keep)


async def saved(directory: Path, steps: range, **options: Any) -> Checkpointer:
    checkpointer = Checkpointer(directory, **options)
    for step in steps:
        await checkpointer.save(step, {"step": step, "weights": np.full(1000, step, dtype=np.float64)})
    return checkpointer


async def test_save_and_restore_round_trip(tmp_path: Path) -> None:
    """A saved state is restored exactly, with its step and path."""
    checkpointer = await saved(tmp_path, range(1))
    restored = await checkpointer.restore()
    assert restored is not None
    assert restored.step == 0 and restored.info.path == str(tmp_path / "ckpt-0")
    np.testing.assert_array_equal(restored.state["weights"], np.zeros(1000))


async def test_restore_of_an_empty_directory_is_none(tmp_path: Path) -> None:
    """No checkpoint yet: restore() and latest() give None."""
    checkpointer = Checkpointer(tmp_path / "new")
    assert await checkpointer.restore() is None
    assert await checkpointer.latest() is None
    assert latest_checkpoint(tmp_path / "missing") is None


async def test_no_temporary_file_is_left_behind(tmp_path: Path) -> None:
    """After saves only the checkpoints and the index remain."""
    await saved(tmp_path, range(3))
    assert names(tmp_path) == ["ckpt-0", "ckpt-1", "ckpt-2", "index.json"]


async def test_latest_is_the_last_saved(tmp_path: Path) -> None:
    """latest() and latest_checkpoint() name the last save, even of a lower step."""
    checkpointer = await saved(tmp_path, range(3))
    await checkpointer.save(1, {"again": True})
    latest = await checkpointer.latest()
    assert latest is not None and latest.step == 1
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-1")
    assert [info.step for info in checkpointer.all()] == [0, 2, 1]


async def test_max_to_keep_removes_the_oldest(tmp_path: Path) -> None:
    """Only the newest max_to_keep checkpoints remain, on disk and in the index."""
    checkpointer = await saved(tmp_path, range(6), max_to_keep=2)
    assert names(tmp_path) == ["ckpt-4", "ckpt-5", "index.json"]
    index = json.loads((tmp_path / "index.json").read_text())
    assert [entry["step"] for entry in index["checkpoints"]] == [4, 5]
    assert [info.step for info in checkpointer.all()] == [4, 5]


async def test_max_to_keep_none_keeps_everything(tmp_path: Path) -> None:
    """max_to_keep=None keeps every checkpoint."""
    await saved(tmp_path, range(7), max_to_keep=None)
    assert len(names(tmp_path)) == 8


async def test_keep_best_keeps_the_best_by_metric(tmp_path: Path) -> None:
    """keep_best=2 (mode min) keeps the two lowest metrics next to the newest one."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=1, keep_best=2, mode="min")
    for step, loss in enumerate([5.0, 1.0, 3.0, 0.5, 4.0, 6.0]):
        await checkpointer.save(step, {"s": step}, metric=loss)
    assert [info.step for info in checkpointer.all()] == [1, 3, 5]


async def test_keep_best_mode_max(tmp_path: Path) -> None:
    """mode="max" keeps the highest metrics."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=1, keep_best=1, mode="max")
    for step, accuracy in enumerate([0.5, 0.9, 0.7, 0.6]):
        await checkpointer.save(step, {}, metric=accuracy)
    assert [info.step for info in checkpointer.all()] == [1, 3]


async def test_keep_best_tie_keeps_the_older(tmp_path: Path) -> None:
    """Of checkpoints with equal metrics, keep_best keeps the older (it kept the newer)."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=1, keep_best=1)
    for step, loss in enumerate([1.0, 1.0, 5.0]):
        await checkpointer.save(step, {}, metric=loss)
    assert [info.step for info in checkpointer.all()] == [0, 2]


async def test_keep_best_keeps_k_best_and_the_newest_max_to_keep(tmp_path: Path) -> None:
    """What remains is the keep_best best by metric (checkpoints without one never count)
    and the max_to_keep newest, whether they have a metric or not."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=2, keep_best=2, mode="max")
    for step, accuracy in enumerate([0.9, None, 0.8, 0.95, None, 0.1, None, None]):
        await checkpointer.save(step, {}, metric=accuracy)
    assert [info.step for info in checkpointer.all()] == [0, 3, 6, 7]


async def test_best_is_the_best_kept_checkpoint(tmp_path: Path) -> None:
    """best() is the kept checkpoint with the best metric (the older of a tie), None without one."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=None, mode="max")
    assert checkpointer.best() is None
    await checkpointer.save(1, {})
    assert checkpointer.best() is None
    for step, accuracy in [(2, 0.5), (3, float("nan")), (4, 0.7), (5, 0.7), (6, 0.6)]:
        await checkpointer.save(step, {}, metric=accuracy)
    best = checkpointer.best()
    assert best is not None and (best.step, best.metric) == (4, 0.7)
    assert best == Checkpointer(tmp_path, mode="max").best()  # from the index, after a restart
    lowest = Checkpointer(tmp_path, mode="min").best()
    assert lowest is not None and lowest.step == 2


async def test_keep_every_n_hours_preserves_old_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One checkpoint per keep_checkpoint_every_n_hours is kept for good (TensorFlow's rule)."""
    now = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    checkpointer = Checkpointer(tmp_path, max_to_keep=1, keep_checkpoint_every_n_hours=1)
    for step in range(6):
        now[0] += 1800.0  # half an hour per save
        await checkpointer.save(step, {})
    # Saved at +0.5 h, +1 h, ... +3 h; preserved: the first at least 1 h after start, then hourly.
    kept = [info.step for info in checkpointer.all()]
    assert kept == [1, 3, 5]
    assert [info.preserved for info in checkpointer.all()] == [True, True, False]


async def test_truncated_latest_falls_back_with_a_warning(tmp_path: Path) -> None:
    """A truncated newest checkpoint is skipped with a warning naming it; the previous one is used."""
    checkpointer = await saved(tmp_path, range(3))
    truncate(str(tmp_path / "ckpt-2"), 100)
    with pytest.warns(CheckpointCorruptionWarning, match="ckpt-2"):
        assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-1")
    with pytest.warns(CheckpointCorruptionWarning, match="ckpt-2"):
        restored = await checkpointer.restore()
    assert restored is not None and restored.step == 1


@pytest.mark.parametrize("where", ["magic", "header", "payload", "digest"])
async def test_bit_flips_anywhere_are_detected(tmp_path: Path, where: str) -> None:
    """One flipped bit in the marker, the header, the payload or the checksum is detected and skipped."""
    checkpointer = await saved(tmp_path, range(2))
    path = str(tmp_path / "ckpt-1")
    flip_byte(path, {"magic": 2, "header": 20, "payload": -4000, "digest": -3}[where])
    with pytest.warns(CheckpointCorruptionWarning, match="ckpt-1"):
        assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-0")
    with pytest.warns(CheckpointCorruptionWarning, match="ckpt-1"):
        latest = await checkpointer.latest()
    assert latest is not None and latest.step == 0


async def test_an_explicitly_restored_corrupt_file_raises(tmp_path: Path) -> None:
    """restore(path) of a corrupt file raises CorruptCheckpointError naming it, never falls back."""
    checkpointer = await saved(tmp_path, range(2))
    path = str(tmp_path / "ckpt-1")
    flip_byte(path, -4000)
    with pytest.raises(CorruptCheckpointError, match=r"ckpt-1.*checksum") as caught:
        await checkpointer.restore(path)
    assert caught.value.path == path


async def test_all_corrupt_means_no_checkpoint(tmp_path: Path) -> None:
    """When every checkpoint is corrupt, latest_checkpoint is None (with a warning per file)."""
    await saved(tmp_path, range(2))
    for name in ("ckpt-0", "ckpt-1"):
        truncate(str(tmp_path / name), 10)
    with pytest.warns(CheckpointCorruptionWarning) as caught:
        assert latest_checkpoint(tmp_path) is None
    assert {"ckpt-0", "ckpt-1"} <= {Path(str(w.message).split("'")[1]).name for w in caught}


async def test_a_checkpoint_missing_from_the_index_is_found(tmp_path: Path) -> None:
    """A process killed after the rename but before the index update loses nothing."""
    await saved(tmp_path, range(3))
    index = json.loads((tmp_path / "index.json").read_text())
    index["checkpoints"] = index["checkpoints"][:1]
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-2")
    assert [info.step for info in Checkpointer(tmp_path).all()] == [0, 1, 2]


async def test_an_unreadable_index_is_rebuilt(tmp_path: Path) -> None:
    """A garbled index is reported and rebuilt from the files."""
    await saved(tmp_path, range(2))
    (tmp_path / "index.json").write_text("{not json")
    with pytest.warns(CheckpointCorruptionWarning, match="index"):
        checkpointer = Checkpointer(tmp_path)
    assert [info.step for info in checkpointer.all()] == [0, 1]


async def test_other_files_are_ignored(tmp_path: Path) -> None:
    """A README in the directory is not mistaken for a checkpoint."""
    await saved(tmp_path, range(1))
    (tmp_path / "README").write_text("notes")
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-0")


def test_unwritable_directory_is_a_clear_error_at_construction(tmp_path: Path) -> None:
    """A directory that cannot be created or written is an OSError naming it."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match=r"checkpoint directory .*file/ckpts.* cannot be written"):
        Checkpointer(blocker / "ckpts")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only directories")
def test_read_only_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A read-only directory is a PermissionError naming it."""
    target = tmp_path / "ro"
    target.mkdir()
    target.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match=r"ro.* cannot be written"):
            Checkpointer(target)
    finally:
        target.chmod(0o700)


def test_stale_temporary_files_of_dead_processes_are_removed(tmp_path: Path) -> None:
    """Leftovers of a killed writer are cleaned up; those of live processes are kept."""
    dead = tmp_path / ".ckpt-3.tmp-999999999-abcd"
    live = tmp_path / f".ckpt-4.tmp-{os.getppid()}-abcd"
    dead.write_bytes(b"partial")
    live.write_bytes(b"partial")
    Checkpointer(tmp_path)
    assert not dead.exists() and live.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_to_keep": 0}, "max_to_keep must be None or an int >= 1"),
        ({"keep_best": -1}, "keep_best must be None or an int >= 1"),
        ({"keep_checkpoint_every_n_hours": 0}, "keep_checkpoint_every_n_hours must be None or a number > 0"),
        ({"mode": "best"}, 'mode must be "min" or "max"'),
        ({"basename": "a/b"}, "basename must be a plain file name"),
    ],
)
def test_bad_options_are_named(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    """Each bad option is a ValueError naming it."""
    with pytest.raises(ValueError, match=message):
        Checkpointer(tmp_path, **options)


async def test_bad_steps_and_states_are_named(tmp_path: Path) -> None:
    """A negative step, a non-mapping state and a non-numeric metric are refused, naming the culprit."""
    checkpointer = Checkpointer(tmp_path)
    with pytest.raises(ValueError, match="step must be an int >= 0, got -1"):
        await checkpointer.save(-1, {})
    with pytest.raises(TypeError, match="must be a mapping, got list"):
        await checkpointer.save(1, [1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="metric must be a number, got 'low'"):
        await checkpointer.save(1, {}, metric="low")  # type: ignore[arg-type]


async def test_restoring_with_another_codec_names_both(tmp_path: Path) -> None:
    """A checkpoint written by another codec is a ValueError naming both codecs."""
    with pytest.warns(hookrun.UnsafeCodecWarning):
        codec = hookrun.PickleCodec()
    await Checkpointer(tmp_path, codec=codec).save(1, {"a": 1})
    with pytest.raises(ValueError, match=r"'pickle'.*'hookrun-msgpack-1'"):
        await Checkpointer(tmp_path).restore()


async def test_concurrent_saves_run_one_at_a_time(tmp_path: Path) -> None:
    """Saves started together all complete, in order, each file valid."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=None)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for step in range(5):
                tg.start_soon(checkpointer.save, step, {"w": np.full(50_000, step)})
    assert sorted(info.step for info in checkpointer.all()) == list(range(5))
    assert len({info.seq for info in checkpointer.all()}) == 5
    for info in checkpointer.all():
        _checkpoint_file.verify_file(info.path)


async def test_a_cancelled_save_leaves_the_previous_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled mid-write (before the rename), a save leaves no file and the previous latest valid."""
    checkpointer = await saved(tmp_path, range(1))
    entered, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def blocking_fsync(fd: int) -> None:
        if not entered.is_set():
            entered.set()
            release.wait(10)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", blocking_fsync)
    outcome: list[str] = []

    async def save() -> None:
        with anyio.CancelScope() as scope:
            holder.append(scope)
            await checkpointer.save(1, {"w": np.ones(1000)})
            outcome.append("finished")
        outcome.append("cancelled" if scope.cancelled_caught else "not cancelled")

    holder: list[anyio.CancelScope] = []
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(save)
            await anyio.to_thread.run_sync(entered.wait)
            holder[0].cancel()
            release.set()
    assert outcome == ["cancelled"]
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert names(tmp_path) == ["ckpt-0", "index.json"]
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-0")
    restored = await Checkpointer(tmp_path).restore()
    assert restored is not None and restored.step == 0


def test_a_codec_must_look_like_one(tmp_path: Path) -> None:
    """A codec without name, encode and decode is a TypeError at construction."""
    with pytest.raises(TypeError, match="is not a Codec"):
        Checkpointer(tmp_path, codec=object())  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_saves_cancelled_at_any_moment_never_hang_and_leave_the_latest_valid(tmp_path: Path) -> None:
    """A save cancelled before its worker thread even started returns at once (it used to
    wait for ever for a thread that never ran); the newest checkpoint left is valid."""
    checkpointer = Checkpointer(tmp_path)
    await checkpointer.save(0, {"x": 0})
    with anyio.fail_after(30):
        for step in range(1, 120):
            with anyio.move_on_after(0.0002 * (step % 7)):
                await checkpointer.save(step, {"x": step, "pad": b"x" * 100_000})
    restored = await checkpointer.restore()
    assert restored is not None and restored.state["x"] == restored.step
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temporary file left
