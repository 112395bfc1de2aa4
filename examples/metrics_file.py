"""A training loop that writes its loss to a CSV file beside its checkpoints: it crashes
part-way, runs again, resumes from its last checkpoint, and the file holds every step once.

``MonitoredTrainingSession`` saves a checkpoint every 5 steps and restores the latest when
it starts. ``MetricsFileHook`` appends a row per step to ``metrics.csv``; a run that
resumes at step 10 drops the rows the crashed run wrote after step 10 (it writes those
steps again), so no step is in the file twice.

    python -m examples.metrics_file /tmp/run --steps 20 --crash-at 13   # fails at step 13
    python -m examples.metrics_file /tmp/run --steps 20                 # resumes at step 10
"""

from __future__ import annotations

import argparse
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

import hookrun
from hookrun.hooks import MetricsFileHook, StopAtStepHook


class Crash(Exception):
    """Stands for the process dying."""


class Trainer:
    """A stand-in for a model: each run is one training step; its state is checkpointed."""

    def __init__(self, crash_at: int | None) -> None:
        self.steps = 0
        self.crash_at = crash_at

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Hashable, Any], options: Any, run_metadata: Any
    ) -> list[Any]:
        await anyio.lowlevel.checkpoint()
        self.steps += 1
        if self.steps == self.crash_at:
            raise Crash(f"crashed at step {self.steps}")
        values: dict[Hashable, float] = {"loss": round(1.0 / self.steps, 4), "lr": 0.1 if self.steps <= 10 else 0.01}
        return [values[key] for key in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"steps": self.steps}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.steps = state["steps"]


async def main(workdir: Path, steps: int = 20, crash_at: int | None = None) -> list[str]:
    """Train to global step ``steps``, resuming from ``workdir``; return the CSV's lines."""
    # --8<-- [start:hook]
    metrics = MetricsFileHook(workdir / "metrics.csv", {"loss": "loss", "lr": "lr"})
    session = hookrun.MonitoredTrainingSession(
        lambda: Trainer(crash_at),
        checkpoint_dir=workdir / "checkpoints",
        save_checkpoint_steps=5,
        save_summaries_steps=0,
        log_step_count_steps=0,
        hooks=[metrics, StopAtStepHook(last_step=steps)],
    )
    async with session:
        while not session.should_stop():
            await session.run("loss")
    # --8<-- [end:hook]
    return (workdir / "metrics.csv").read_text().splitlines()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--crash-at", type=int, default=None)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    try:
        lines = anyio.run(main, args.workdir, args.steps, args.crash_at, backend=args.backend)
    except Crash as exc:
        print(f"{exc}; run again without --crash-at to resume")
    else:
        print("\n".join(lines))
