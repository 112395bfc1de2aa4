"""Checkpoints wired by hand, as in TensorFlow, and the ``Checkpointer``'s own API.

``wired(directory, last_step)`` runs a session up to ``last_step`` under a
``StopAtStepHook`` and a ``CheckpointSaverHook`` saving every 100 steps, with a
``ChiefSessionCreator`` restoring from the same directory: run again with a later
``last_step``, it resumes where the first run stopped. ``by_hand(directory)`` saves,
finds and restores a state with a ``Checkpointer``, and shows two checkpointers of
different basenames sharing a directory.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

import hookrun
from hookrun.hooks import CheckpointSaverHook, StopAtStepHook


async def step(feed: dict[str, Any]) -> dict[str, float]:
    """The step of the wired session: it reports a constant loss."""
    await anyio.lowlevel.checkpoint()
    return {"loss": 0.5}


async def wired(directory: Path, last_step: int = 300) -> int:
    """Run up to ``last_step`` from the latest checkpoint in ``directory``; return the
    global step of the latest checkpoint afterwards."""

    async def make_session() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    # --8<-- [start:wiring]
    stop = StopAtStepHook(last_step=last_step)
    saver = CheckpointSaverHook(directory, save_steps=100)
    creator = hookrun.ChiefSessionCreator(make_session, directory)
    async with hookrun.MonitoredSession(creator, [stop, saver]) as session:
        while not session.should_stop():
            await session.run("loss")
    # --8<-- [end:wiring]
    latest = await hookrun.Checkpointer(directory).latest()
    assert latest is not None
    return latest.step


async def by_hand(directory: Path) -> dict[str, Any]:
    """Save a state with a ``Checkpointer``, find it and read it back."""
    step, state = 7, {"weights": [0.5, 0.25], "epoch": 2}
    # --8<-- [start:checkpointer]
    checkpointer = hookrun.Checkpointer(directory, max_to_keep=5, keep_checkpoint_every_n_hours=None, codec=None, write_nice=10)
    info = await checkpointer.save(step, state, metric=None)   # durable when it returns
    restored = await checkpointer.restore()                    # the latest valid one, or None
    restored = await checkpointer.restore(info.path)           # that file (an error if corrupt)
    latest = await checkpointer.latest()                       # CheckpointInfo or None
    every = checkpointer.all()                                 # from the index, oldest first
    best = checkpointer.best()                                 # the best by metric, or None
    # --8<-- [end:checkpointer]
    # --8<-- [start:basenames]
    model = hookrun.Checkpointer(directory)                   # ckpt-<step>, index.json
    ema = hookrun.Checkpointer(directory, basename="ema")     # ema-<step>, ema.index.json
    # --8<-- [end:basenames]
    await ema.save(step, {"weights": [0.4, 0.2]})
    assert restored is not None and latest is not None
    return {
        "state": restored.state, "latest": latest.step, "every": [i.step for i in every], "best": best,
        "model": (await model.latest()), "ema": (await ema.latest()),
    }


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        print("first run: checkpoint of step", await wired(Path(scratch) / "wired", 300))
        print("second run: checkpoint of step", await wired(Path(scratch) / "wired", 500))
        print("by hand:", (await by_hand(Path(scratch) / "by-hand"))["state"])


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
