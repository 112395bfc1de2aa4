"""An async pipeline watched by ten built-in hooks at once.

Each step pulls a (simulated) batch from a remote worker, "trains" on it and
returns a loss and an accuracy. The hooks stop it after ``steps`` steps (or
earlier if the loss stops improving), measure steps/sec, write TensorBoard
scalars, log, guard against NaN, profile a step into a Chrome trace, show
progress and read a final counter::

    python examples/hooks_pipeline.py OUT_DIR [--steps 40] [--backend trio]

then ``tensorboard --logdir OUT_DIR/tensorboard`` and open
``OUT_DIR/traces/timeline-*.json`` in https://ui.perfetto.dev.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

import hookrun
from hookrun.hooks import (
    EarlyStoppingHook,
    FinalOpsHook,
    LoggingTensorHook,
    NanTensorHook,
    ProfilerHook,
    ProgressBarHook,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
    on_after_run,
)


@dataclass(frozen=True)
class PipelineReport:
    """What one run of the pipeline produced."""

    steps: int
    processed: int
    tensorboard_dir: Path
    traces: list[Path]


class Trainer:
    """The work of one step: a remote batch and a training update (both simulated)."""

    def __init__(self) -> None:
        self.processed = 0

    async def step(self, feed_dict: Mapping[Hashable, Any]) -> dict[str, float | int]:
        await anyio.lowlevel.checkpoint()  # a remote call would await here
        if feed_dict.get("mode") == "read":  # FinalOpsHook reads state, consumes no batch
            return {"processed": self.processed}
        self.processed += 32
        n = self.processed // 32
        return {
            "loss": 1.0 / math.sqrt(n),
            "accuracy": 1.0 - 0.5 / n,
            "processed": self.processed,
        }


def build_hooks(out_dir: Path, steps: int) -> tuple[list[hookrun.SessionRunHook], FinalOpsHook]:
    """The hooks of the pipeline; the FinalOpsHook is returned too to read its value."""
    board = out_dir / "tensorboard"
    final = FinalOpsHook({"processed": "processed"}, final_ops_feed_dict={"mode": "read"})

    @on_after_run(every_n_steps=20, fetches={"accuracy": "accuracy"})
    def checkpoint_note(ctx: hookrun.SessionRunContext, values: hookrun.SessionRunValues) -> None:
        logging.getLogger("hookrun.example").info(
            "step %d: accuracy %.3f", values.global_step, values.results["accuracy"]
        )

    # --8<-- [start:hooks]
    hooks: list[hookrun.SessionRunHook] = [
        StopAtStepHook(num_steps=steps),
        StepCounterHook(every_n_steps=10, output_dir=board),
        SummarySaverHook(save_steps=5, output_dir=board, scalars=["loss", "accuracy"]),
        LoggingTensorHook({"loss": "loss"}, every_n_iter=10),
        NanTensorHook("loss"),
        ProfilerHook(save_steps=10, output_dir=out_dir / "traces"),
        EarlyStoppingHook("loss", "min", patience_steps=20, min_delta=0.0),
        ProgressBarHook(steps, metrics=["loss"], mode="log", log_every_secs=5.0),
        final,
        checkpoint_note,
    ]
    # --8<-- [end:hooks]
    return hooks, final


async def run_pipeline(out_dir: Path, *, steps: int = 40) -> PipelineReport:
    """Run the pipeline, writing TensorBoard events and Chrome traces under ``out_dir``."""
    trainer = Trainer()

    async def create_session() -> hookrun.StepSession:
        return hookrun.StepSession(trainer.step)

    hooks, final = build_hooks(out_dir, steps)
    done = 0
    # --8<-- [start:loop]
    async with hookrun.MonitoredSession(create_session, hooks) as session:
        async for _ in session.iterate({"loss": "loss"}):  # no feeds: until a hook stops it
            done += 1
    # --8<-- [end:loop]
    traces = sorted((out_dir / "traces").glob("timeline-*.json"))
    return PipelineReport(
        done, final.final_ops_values["processed"], out_dir / "tensorboard", traces
    )


def main(argv: Sequence[str] | None = None) -> PipelineReport:
    """Command line: ``hooks_pipeline.py OUT_DIR [--steps N] [--backend asyncio|trio]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args(argv)

    async def go() -> PipelineReport:
        return await run_pipeline(args.out_dir, steps=args.steps)

    report: PipelineReport = anyio.run(go, backend=args.backend)
    print(f"{report.steps} steps, {report.processed} items; traces: {len(report.traces)}")
    return report


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
