"""Steps on Ray, the smallest complete program: a task per step, an actor per session,
and one engine future awaited directly.

``tasks()`` runs three steps, each one Ray task (``RayStepSession``). ``actors()`` runs
steps on an actor per session (``RayActorSessionCreator``) under a
``MonitoredTrainingSession`` that checkpoints the actor's state: run again on the same
directory, the new actor starts from the saved state. ``one_future()`` awaits a Ray
object reference with ``hookrun.remote.await_future``.

Run it with ``python -m examples.ray_steps`` (it starts a local Ray on 127.0.0.1; with
``--address`` it joins yours).
"""

# --8<-- [start:program]
from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping, Sequence

import anyio
import ray

import hookrun
from hookrun.hooks import StopAtStepHook
from hookrun.ray import RayActorSessionCreator, RayStepSession, init_local
from hookrun.remote import await_future


@ray.remote
def step(feed: Mapping[str, float]) -> dict[str, float]:
    """The remote step of a ``RayStepSession``: one task per step."""
    return {"loss": 1.0 / (1.0 + feed["x"]), "accuracy": min(1.0, feed["x"] / 10)}


class Model:
    """The actor of an actor session: ``run`` answers the fetches; its state is checkpointed."""

    def __init__(self) -> None:
        self.total = 0.0

    def run(self, fetches: Sequence[str], feed_dict: Mapping[str, float]) -> list[float]:
        self.total += feed_dict["x"]
        values = {"total": self.total}
        return [values[key] for key in fetches]

    def state_dict(self) -> dict[str, float]:
        return {"total": self.total}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        self.total = state["total"]


async def tasks(steps: int = 3) -> list[float]:
    """``steps`` steps, each one task."""

    async def create_session() -> RayStepSession:
        return RayStepSession(step)

    losses: list[float] = []
    async with hookrun.MonitoredSession(create_session, [StopAtStepHook(last_step=steps)]) as sess:
        while not sess.should_stop():
            losses.append(await sess.run("loss", {"x": float(len(losses))}))
    return losses


async def actors(checkpoint_dir: str, last_step: int) -> float:
    """Steps on an actor up to ``last_step``, restored from and saved to ``checkpoint_dir``."""
    async with RayActorSessionCreator(Model) as creator:
        sess = hookrun.MonitoredTrainingSession(
            creator.create_session,  # a new actor per session, restored from the latest checkpoint
            checkpoint_dir=checkpoint_dir,
            save_checkpoint_steps=100,
            log_step_count_steps=0,
            hooks=[StopAtStepHook(last_step=last_step)],
        )
        total = 0.0
        async with sess:
            while not sess.should_stop():
                total = await sess.run("total", {"x": 1.0})
    return total


@ray.remote
def square(x: int) -> int:
    return x * x


async def one_future() -> int:
    """A Ray object reference awaited on any event loop (``await ref`` works on asyncio only)."""
    ref = square.remote(32)
    value: int = await await_future(ref.future(), cancel=lambda: ray.cancel(ref))
    return value


async def main(address: str | None) -> None:
    if address is None:
        await anyio.to_thread.run_sync(lambda: init_local(num_cpus=2))  # 127.0.0.1 only
    else:
        await anyio.to_thread.run_sync(lambda: ray.init(address=address))
    try:
        print("losses:", await tasks())
        with tempfile.TemporaryDirectory() as checkpoints:
            print("actor total after 5 steps:", await actors(checkpoints, 5))
            print("a new actor, restored, after 8:", await actors(checkpoints, 8))
        print("32 squared:", await one_future())
    finally:
        ray.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Steps on Ray.")
    parser.add_argument("--address", help="a running Ray cluster to join")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    options = parser.parse_args()
    anyio.run(main, options.address, backend=options.backend)
# --8<-- [end:program]
