"""The hooks of ``hookrun demo``, and where their summaries go.

``build_hooks`` assembles the built-in hooks the demo shows at once (progress,
step rate, logged metrics, scalar summaries, Chrome traces, checkpoints) and one
small hook of its own that reports each (re)created worker. ``open_summary_writer``
gives TensorBoard event files when tensorboardX is installed and a JSON-lines file
otherwise, so the demo runs on the bare install; ``open_checkpoint_saver`` makes
the checkpoint saver (its constructor reads the directory: call it in a thread).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .._coordinator._tasks import Coordinator
from .._hook_protocol import SessionRunHook
from ..hooks import (
    CheckpointSaverHook,
    LoggingTensorHook,
    ProfilerHook,
    ProgressBarHook,
    StepCounterHook,
    SummarySaverHook,
    SummaryWriter,
    TensorBoardWriter,
)

__all__ = ["JsonLinesWriter", "WorkerReport", "build_hooks", "have", "open_checkpoint_saver", "open_summary_writer"]


def have(module: str) -> bool:
    """Whether an optional dependency is installed (without importing it)."""
    return importlib.util.find_spec(module) is not None


class JsonLinesWriter:
    """A :class:`~hookrun.hooks.SummaryWriter` appending ``{"step", "tag", "value"}`` lines to a file.

    ``add_scalar`` only buffers (it runs on the event loop); ``flush`` and
    ``close`` write, and the hooks call them from a worker thread.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: list[dict[str, Any]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")

    def __repr__(self) -> str:
        return f"JsonLinesWriter({str(self.path)!r})"

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self._pending.append({"step": step, "tag": tag, "value": float(value)})

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            with self.path.open("a", encoding="utf-8") as file:
                file.writelines(json.dumps(record) + "\n" for record in pending)

    def close(self) -> None:
        self.flush()


def open_summary_writer(out_dir: Path) -> tuple[SummaryWriter, Path, str]:
    """The demo's summary writer, where it writes and what it writes (blocking: call in a thread)."""
    if have("tensorboardX"):
        board = out_dir / "tensorboard"
        return TensorBoardWriter(board, flush_secs=5), board, "TensorBoard event files"
    path = out_dir / "summaries.jsonl"
    return JsonLinesWriter(path), path, "JSON lines; pip install 'hookrun[tensorboard]' for TensorBoard files"


def open_checkpoint_saver(directory: Path) -> CheckpointSaverHook:
    """The demo's checkpoint saver: every 10 steps, at each session creation and at the end
    (blocking: it creates and reads ``directory``; call it in a thread)."""
    return CheckpointSaverHook(directory, save_steps=10)


class WorkerReport(SessionRunHook):
    """Says when a worker is ready: once at start, once more after every recovery."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.created = 0

    def after_create_session(self, session: Any, coord: Coordinator) -> None:
        self.created += 1
        again = "" if self.created == 1 else " (the session was re-created: every hook's after_create_session ran again)"
        self.say(f"{session} ready{again}")


def _metrics_line(values: dict[Any, Any]) -> str:
    return "loss = {loss:.4f}, w = {w:.3f}, b = {b:.3f}".format(**values)


def build_hooks(
    steps: int,
    writer: SummaryWriter,
    out_dir: Path,
    say: Callable[[str], None],
    *,
    saver: CheckpointSaverHook,
    progress_file: TextIO | None = None,
) -> tuple[list[object], WorkerReport, ProfilerHook]:
    """The demo's hooks; the report and profiler hooks are returned too, to read afterwards."""
    stream = progress_file if progress_file is not None else sys.stderr
    bar = have("tqdm") and stream.isatty()
    report = WorkerReport(say)
    profiler = ProfilerHook(save_steps=10, output_dir=out_dir / "traces")
    hooks: list[object] = [
        report,
        ProgressBarHook(
            steps, metrics={"loss": "loss"}, desc="demo", file=stream,
            mode="bar" if bar else "log", log_every_secs=0.5,
        ),
        StepCounterHook(every_n_steps=10, summary_writer=writer),
        LoggingTensorHook({"loss": "loss", "w": "w", "b": "b"}, every_n_iter=10, formatter=_metrics_line),
        SummarySaverHook(save_steps=5, summary_writer=writer, scalars={"loss": "loss", "w": "w", "b": "b"}),
        profiler,
        saver,
    ]
    return hooks, report, profiler
