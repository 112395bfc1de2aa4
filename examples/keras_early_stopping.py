"""Keras' ``EarlyStopping(monitor, mode, patience, baseline, restore_best_weights=True)``
with hookrun's hooks.

A model whose validation loss is evaluated every ``EVERY`` steps improves for
three evaluations and then gets worse. ``EarlyStoppingHook`` with
``patience_steps=patience * EVERY`` stops at the evaluation where Keras stops;
``CheckpointSaverHook(restore_best=True)``, saving at every evaluation, hands
back the best state at the end, as ``restore_best_weights`` does.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

import anyio

import hookrun
from hookrun.hooks import CheckpointSaverHook, EarlyStoppingHook

EVERY = 4  # an evaluation every 4 steps
VAL_LOSSES = [0.9, 0.8, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75]


class Model:
    """A session with a state: its weight is the number of steps trained."""

    def __init__(self) -> None:
        self.weight = 0

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.weight += 1
        evaluated = self.weight % EVERY == 0
        val_loss = VAL_LOSSES[self.weight // EVERY - 1] if evaluated else None
        return [{"val_loss": val_loss}[key] for key in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"weight": self.weight}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weight = state["weight"]


async def main(checkpoint_dir: str) -> tuple[int | None, int]:
    """Train until early stopping; return (the step stop was requested at, the model's weight)."""
    model = Model()
    # --8<-- [start:keras]
    # keras.callbacks.EarlyStopping(monitor="val_loss", mode="min", patience=2,
    #                               baseline=0.5, restore_best_weights=True)
    patience = 2
    early_stopping = EarlyStoppingHook("val_loss", "min", patience_steps=patience * EVERY, baseline=0.5)
    saver = CheckpointSaverHook(
        checkpoint_dir, save_steps=EVERY, monitor="val_loss", mode="min", keep_best=1, restore_best=True
    )
    async with hookrun.MonitoredSession(lambda: model, [early_stopping, saver]) as session:
        while not session.should_stop():
            await session.run()
    print(f"stopped after step {early_stopping.stopped_at_step}, best val_loss {early_stopping.best} "
          f"at step {early_stopping.best_step}; the model is back at step {model.weight}")
    # --8<-- [end:keras]
    return early_stopping.stopped_at_step, model.weight


if __name__ == "__main__":
    backend = sys.argv[1] if len(sys.argv) > 1 else "asyncio"
    with tempfile.TemporaryDirectory() as directory:
        anyio.run(main, os.path.join(directory, "checkpoints"), backend=backend)
