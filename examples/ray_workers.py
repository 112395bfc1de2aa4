"""A chief and two workers, each its own process, on one local Ray cluster.

Every process runs a ``MonitoredSession`` whose session is a Ray actor
(``RayActorSessionCreator``) and whose global step is one ``RayStepCounter`` shared
by the whole job. The workers start gradually (``GlobalStepWaiterHook``: worker 1
waits for step 5, worker 2 for step 10), every process stops at the same
``StopAtStepHook`` step, and worker 1's actor is killed in the middle of its third
step (a stand-in for a lost machine): that worker re-creates its session and
carries on. Each process prints one JSON line: its steps, sessions and last step.

Run it with ``python -m examples.ray_workers`` (it starts a local Ray unless one is
running; pass ``--address`` to use a running cluster).
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
from hookrun.ray import RayActorSessionCreator, RayStepCounter

ROOT = Path(__file__).resolve().parents[1]
STEP_SECONDS = 0.02  # the remote work of one step


class Model:
    """The session actor of one process; ``lose_marker`` makes it die once, mid-step."""

    def __init__(self, role: str, lose_marker: str | None) -> None:
        self.role = role
        self.lose_marker = lose_marker
        self.calls = 0

    def run(self, fetches: Sequence[str], feeds: Mapping[str, Any]) -> list[Any]:
        self.calls += 1
        time.sleep(STEP_SECONDS)
        if self.lose_marker and self.calls == 3 and not os.path.exists(self.lose_marker):
            Path(self.lose_marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)  # the machine is gone, mid-step
        values = {"loss": 1.0 / self.calls, "who": f"{self.role}@{os.getpid()}"}
        return [values[key] for key in fetches]


class Report(hookrun.SessionRunHook):
    """Counts this process's sessions and steps, and remembers the last global step."""

    def __init__(self) -> None:
        self.sessions = 0
        self.steps = 0
        self.last_step = 0

    def after_create_session(self, session: object, coord: object) -> None:
        self.sessions += 1

    def after_run(self, ctx: hookrun.SessionRunContext, values: hookrun.SessionRunValues) -> None:
        self.steps += 1
        self.last_step = values.global_step


async def work(role: str, index: int, counter_name: str, last_step: int, lose_marker: str | None) -> dict[str, Any]:
    """One process of the job: the chief (index 0) or a worker."""
    report = Report()
    hooks: list[hookrun.SessionRunHook] = [report, StopAtStepHook(last_step=last_step)]
    if index > 0:
        hooks.insert(0, GlobalStepWaiterHook(wait_until_step=5 * index))
    retry = hookrun.RetryPolicy(initial_delay=0.05, max_attempts=5)
    async with (
        RayActorSessionCreator(Model, role, lose_marker) as creator,
        RayStepCounter(counter_name) as counter,
        hookrun.MonitoredSession(creator, hooks, step_counter=counter, retry=retry) as sess,
    ):
        while not sess.should_stop():
            await sess.run("loss")
    return {"role": role, "steps": report.steps, "sessions": report.sessions, "last_step": report.last_step}


async def main(last_step: int = 30, address: str | None = None) -> list[dict[str, Any]]:
    """Launch the chief and two workers against one Ray cluster; return their reports."""
    if address is None:
        if not ray.is_initialized():
            await anyio.to_thread.run_sync(lambda: ray.init(include_dashboard=False, _node_ip_address="127.0.0.1"))
        address = ray.get_runtime_context().gcs_address
    counter = RayStepCounter(f"example-step-{uuid.uuid4().hex[:8]}", initial=0)
    reports: list[dict[str, Any]] = []
    try:
        await counter.get()  # the launcher creates the job's counter; every process joins it
        with tempfile.TemporaryDirectory() as scratch:
            marker = str(Path(scratch) / "worker-1-lost")
            async with anyio.create_task_group() as tg:
                for index, role in enumerate(("chief", "worker-1", "worker-2")):
                    backend = ("asyncio", "trio")[index % 2]
                    args = [sys.executable, "-m", "examples.ray_workers", "--role", role, "--index", str(index),
                            "--address", address, "--counter", counter.name, "--last-step", str(last_step),
                            "--backend", backend, "--lose-marker", marker if index == 1 else ""]
                    tg.start_soon(_launch, args, reports)
    finally:
        with anyio.CancelScope(shield=True):
            await counter.delete()
            await counter.aclose()
    return sorted(reports, key=lambda report: str(report["role"]))


async def _launch(args: list[str], reports: list[dict[str, Any]]) -> None:
    done = await anyio.run_process(args, cwd=ROOT, check=False, env={**os.environ})
    if done.returncode != 0:
        raise RuntimeError(f"{args[4]} failed ({done.returncode}):\n{done.stderr.decode()[-3000:]}")
    reports.append(json.loads(done.stdout.decode().splitlines()[-1]))


def _process(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role")
    parser.add_argument("--index", type=int, default=0)
    parser.add_argument("--address")
    parser.add_argument("--counter")
    parser.add_argument("--last-step", type=int, default=30)
    parser.add_argument("--backend", default="asyncio")
    parser.add_argument("--lose-marker", default="")
    options = parser.parse_args(argv)
    if options.role is None:  # the launcher
        print(json.dumps(anyio.run(main, options.last_step, options.address), indent=1))
        return
    ray.init(address=options.address, log_to_driver=False, configure_logging=False)
    try:
        result = anyio.run(
            work, options.role, options.index, options.counter, options.last_step,
            options.lose_marker or None, backend=options.backend,
        )
    finally:
        ray.shutdown()
    print(json.dumps(result))


if __name__ == "__main__":
    _process(sys.argv[1:])
