"""A Checkpointer owns exactly the regular files named ``<basename>-<step>`` of its
directory: sets of other basenames, a user's copies, near-miss names, directories,
symbolic links and foreign index files are never listed, restored or removed."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import anyio
import pytest

from hookrun import (
    CheckpointCorruptionWarning,
    Checkpointer,
    ChiefSessionCreator,
    LocalStepCounter,
    MonitoredTrainingSession,
    WorkerSessionCreator,
    latest_checkpoint,
)

pytestmark = pytest.mark.anyio

NEAR_MISSES = ("ckpt-1.keep", "best-model", "ckpt-01", "ckpt--1", "ckpt-1.tmp", "ckpt-", "ckpt-\uff11", "ckpt-2x")


async def foreign_checkpoint(directory: Path, saves: int = 50) -> Path:
    """A valid checkpoint of step 99 with a larger save number than any set here has."""
    checkpointer = Checkpointer(directory, max_to_keep=1)
    for seq in range(saves):
        await checkpointer.save(99 if seq == saves - 1 else seq, {"who": "foreign"})
    return directory / "ckpt-99"


async def test_another_basename_is_never_removed_nor_restored(tmp_path: Path) -> None:
    """A second Checkpointer of another basename leaves the first's files alone, and each
    restores its own state (the second used to delete model-10, the first to restore ema-1)."""
    model = Checkpointer(tmp_path, basename="model", max_to_keep=1)
    await model.save(10, {"who": "model"})
    ema = Checkpointer(tmp_path, basename="ema", max_to_keep=1)
    await ema.save(1, {"who": "ema"})
    assert (tmp_path / "model-10").exists()
    restored = await Checkpointer(tmp_path, basename="model").restore()
    assert restored is not None and restored.state == {"who": "model"} and restored.step == 10
    assert sorted(os.listdir(tmp_path)) == ["ema-1", "ema.index.json", "model-10", "model.index.json"]
    assert [info.step for info in ema.all()] == [1]


async def test_two_basenames_saving_alternately_stay_apart(tmp_path: Path) -> None:
    """Two checkpointers of one directory saving in turn each keep their own max_to_keep
    newest, list only their own, and their latest is their own last save."""
    ckpt = Checkpointer(tmp_path, max_to_keep=2)
    ema = Checkpointer(tmp_path, basename="ema", max_to_keep=2)
    for step in range(6):
        await ckpt.save(step, {"set": "ckpt", "step": step})
        await ema.save(step * 10, {"set": "ema", "step": step})
    assert [info.step for info in ckpt.all()] == [4, 5]
    assert [info.step for info in ema.all()] == [40, 50]
    for checkpointer, name, step in ((ckpt, "ckpt", 5), (ema, "ema", 50)):
        restored = await checkpointer.restore()
        assert restored is not None and restored.state == {"set": name, "step": 5}
        latest = await checkpointer.latest()
        assert latest is not None and latest.step == step
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-5")
    assert latest_checkpoint(tmp_path, basename="ema") == str(tmp_path / "ema-50")
    assert sorted(os.listdir(tmp_path)) == ["ckpt-4", "ckpt-5", "ema-40", "ema-50", "ema.index.json", "index.json"]


async def test_each_basename_keeps_its_preserved_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoints kept for good by keep_checkpoint_every_n_hours are recorded in each
    set's own index, so another set's saves never make a new Checkpointer forget them."""
    now = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    ckpt = Checkpointer(tmp_path, max_to_keep=1, keep_checkpoint_every_n_hours=1)
    ema = Checkpointer(tmp_path, basename="ema", max_to_keep=1)
    for step in range(4):
        now[0] += 1800.0
        await ckpt.save(step, {})
        await ema.save(step, {})
    preserved = [info.step for info in ckpt.all() if info.preserved]
    assert preserved == [1]
    again = Checkpointer(tmp_path, max_to_keep=1, keep_checkpoint_every_n_hours=1)
    assert [info.step for info in again.all() if info.preserved] == preserved
    await again.save(4, {})
    assert (tmp_path / "ckpt-1").exists()


async def test_near_miss_names_are_never_adopted_removed_or_restored(tmp_path: Path) -> None:
    """Valid checkpoint files under names a save never writes (``ckpt-1.keep``, ``best-model``,
    ``ckpt-01``, ...) are not listed, not restored, and survive retention."""
    source = await foreign_checkpoint(tmp_path / "elsewhere")
    directory = tmp_path / "run"
    checkpointer = Checkpointer(directory, max_to_keep=1)
    await checkpointer.save(0, {"who": "ours"})
    for name in NEAR_MISSES:
        shutil.copy(source, directory / name)
    (directory / "ckpt-3").mkdir()
    (directory / "ckpt-3" / "file").write_text("a user's")
    for step in (1, 2):
        await checkpointer.save(step, {"who": "ours"})
    fresh = Checkpointer(directory, max_to_keep=1)
    await fresh.save(4, {"who": "ours"})
    assert [info.step for info in fresh.all()] == [4]
    restored = await fresh.restore()
    assert restored is not None and restored.state == {"who": "ours"} and restored.step == 4
    assert latest_checkpoint(directory) == str(directory / "ckpt-4")
    assert sorted(os.listdir(directory)) == sorted([*NEAR_MISSES, "ckpt-3", "ckpt-4", "index.json"])
    assert (directory / "ckpt-3" / "file").read_text() == "a user's"


async def test_saving_the_step_of_a_directory_fails_and_leaves_it(tmp_path: Path) -> None:
    """A directory named like the checkpoint to save is an OSError naming it, left as it was,
    with no temporary file behind."""
    (tmp_path / "ckpt-3").mkdir()
    checkpointer = Checkpointer(tmp_path)
    with pytest.raises(OSError, match="ckpt-3"):
        await checkpointer.save(3, {})
    assert (tmp_path / "ckpt-3").is_dir()
    assert sorted(os.listdir(tmp_path)) == ["ckpt-3"]
    await checkpointer.save(4, {})
    assert [info.step for info in checkpointer.all()] == [4]


async def test_a_file_whose_header_is_of_another_step_is_skipped(tmp_path: Path) -> None:
    """``ckpt-7`` holding the checkpoint of step 99 is skipped with a warning, never restored."""
    source = await foreign_checkpoint(tmp_path / "elsewhere")
    checkpointer = Checkpointer(tmp_path / "run")
    await checkpointer.save(1, {"who": "ours"})
    shutil.copy(source, tmp_path / "run" / "ckpt-7")
    with pytest.warns(CheckpointCorruptionWarning, match=r"ckpt-7.*header is of step 99"):
        restored = await checkpointer.restore()
    assert restored is not None and restored.step == 1


async def test_a_symlink_out_of_the_directory_is_skipped(tmp_path: Path) -> None:
    """A symbolic link planted as the newest checkpoint, to a valid checkpoint elsewhere, is
    skipped with a warning naming it, and the previous checkpoint is used."""
    source = await foreign_checkpoint(tmp_path / "elsewhere")
    directory = tmp_path / "run"
    checkpointer = Checkpointer(directory)
    await checkpointer.save(1, {"who": "ours"})
    os.symlink(source, directory / "ckpt-99")
    with pytest.warns(CheckpointCorruptionWarning, match=r"ckpt-99.*symbolic link"):
        assert latest_checkpoint(directory) == str(directory / "ckpt-1")
    with pytest.warns(CheckpointCorruptionWarning, match=r"ckpt-99.*symbolic link"):
        restored = await checkpointer.restore()
    assert restored is not None and restored.state == {"who": "ours"}
    with pytest.warns(CheckpointCorruptionWarning, match=r"ckpt-99.*symbolic link"):
        fresh = Checkpointer(directory, max_to_keep=1)
    await fresh.save(2, {})
    assert source.exists() and (directory / "ckpt-99").is_symlink()


async def test_a_foreign_index_file_is_never_overwritten(tmp_path: Path) -> None:
    """An ``index.json`` that is not a checkpoint index is a ValueError naming it when a
    Checkpointer is made (saving would overwrite it); readers ignore it."""
    checkpointer = Checkpointer(tmp_path)
    await checkpointer.save(1, {})
    user = json.dumps({"format": "my-tool", "checkpoints": [{"name": "ckpt-1", "preserved": True}]})
    (tmp_path / "index.json").write_text(user)
    with pytest.raises(ValueError, match=r"index\.json.* is not the checkpoint index of basename 'ckpt'"):
        Checkpointer(tmp_path)
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-1")
    assert (tmp_path / "index.json").read_text() == user


async def test_a_symlinked_index_is_refused_and_never_read(tmp_path: Path) -> None:
    """An index that is a symbolic link is not followed by readers, and a Checkpointer
    refuses it rather than replace it."""
    elsewhere = tmp_path / "elsewhere"
    await Checkpointer(elsewhere).save(1, {})
    run = Checkpointer(tmp_path / "run")
    await run.save(1, {})
    (tmp_path / "run" / "index.json").unlink()
    os.symlink(elsewhere / "index.json", tmp_path / "run" / "index.json")
    assert latest_checkpoint(tmp_path / "run") == str(tmp_path / "run" / "ckpt-1")
    with pytest.raises(ValueError, match="not the checkpoint index of basename 'ckpt'"):
        Checkpointer(tmp_path / "run")
    assert (tmp_path / "run" / "index.json").is_symlink()


async def test_an_index_of_another_basename_is_refused(tmp_path: Path) -> None:
    """An index recording another basename (copied over this set's) is refused, not trusted."""
    await Checkpointer(tmp_path, basename="ema").save(1, {})
    shutil.copy(tmp_path / "ema.index.json", tmp_path / "index.json")
    with pytest.raises(ValueError, match="not the checkpoint index of basename 'ckpt'"):
        Checkpointer(tmp_path)


def test_only_this_sets_stale_temporary_files_are_removed(tmp_path: Path) -> None:
    """A Checkpointer removes the leftovers of its own dead writers only, not another set's."""
    mine = tmp_path / ".ckpt-3.tmp-999999999-abcd"
    index = tmp_path / ".index.json.tmp-999999999-abcd"
    theirs = tmp_path / ".ema-3.tmp-999999999-abcd"
    for path in (mine, index, theirs):
        path.write_bytes(b"partial")
    Checkpointer(tmp_path)
    assert not mine.exists() and not index.exists() and theirs.exists()
    Checkpointer(tmp_path, basename="ema")
    assert not theirs.exists()


def test_a_bad_basename_is_named(tmp_path: Path) -> None:
    """latest_checkpoint and WorkerSessionCreator refuse a basename that is not a file name."""
    with pytest.raises(ValueError, match="latest_checkpoint: basename must be a plain file name, got 'a/b'"):
        latest_checkpoint(tmp_path, basename="a/b")
    with pytest.raises(ValueError, match="WorkerSessionCreator: basename must be a plain file name, got ''"):
        WorkerSessionCreator(Model, checkpoint_dir=tmp_path, checkpoint_basename="")


class Model:
    """A checkpointable session holding who saved it."""

    def __init__(self) -> None:
        self.who = "fresh"

    async def run(self, fetches: object, feed_dict: object, options: object, run_metadata: object) -> list[object]:
        return []

    def state_dict(self) -> dict[str, str]:
        return {"who": self.who}

    def load_state_dict(self, state: dict[str, str]) -> None:
        self.who = state["who"]


async def two_sets(directory: Path) -> None:
    """``ckpt-5`` (the default set), then three later saves of the ``ema`` set."""
    await Checkpointer(directory).save(5, {"global_step": 5, "session": {"who": "ckpt"}})
    ema = Checkpointer(directory, basename="ema")
    for step in (6, 7, 8):
        await ema.save(step, {"global_step": step, "session": {"who": "ema"}})


async def test_restoring_creators_restore_the_default_basename(tmp_path: Path) -> None:
    """ChiefSessionCreator(factory, dir) and MonitoredTrainingSession(checkpoint_dir=dir)
    restore ``ckpt-<step>`` even when another set was saved later; a creator given a
    checkpointer restores that checkpointer's set."""
    await two_sets(tmp_path)
    counter = LocalStepCounter()
    session = await ChiefSessionCreator(Model, tmp_path, step_counter=counter).create_session()
    assert session.who == "ckpt" and await counter.get() == 5
    ema = Checkpointer(tmp_path, basename="ema")
    session = await ChiefSessionCreator(Model, checkpointer=ema, step_counter=counter).create_session()
    assert session.who == "ema" and await counter.get() == 8
    with anyio.fail_after(20):
        async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, save_checkpoint_secs=0) as training:
            assert training.session_creator.restored is not None  # type: ignore[union-attr]
            assert training.session_creator.restored.state["session"] == {"who": "ckpt"}  # type: ignore[union-attr]


async def test_a_worker_waits_for_its_own_basename(tmp_path: Path) -> None:
    """A worker waiting for the chief's first checkpoint is not woken by another set's file."""
    await Checkpointer(tmp_path, basename="ema").save(1, {})
    waiting = WorkerSessionCreator(Model, checkpoint_dir=tmp_path, max_wait_secs=0.2)
    with anyio.fail_after(20), pytest.raises(TimeoutError, match=r"no valid checkpoint ckpt-<step> in"):
        await waiting.create_session()
    ready = WorkerSessionCreator(Model, checkpoint_dir=tmp_path, checkpoint_basename="ema", max_wait_secs=5)
    with anyio.fail_after(20):
        await ready.create_session()
    checkpointer = Checkpointer(tmp_path, basename="ema")
    training = MonitoredTrainingSession(Model, is_chief=False, checkpointer=checkpointer, max_wait_secs=5)
    with anyio.fail_after(20):
        async with training:
            pass
