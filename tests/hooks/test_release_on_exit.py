"""The built-in hooks that hold files, bars or sessions release them when the monitored
session exits with an error or is cancelled (``on_exception``), not only at ``end``."""

from __future__ import annotations

import gc
import io
import os
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from hookrun import Checkpointer, MonitoredSession, MonitoredTrainingSession, StepSession
from hookrun.hooks import (
    CheckpointSaverHook,
    ProfilerHook,
    ProgressBarHook,
    StepCounterHook,
    SummarySaverHook,
    read_eval_metrics,
)
from hookrun.testing import ScriptedCreator

from ._support import ListWriter

pytestmark = pytest.mark.anyio

LIMIT = 20.0
EXITS = ["error", "cancellation"]


class Boom(Exception):
    """The error the tests raise."""


def open_under(directory: Path) -> list[str]:
    """The files under ``directory`` this process holds open."""
    root = os.path.realpath(directory)
    return [f.path for f in psutil.Process().open_files() if os.path.realpath(f.path).startswith(root)]


async def run_then_exit(how: str, hooks: Sequence[object], steps: int) -> None:
    """Run ``steps`` steps with ``hooks``, then leave with an error or by a cancellation."""
    with anyio.fail_after(LIMIT), anyio.CancelScope() as outer:
        try:
            async with MonitoredSession(ScriptedCreator({"loss": 0.5, "acc": 0.25}), hooks) as sess:
                for _ in range(steps):
                    await sess.run(["loss", "acc"])
                if how == "error":
                    raise Boom("in the block")
                outer.cancel()
                await anyio.sleep_forever()
        except Boom:
            assert how == "error"
    assert outer.cancelled_caught == (how == "cancellation")


class Probe:
    """A hook that notes what is open under ``directory`` after each step."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.seen: list[list[str]] = []

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.seen.append(open_under(self.directory))


@pytest.mark.parametrize("how", EXITS)
async def test_summary_saver_closes_its_event_file(tmp_path: Path, how: str) -> None:
    """SummarySaverHook(output_dir=...): the event file is closed, and holds the scalars."""
    probe = Probe(tmp_path)
    hook = SummarySaverHook(save_steps=1, output_dir=tmp_path, scalars=["loss"])
    await run_then_exit(how, [hook, probe], 3)
    assert probe.seen[-1], "the event file was open while the session ran"
    assert open_under(tmp_path) == []
    assert sorted(read_eval_metrics(tmp_path)) == [1, 2, 3]


@pytest.mark.parametrize("how", EXITS)
async def test_step_counter_closes_its_event_file(tmp_path: Path, how: str) -> None:
    """StepCounterHook(output_dir=...): the event file is closed."""
    probe = Probe(tmp_path)
    await run_then_exit(how, [StepCounterHook(every_n_steps=1, output_dir=tmp_path), probe], 3)
    assert probe.seen[-1], "the event file was open while the session ran"
    assert open_under(tmp_path) == []


@pytest.mark.parametrize("how", EXITS)
async def test_a_given_writer_is_flushed_not_closed(how: str) -> None:
    """A writer the user gave is flushed on the way out, and left open (it is the user's)."""
    writer = ListWriter()
    await run_then_exit(how, [SummarySaverHook(save_steps=1, summary_writer=writer, scalars=["loss"])], 2)
    assert writer.flushes == 1 and not writer.closed


@pytest.mark.parametrize("how", EXITS)
async def test_profiler_writes_the_last_traced_step(tmp_path: Path, how: str) -> None:
    """ProfilerHook: the traced step waiting to be written is written whole, nothing half-written."""
    hook = ProfilerHook(save_steps=2, output_dir=tmp_path)
    await run_then_exit(how, [hook], 2)  # step 2 is traced, to be written at the next before_run
    assert [path.name for path in hook.saved_files] == ["timeline-2.json"]
    assert sorted(os.listdir(tmp_path)) == ["timeline-2.json"]


@pytest.mark.parametrize("how", EXITS)
async def test_progress_bar_is_closed(how: str) -> None:
    """ProgressBarHook(mode="bar"): the bar is closed where it stopped."""
    tqdm = pytest.importorskip("tqdm").tqdm
    out = io.StringIO()
    hook = ProgressBarHook(total=10, mode="bar", file=out)
    bars: list[Any] = []

    class Grab:
        def after_run(self, run_context: Any, run_values: Any) -> None:
            bars[:] = list(tqdm._instances)

    await run_then_exit(how, [hook, Grab()], 3)
    assert len(bars) == 1
    assert bars[0] not in tqdm._instances  # closed: tqdm forgets a bar when it closes
    assert out.getvalue().endswith("\n")


@pytest.mark.parametrize("how", EXITS)
async def test_checkpoint_saver_lets_go_of_the_failed_session(tmp_path: Path, how: str) -> None:
    """CheckpointSaverHook: no half-written file, and the failed session's coordinator is
    no longer held by the hook."""
    hook = CheckpointSaverHook(tmp_path, save_steps=1)
    coordinators: list[weakref.ref[Any]] = []

    class Grab:
        def after_create_session(self, session: Any, coord: Any) -> None:
            coordinators.append(weakref.ref(coord))

    await run_then_exit(how, [hook, Grab()], 3)
    gc.collect()
    assert coordinators and coordinators[0]() is None
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".tmp-")]
    latest = await Checkpointer(tmp_path).latest()
    assert latest is not None and latest.step >= 2


@pytest.mark.parametrize("how", EXITS)
async def test_monitored_training_session_closes_its_summary_files(tmp_path: Path, how: str) -> None:
    """MonitoredTrainingSession's own summary hooks close their event files on every exit."""
    seen: list[list[str]] = []
    with anyio.fail_after(LIMIT), anyio.CancelScope() as outer:
        try:
            async with MonitoredTrainingSession(
                lambda: StepSession(lambda feeds: {"loss": 0.5}),
                checkpoint_dir=tmp_path,
                save_summaries_steps=1,
                log_step_count_steps=1,
                summary_scalars=["loss"],
            ) as sess:
                for _ in range(3):
                    await sess.run("loss")
                seen.append(open_under(tmp_path))
                if how == "error":
                    raise Boom("in the block")
                outer.cancel()
                await anyio.sleep_forever()
        except Boom:
            assert how == "error"
    assert seen[0], "the event files were open while the session ran"
    assert open_under(tmp_path) == []
