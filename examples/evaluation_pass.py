"""An evaluation pass with hooks of its own, every few training steps, over the training
session's raw session.

The evaluation runs in a nested ``SingularMonitoredSession`` given
``hookrun.borrowed(train.raw_session())``: its hooks (an accuracy average here) run
around each evaluation step, its step counter is its own, and when the pass ends the
raw session stays open, so training goes on. The training session closes it at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

import hookrun
from hookrun.hooks import StopAtStepHook


class MeanAccuracy(hookrun.SessionRunHook):
    """Fetches each evaluation step's accuracy; keeps the pass's mean."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs("accuracy")

    def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        self.values.append(run_values.results)

    def mean(self) -> float:
        return sum(self.values) / len(self.values)


class Model:
    """A stand-in model: training lowers the loss; evaluation scores a batch."""

    def __init__(self) -> None:
        self.updates = 0

    async def step(self, feed_dict: Mapping[str, Any]) -> dict[str, float]:
        if feed_dict.get("mode") == "eval":
            return {"accuracy": min(1.0, 0.5 + 0.05 * self.updates + 0.01 * feed_dict["batch"])}
        self.updates += 1
        return {"loss": 1.0 / self.updates}


# --8<-- [start:evaluation]
async def train_with_evaluation(every: int = 2, last_step: int = 6) -> list[tuple[int, float]]:
    model = Model()

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(model.step)

    evaluations = []
    async with hookrun.MonitoredSession(create, [StopAtStepHook(last_step=last_step)]) as train:
        while not train.should_stop():
            await train.run("loss", {"mode": "train"})
            step = await train.global_step()
            if step % every == 0:
                accuracy = MeanAccuracy()
                lent = hookrun.borrowed(train.raw_session())  # the pass does not close it
                async with hookrun.SingularMonitoredSession(lent, [accuracy]) as evaluation:
                    feeds = [{"mode": "eval", "batch": batch} for batch in range(3)]
                    async for _ in evaluation.iterate(None, feeds):
                        pass
                evaluations.append((step, round(accuracy.mean(), 3)))
    return evaluations
# --8<-- [end:evaluation]


async def main() -> list[tuple[int, float]]:
    evaluations = await train_with_evaluation()
    for step, accuracy in evaluations:
        print(f"step {step}: accuracy {accuracy:.3f}")
    return evaluations


if __name__ == "__main__":
    anyio.run(main)
