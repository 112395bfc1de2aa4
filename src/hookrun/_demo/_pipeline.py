"""The pipeline behind ``hookrun demo``: remote-style workers, a lost one, a clean end.

Needs no service. The "workers" are in-process sessions that each take a batch
of points, compute the gradient of a linear model on it and update the model
(which lives with the driver, as on a parameter server); each step waits a
little, as a remote call would. The first worker is lost part-way (it raises
``UnavailableError`` before touching the model), so the monitored session
re-creates it and re-runs that step with the same batch. A checkpoint saver
writes the global step and the model (the session's ``state_dict``) every ten
steps, at each session creation and at the end. The input is an async
generator of feed dicts: when it is exhausted, ``iterate`` ends and the
session closes cleanly, every hook's ``end`` included.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.lowlevel

from .._checkpoint._index import CheckpointInfo
from .._errors import UnavailableError
from .._hook_protocol import RunMetadata, RunOptions
from .._observe._report import SessionStatistics, _duration
from .._session._monitored import MonitoredSession
from .._session._retry import RetryPolicy
from ._demo_hooks import build_hooks, open_checkpoint_saver, open_summary_writer

__all__ = ["DemoReport", "run_demo", "statistics_summary"]

#: The data follow y = TRUE_W * x + TRUE_B (plus noise); the demo fits w and b.
TRUE_W, TRUE_B = 3.0, 1.0
BATCH = 16


@dataclass
class Model:
    """The linear model the workers train: ``y = w * x + b``."""

    w: float = 0.0
    b: float = 0.0
    learning_rate: float = 0.2


@dataclass(frozen=True)
class DemoReport:
    """What one run of the demo did and wrote."""

    backend: str
    steps: int
    sessions: int
    model: Model
    out_dir: Path
    summaries: Path
    summary_format: str
    traces: list[Path] = field(default_factory=list)
    checkpoint_dir: Path | None = None
    #: The checkpoints kept at the end, oldest first.
    checkpoints: list[CheckpointInfo] = field(default_factory=list)
    #: The session's statistics at the end (``print`` it for the table).
    statistics: SessionStatistics | None = None

    @property
    def recoveries(self) -> int:
        """How many times the session was re-created."""
        return max(self.sessions - 1, 0)


class Worker:
    """One (simulated) remote worker: a session whose ``run`` is one training step."""

    def __init__(self, number: int, model: Model, *, fail_at: int | None, delay: float) -> None:
        self.number = number
        self.model = model
        self.fail_at = fail_at
        self.delay = delay
        self.calls = 0

    def __str__(self) -> str:
        return f"worker {self.number}"

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        self.calls += 1
        if self.delay:
            await anyio.sleep(self.delay)  # the round trip to a remote worker
        else:
            await anyio.lowlevel.checkpoint()
        if self.calls == self.fail_at:
            raise UnavailableError(f"{self} lost (simulated)")
        values: dict[Hashable, float] = self._train(feed_dict["batch"])
        return [values[key] for key in fetches]

    def state_dict(self) -> dict[str, float]:
        """What a checkpoint keeps of this session: the model's parameters."""
        return {"w": self.model.w, "b": self.model.b}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        self.model.w, self.model.b = state["w"], state["b"]

    def _train(self, batch: Sequence[tuple[float, float]]) -> dict[Hashable, float]:
        m = self.model
        errors = [(m.w * x + m.b) - y for x, y in batch]
        loss = sum(e * e for e in errors) / len(batch)
        m.w -= m.learning_rate * 2 * sum(e * x for e, (x, _) in zip(errors, batch, strict=True)) / len(batch)
        m.b -= m.learning_rate * 2 * sum(errors) / len(batch)
        return {"loss": loss, "w": m.w, "b": m.b, "rows": float(len(batch))}


async def batches(steps: int, seed: int = 0) -> AsyncIterator[dict[str, list[tuple[float, float]]]]:
    """The input: ``steps`` feed dicts of noisy points, read asynchronously."""
    rng = random.Random(seed)
    for _ in range(steps):
        await anyio.lowlevel.checkpoint()  # a real reader would wait for I/O here
        points = [(x, TRUE_W * x + TRUE_B + rng.gauss(0.0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(BATCH))]
        yield {"batch": points}


async def run_demo(
    steps: int,
    out_dir: Path,
    *,
    say: Callable[[str], None] = print,
    delay: float = 0.02,
    progress_file: TextIO | None = None,
) -> DemoReport:
    """Run the demo pipeline for ``steps`` batches, writing its outputs under ``out_dir``."""
    model = Model()
    created = 0
    fail_at = max(3, (steps + 1) // 2)

    async def create_worker() -> Worker:
        nonlocal created
        created += 1
        return Worker(created, model, fail_at=fail_at if created == 1 else None, delay=delay)

    writer, summaries, summary_format = await anyio.to_thread.run_sync(open_summary_writer, out_dir)
    try:
        saver = await anyio.to_thread.run_sync(open_checkpoint_saver, out_dir / "checkpoints")
        hooks, _, profiler = build_hooks(steps, writer, out_dir, say, saver=saver, progress_file=progress_file)
        retry = RetryPolicy(initial_delay=0.05, max_attempts=3)
        done = 0
        async with MonitoredSession(create_worker, hooks, retry=retry) as session:
            async for _ in session.iterate(["loss"], batches(steps)):
                done += 1
        statistics = session.statistics()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(writer.close)
    return DemoReport(
        backend=anyio_backend_name(),
        steps=done,
        sessions=created,
        model=model,
        out_dir=out_dir,
        summaries=summaries,
        summary_format=summary_format,
        traces=list(profiler.saved_files),
        checkpoint_dir=Path(saver.checkpointer.directory),
        checkpoints=saver.checkpointer.all(),
        statistics=statistics,
    )


def statistics_summary(stats: SessionStatistics, *, shown: int = 5) -> str:
    """The end of the demo's story: what the session did, then the step, the session run
    and the ``shown`` slowest hook calls (by mean time), and how to see every one."""
    recoveries = f"{stats.recoveries} recover{'ies' if stats.recoveries != 1 else 'y'}"
    if stats.recoveries:
        recoveries += (
            f" taking {_duration(stats.recovery_seconds)} in all, "
            f"{_duration(stats.retry_wait_seconds)} of it waiting to retry"
        )
    sessions = f"{stats.sessions_created} session{'s' if stats.sessions_created != 1 else ''} created"
    head = f"hookrun statistics: {stats.steps} steps ({stats.failed_steps} failed), {sessions}, {recoveries}"
    slowest = sorted(stats.hooks, key=lambda entry: entry.latency.mean or 0.0, reverse=True)[:shown]
    table = dataclasses.replace(stats, hooks=tuple(slowest)).format().splitlines()[1:]
    lines = [head, f"the step, the session run and the {len(slowest)} slowest hooks (a row per phase, by mean):"]
    lines += table
    rest = len(stats.hooks) - len(slowest)
    if rest:
        lines.append(f"{rest} more rows not shown: in a program, print(session.statistics()) prints every one")
    return "\n".join(lines)


def anyio_backend_name() -> str:
    """The running backend: ``"trio"`` inside a trio task, else ``"asyncio"``."""
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:
            pass
        else:
            return "trio"
    return "asyncio"
