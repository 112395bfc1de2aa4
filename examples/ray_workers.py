"""A chief and two workers, each its own process, on one local Ray cluster.

Every process runs a ``MonitoredTrainingSession`` whose session is a Ray actor
(``RayActorSessionCreator``) and whose global step is one ``RayStepCounter`` shared
by the whole job. The chief checkpoints: the shared step and its actor's state
(the model has ``state_dict`` / ``load_state_dict``) when its session is created,
every 5 steps and at the end; a chief started again with the same checkpoint
directory resumes from its latest checkpoint. The workers start once the chief
has made its first step (so after it restored the step), and gradually
(``GlobalStepWaiterHook``: worker 1 waits for step 5, worker 2 for step 10); every
process stops at the same ``StopAtStepHook`` step, and worker 1's actor is killed
in the middle of its first step (a stand-in for a lost machine): that worker
re-creates its session and carries on. Each process prints one JSON line: its steps, sessions, first and last
step, and its model's update count.

With ``--in-flight N`` each process keeps N steps in flight (``max_in_flight``): N
lanes, each with its own actor, so N remote steps of one process run at once. A
lost actor is re-created on its own lane (worker 1 then has N + 1 sessions); the
chief's checkpoints hold the state of the actor that ran the checkpointed step,
and every lane's new actor is restored from it.

Run it with ``python -m examples.ray_workers`` (it starts a local Ray listening on
127.0.0.1 only unless one is running; pass ``--address`` to use a running cluster,
``--checkpoint-dir`` to keep the checkpoints, ``--workers 0`` for the chief alone).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import ray

import hookrun
from hookrun.hooks import GlobalStepWaiterHook, StopAtStepHook
from hookrun.ray import LOOPBACK_ENV, RayActorSessionCreator, RayStepCounter, init_local

ROOT = Path(__file__).resolve().parents[1]
STEP_SECONDS = 0.02  # the remote work of one step


class Model:
    """The session actor of one process; ``lose_marker`` makes it die once, mid-step.

    Its state (``weight`` and ``updates``) is checkpointable: the chief's
    checkpoints hold it, and the chief's new actors are restored from them.
    """

    def __init__(self, role: str, lose_marker: str | None) -> None:
        self.role = role
        self.lose_marker = lose_marker
        self.calls = 0  # calls on this actor (not state)
        self.weight = 1.0
        self.updates = 0

    def run(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        self.calls += 1
        time.sleep(STEP_SECONDS)
        if self.lose_marker and self.calls == 1 and _first(self.lose_marker):
            os.kill(os.getpid(), signal.SIGKILL)  # the machine is gone, mid-step
        self.weight *= 0.9
        self.updates += 1
        values = {"loss": self.weight, "updates": self.updates, "who": f"{self.role}@{os.getpid()}"}
        return [values[key] for key in fetches]

    def state_dict(self) -> dict[str, Any]:
        return {"weight": self.weight, "updates": self.updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weight, self.updates = float(state["weight"]), int(state["updates"])


def _first(marker: str) -> bool:
    """True for the one actor that creates ``marker`` (atomically: with steps in flight,
    several first calls may get here at once)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class Report(hookrun.SessionRunHook):
    """Counts this process's sessions and steps, and remembers its first and last global
    step and its model's last update count (of the actor that ran the last step)."""

    overlapping_steps = True  # it keeps nothing from a step's before_run to its after_run

    def __init__(self) -> None:
        self.sessions = 0
        self.steps = 0
        self.first_step: int | None = None
        self.last_step = 0
        self.updates = 0

    def after_create_session(self, session: object, coord: object) -> None:
        self.sessions += 1

    def before_run(self, ctx: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs("updates")

    def after_run(self, ctx: hookrun.SessionRunContext, values: hookrun.SessionRunValues) -> None:
        self.steps += 1
        self.first_step = values.global_step if self.first_step is None else self.first_step
        self.last_step = values.global_step
        self.updates = values.results


# --8<-- [start:work]
async def work(
    role: str, index: int, counter_name: str, last_step: int, checkpoint_dir: str, lose_marker: str | None,
    in_flight: int = 1,
) -> dict[str, Any]:
    """One process of the job: the chief (index 0), which checkpoints, or a worker."""
    report = Report()
    hooks: list[hookrun.SessionRunHook] = [report, StopAtStepHook(last_step=last_step)]
    if index > 0:
        hooks.insert(0, GlobalStepWaiterHook(wait_until_step=5 * index))
    retry = hookrun.RetryPolicy(initial_delay=0.05, max_attempts=5)
    async with (
        RayActorSessionCreator(Model, role, lose_marker) as creator,
        RayStepCounter(counter_name) as counter,
        hookrun.MonitoredTrainingSession(
            creator.create_session,  # one actor per session (per lane), restored by the chief
            is_chief=index == 0,
            checkpoint_dir=checkpoint_dir,  # the chief saves and restores here
            save_checkpoint_steps=5,
            # Workers start once the chief made a step, i.e. restored the shared step
            # (no polling: the call parks in the counter's actor):
            ready=lambda: counter.wait_for(1),
            log_step_count_steps=0,
            hooks=hooks,
            step_counter=counter,
            retry=retry,
            max_in_flight=in_flight,  # lanes: steps of this process in flight at once
        ) as sess,
    ):
        async for _ in sess.iterate("loss"):  # up to in_flight steps at a time, until a stop
            pass
    return {
        "role": role, "steps": report.steps, "sessions": report.sessions,
        "first_step": report.first_step, "last_step": report.last_step, "updates": report.updates,
    }
# --8<-- [end:work]


async def main(
    last_step: int = 30, address: str | None = None, checkpoint_dir: str | None = None, workers: int = 2,
    in_flight: int = 1,
) -> list[dict[str, Any]]:
    """Launch the chief and ``workers`` workers against one Ray cluster, each with
    ``in_flight`` steps in flight; return their reports.

    The chief checkpoints into ``checkpoint_dir`` (a temporary directory unless given)
    and resumes from the latest checkpoint there.
    """
    if checkpoint_dir is None:
        with tempfile.TemporaryDirectory() as scratch:
            return await main(last_step, address, scratch, workers, in_flight)
    if address is None:
        if not ray.is_initialized():
            await anyio.to_thread.run_sync(init_local)
        address = ray.get_runtime_context().gcs_address
    counter = RayStepCounter(f"example-step-{uuid.uuid4().hex[:8]}", initial=0)
    reports: list[dict[str, Any]] = []
    try:
        await counter.get()  # the launcher creates the job's counter; every process joins it
        with tempfile.TemporaryDirectory() as scratch:
            marker = str(Path(scratch) / "worker-1-lost")
            async with anyio.create_task_group() as tg:
                for index in range(workers + 1):
                    role = f"worker-{index}" if index else "chief"
                    backend = ("asyncio", "trio")[index % 2]
                    args = [sys.executable, "-m", "examples.ray_workers", "--role", role, "--index", str(index),
                            "--address", address, "--counter", counter.name, "--last-step", str(last_step),
                            "--checkpoint-dir", checkpoint_dir, "--backend", backend, "--in-flight", str(in_flight),
                            "--lose-marker", marker if index == 1 else ""]
                    tg.start_soon(_launch, args, address, reports)
    finally:
        with anyio.CancelScope(shield=True):
            await counter.delete()
            await counter.aclose()
    return sorted(reports, key=lambda report: str(report["role"]))


async def _launch(args: list[str], address: str, reports: list[dict[str, Any]]) -> None:
    # A loopback-only Ray (as started here) is joined with Ray's single-machine setting.
    env = {**os.environ, **(LOOPBACK_ENV if address.startswith("127.0.0.1:") else {})}
    done = await anyio.run_process(args, cwd=ROOT, check=False, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{args[4]} failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    reports.append(json.loads(done.stdout.decode().splitlines()[-1]))


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _process(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--address")
    parser.add_argument("--counter")
    parser.add_argument("--last-step", type=int, default=30)
    parser.add_argument("--checkpoint-dir")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", default="asyncio")
    parser.add_argument("--in-flight", type=_positive, default=1, help="steps in flight in each process (lanes)")
    parser.add_argument("--lose-marker", default="")
    options = parser.parse_args(argv)
    if options.role is None:  # the launcher
        reports = anyio.run(
            main, options.last_step, options.address, options.checkpoint_dir, options.workers, options.in_flight
        )
        print(json.dumps(reports, indent=1))
        return
    ray.init(address=options.address, log_to_driver=False, configure_logging=False)
    try:
        result = anyio.run(
            work, options.role, options.index, options.counter, options.last_step,
            options.checkpoint_dir, options.lose_marker or None, options.in_flight, backend=options.backend,
        )
    finally:
        ray.shutdown()
    print(json.dumps(result))


if __name__ == "__main__":
    _process(sys.argv[1:])
