"""A saving run for the SIGKILL test: ``python -m tests.checkpoint.checkpoint_worker DIR BACKEND LAST_STEP``.

Each step processes the item at the source offset: it writes the item's output
to ``DIR/out/item-<n>`` (atomically, keyed by item, so writing it twice is
harmless), adds it to a running total and moves a 4 MiB NumPy state forward.
A checkpoint is saved after every step. The run prints ``resumed <step>``
once restored, ``ready`` once its first checkpoint is durable, and stops at
``LAST_STEP``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import anyio
import numpy as np

import hookrun
from hookrun.hooks import CheckpointSaverHook, StopAtStepHook

WEIGHTS = 1 << 19  # float64 values: 4 MiB


def output(item: int) -> bytes:
    return f"{item * item}\n".encode()


class Pipeline:
    """The session: its checkpointable state is the source offset, the total and the weights."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.offset = 0
        self.total = 0
        self.weights = np.zeros(WEIGHTS)

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        item = self.offset
        await anyio.to_thread.run_sync(self.write, item)
        self.total += item
        self.weights += 1.0
        self.offset += 1
        return [self.offset for _ in fetches]

    def write(self, item: int) -> None:
        final = os.path.join(self.out, f"item-{item}")
        with open(final + ".tmp", "wb") as file:
            file.write(output(item))
        os.replace(final + ".tmp", final)

    def state_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "total": self.total, "weights": self.weights}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.offset, self.total, self.weights = state["offset"], state["total"], state["weights"]


async def main(directory: str, last_step: int) -> None:
    out = os.path.join(directory, "out")
    os.makedirs(out, exist_ok=True)
    session = hookrun.MonitoredTrainingSession(
        lambda: Pipeline(out),
        checkpoint_dir=os.path.join(directory, "ckpt"),
        save_checkpoint_steps=1,
        log_step_count_steps=0,
        hooks=[StopAtStepHook(last_step=last_step)],
    )
    saver = next(hook for hook in session.hooks if isinstance(hook, CheckpointSaverHook))
    async with session:
        print("resumed", await session.step_counter.get(), flush=True)
        await saver.wait_saved()
        print("ready", flush=True)
        while not session.should_stop():
            await session.run()
    print("done", await session.step_counter.get(), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[3]), backend=sys.argv[2])
