"""A Dask scheduler and two workers started with the ``dask`` command line, jobs on
them, and one worker (its nanny and all) killed mid-run.

Run by ``test_cluster.py`` as ``python -m tests.dask._cluster_run`` inside a network
and PID namespace of its own (``tests.remote._netns``); prints one JSON line. The
scheduler listens on 127.0.0.1, worker A on 127.0.0.2, worker B on 127.0.0.3, all
started through the command line and stopped by their PIDs. For each backend
(asyncio, trio) and each kind of session (actor lanes, task lanes), worker B is
started, a monitored session with ``LANES`` lanes and a shared ``DaskStepCounter``
runs ``ITEMS`` items of ``WORK_S`` each, and worker B is SIGKILLed after ``KILL_AT``
items.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

PORT = 8790
LANES = 4
ITEMS = 60
KILL_AT = 20
WORK_S = 0.02


class Worker:
    """A session actor: each step takes ``WORK_S`` and answers the item and its worker."""

    def run(self, fetches: list[str], feed_dict: dict[str, Any]) -> list[Any]:
        from distributed import get_worker

        time.sleep(WORK_S)
        return [feed_dict["x"] if key == "x" else get_worker().address for key in fetches]


def work(feed_dict: dict[str, Any]) -> dict[str, Any]:
    """A task step: takes ``WORK_S``, answers the item and its worker."""
    from distributed import get_worker

    time.sleep(WORK_S)
    return {"x": feed_dict["x"], "worker": get_worker().address}


def dask_argv(*args: str) -> list[str]:
    return [os.path.join(os.path.dirname(sys.executable), "dask"), *args]


def worker_argv(host: str, name: str) -> list[str]:
    return dask_argv("worker", f"tcp://127.0.0.1:{PORT}", "--host", host, "--name", name,
                     "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--memory-limit", "0")


async def job(kind: str, backend: str, client: Any, kill: Callable[[], object], directory: str) -> dict[str, Any]:
    """One session's run: what came back, where, the final step, the checkpoints' steps."""
    import anyio

    import hookrun
    from hookrun.dask import DaskActorSessionCreator, DaskStepCounter, DaskStepSession
    from hookrun.hooks import CheckpointSaverHook

    checkpointer = hookrun.Checkpointer(directory, max_to_keep=None)
    counter = DaskStepCounter(client, f"step-{kind}-{backend}")
    creator: Any
    if kind == "actors":
        creator = DaskActorSessionCreator(Worker, client=client)
        fetches = ["x", "worker"]
    else:
        creator = functools.partial(DaskStepSession, work, client=client)
        fetches = ["x", "worker"]
    hooks = [CheckpointSaverHook(save_steps=10, checkpointer=checkpointer)]
    got: list[int] = []
    workers: list[str] = []
    started = time.monotonic()
    with anyio.fail_after(240):
        async with hookrun.MonitoredSession(creator, hooks, step_counter=counter, max_in_flight=LANES) as sess:
            async for x, worker in sess.iterate(fetches, ({"x": i} for i in range(ITEMS))):
                got.append(x)
                workers.append(worker)
                if len(got) == KILL_AT:
                    kill()
        if kind == "actors":
            await creator.aclose()
        final = await counter.get()
        await counter.delete()
    return {
        "items": got,
        "final_step": final,
        "checkpoint_steps": [info.step for info in checkpointer.all()],
        "created": getattr(creator, "created", None),
        "workers_before": sorted(set(workers[:KILL_AT])),
        "workers_after": sorted(set(workers[KILL_AT + LANES * 2 :])),
        "seconds": round(time.monotonic() - started, 2),
    }


def main() -> None:
    from tests.remote._netns import ROOT, Processes, loopback_up, others_alive, wait_for_port

    loopback_up()
    temp_dir = tempfile.mkdtemp(prefix="hkr-dc-", dir="/tmp")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    import anyio
    import distributed

    procs = Processes(temp_dir)
    result: dict[str, Any] = {"temp_dir": temp_dir}
    client = None
    try:
        procs.start(dask_argv("scheduler", "--host", "127.0.0.1", "--port", str(PORT), "--no-dashboard"), env, "scheduler.log")
        wait_for_port("127.0.0.1", PORT, 60)
        procs.start(worker_argv("127.0.0.2", "a"), env, "worker-a.log")
        client = distributed.Client(f"tcp://127.0.0.1:{PORT}", set_as_default=False, timeout=60)
        for backend in ("asyncio", "trio"):
            for kind in ("actors", "tasks"):
                worker_b = procs.start(worker_argv("127.0.0.3", "b"), env, f"worker-b-{kind}-{backend}.log")
                client.wait_for_workers(2, timeout=120)
                directory = os.path.join(temp_dir, f"ckpt-{kind}-{backend}")
                kill = functools.partial(procs.kill, worker_b)
                run = anyio.run(job, kind, backend, client, kill, directory, backend=backend)
                result[f"{kind}-{backend}"] = run
                _wait_workers(client, 1, within=60)
        result["workers"] = sorted(w["name"] for w in client.scheduler_info()["workers"].values())
    finally:
        if client is not None:
            client.close()
        procs.stop_all()
    deadline = time.monotonic() + 20
    while (left := others_alive()) and time.monotonic() < deadline:
        time.sleep(0.2)
    result["left"] = left
    print(json.dumps(result), flush=True)


def _wait_workers(client: Any, n: int, within: float) -> None:
    """Wait (bounded) until the scheduler knows exactly ``n`` workers (the killed one removed)."""
    deadline = time.monotonic() + within
    while len(client.scheduler_info()["workers"]) != n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the scheduler still lists {client.scheduler_info()['workers']}")
        time.sleep(0.1)


if __name__ == "__main__":
    main()
