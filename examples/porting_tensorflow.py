"""A TensorFlow 1.x hook and training loop, ported to hookrun.

The session is written in TensorFlow's style: fetching ``"train"`` runs one
update, any other key only reads the model. The hook shows the changes a port
needs: the global step comes from the step counter (and ``run_values`` holds
the step *after* the run), ``session.run`` inside a hook becomes
``await hookrun.fetch(...)``, ``end`` gets no step, and ``sequential`` keeps
TensorFlow's list order where it matters.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio

import hookrun
from hookrun.hooks import StopAtStepHook


class TrainingSession:
    """Fetching "train" runs one update of the model; other keys only read it."""

    def __init__(self) -> None:
        self.w = 0.0
        self.updates = 0

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: hookrun.RunOptions,
        run_metadata: hookrun.RunMetadata,
    ) -> list[Any]:
        await anyio.lowlevel.checkpoint()  # a remote call would wait here
        if "train" in fetches:
            self.w += 0.1 * (1.0 - self.w)
            self.updates += 1
        values: dict[Hashable, Any] = {"train": None, "loss": (1.0 - self.w) ** 2, "accuracy": self.w}
        return [values[key] for key in fetches]


class TrainingCreator:
    """TensorFlow's ``SessionCreator``: ``create_session`` is async here."""

    def __init__(self) -> None:
        self.sessions: list[TrainingSession] = []

    async def create_session(self) -> TrainingSession:
        self.sessions.append(TrainingSession())
        return self.sessions[-1]


# --8<-- [start:ported]
class LossLogger(hookrun.SessionRunHook):
    """Logs the loss every ``every_n`` steps, with the accuracy read from the session."""

    def __init__(self, every_n: int, lines: list[str]) -> None:
        self.every_n = every_n
        self.lines = lines
        self.last_step = 0

    async def after_create_session(self, session: Any, coord: hookrun.Coordinator) -> None:
        self.last_step = await coord.step_counter.get()  # TF: session.run(global_step)

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs({"loss": "loss"})  # TF: {"loss": loss, "step": global_step}

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        step = run_values.global_step  # the step AFTER this run; TF's fetched step was the one before
        self.last_step = step
        if step % self.every_n == 0:
            # TF: run_context.session.run(accuracy). On a StepSession this would run a whole step.
            accuracy = await hookrun.fetch(run_context.session, "accuracy")
            self.lines.append(f"step {step}: loss {run_values.results['loss']:.4f}, accuracy {accuracy:.3f}")

    def end(self, session: Any) -> None:
        self.lines.append(f"done at step {self.last_step}")  # end(session) gets no step: keep it
# --8<-- [end:ported]


# --8<-- [start:loop]
async def main(steps: int = 30) -> tuple[list[str], int]:
    lines: list[str] = []
    creator = TrainingCreator()
    # TF ran hooks in list order; hookrun runs a phase's hooks concurrently, so keep the
    # order explicitly where one hook depends on another having run.
    hooks = [hookrun.sequential(LossLogger(10, lines), StopAtStepHook(num_steps=steps))]
    async with hookrun.MonitoredSession(creator, hooks) as session:  # TF: MonitoredTrainingSession
        while not session.should_stop():
            await session.run("train")  # TF: session.run(train_op)
    return lines, creator.sessions[0].updates
# --8<-- [end:loop]


if __name__ == "__main__":
    print(anyio.run(main))
