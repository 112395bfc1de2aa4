"""Cluster benchmark, run on demand: hookrun's lanes against the engines' own pools on a
two-node cluster, and the time a lost node costs.

    python -m benchmarks.cluster [--engine ray|dask|both] [--lanes 8] [--work-ms 20]
                                 [--items 400] [--rounds 3] [--settle 1] [--no-kill]

Starts, in a network and PID namespace of its own (loopback only; needs root or user
namespaces), a Ray head and a second node with ``ray start`` (one logical CPU each;
actors take none and are spread with ``SPREAD``) and a Dask scheduler with two
workers of ``lanes / 2`` threads with ``dask scheduler`` / ``dask worker``. Then,
per engine, side by side in one process and alternating order round by round, the
items per second of ``--items`` items of ``--work-ms`` each with ``--lanes`` in flight,
timed after every contestant's actors are up and ``--settle`` seconds of rest (the
cluster finishes what the previous contestant left: killed actors, new workers), and
the driver's CPU time per item over the same span (every thread of the driver
process: what a contestant adds to a machine the cluster shares, steadier than the
items per second there):

* Ray: ``ray.util.ActorPool.map_unordered`` over N actors, and a ``MonitoredSession``
  (no hooks) over ``RayActorSessionCreator`` with ``max_in_flight=N`` iterating with
  ``ordered=False``, on asyncio and on trio; same actor class, same placement;
* Dask: ``distributed.as_completed`` keeping N plain tasks in flight, hookrun task
  lanes (``DaskStepSession``, on asyncio and on trio), hookrun actor lanes
  (``DaskActorSessionCreator`` over the same synchronous actor class, on asyncio and
  on trio), and N plain Dask actors with a coroutine method
  driven by N threads (Dask's own way to keep N actors busy).

Unless ``--no-kill``: a hookrun run per engine (asyncio) that loses the second node
(Ray) or worker (Dask), killed with its whole process tree, a third of the way in,
with Ray's default health checks: the time from the kill until every lane runs again
(the last lane re-created) and the longest wait for an item after the kill. Prints
one JSON object.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

from ._cluster_work import AsyncSleepWorker, SleepWorker, sleep_plain, sleep_task
from ._clusters import ROOT, Processes, cli, dask_worker, isolate, ray_node, wait_for_port

__all__ = ["main"]

RAY_PORT = 6391
DASK_PORT = 8791


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("ray", "dask", "both"), default="both")
    parser.add_argument("--lanes", type=int, default=8)
    parser.add_argument("--work-ms", type=float, default=20.0)
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=1.0, help="seconds of rest before each contestant is timed")
    parser.add_argument("--no-kill", action="store_true")
    args = parser.parse_args(argv)
    for name in ("lanes", "items", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.lanes < 2 or args.lanes % 2:
        parser.error(f"--lanes must be an even number >= 2 (half on each node), got {args.lanes}")
    if not args.settle >= 0:
        parser.error(f"--settle must be >= 0, got {args.settle}")
    if not args.work_ms > 0:
        parser.error(f"--work-ms must be > 0, got {args.work_ms}")
    return args


def feeds(args: argparse.Namespace, n: int | None = None) -> Iterator[dict[str, Any]]:
    return ({"x": i, "s": args.work_ms / 1000} for i in range(args.items if n is None else n))


class CpuMeter:
    """The driver's CPU time per item (every thread of this process: the engine's client
    threads too) over the timed part of the contestant timed last.

    On a machine whose cores the cluster shares, the items per second of a round
    swing with whatever else runs; the driver's own CPU per item is what a contestant
    adds to the machine's load, and varies far less.
    """

    def __init__(self) -> None:
        self.ms_per_item = float("nan")
        self._started = 0.0

    def start(self) -> None:
        self._started = time.process_time()

    def stop(self, items: int) -> None:
        self.ms_per_item = (time.process_time() - self._started) * 1000 / max(items, 1)


CPU = CpuMeter()


def rate(run: Callable[[], int], settle: float = 0.0) -> float:
    """Items per second of ``run()`` (which returns how many items it did), timed after
    ``settle`` seconds of rest (its CPU per item in ``CPU``)."""
    time.sleep(settle)
    started = time.perf_counter()
    CPU.start()
    done = run()
    CPU.stop(done)
    return done / (time.perf_counter() - started)


class Creations:
    """A hook timing every session creation (one per lane, then one per re-created lane)."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.at: list[float] = []

    def after_create_session(self, session: object, coord: object) -> None:
        self.at.append(time.monotonic())


async def hookrun_items(creator: Any, args: argparse.Namespace, *, kill: Callable[[], object] | None = None) -> dict[str, Any]:
    """Items per second of a monitored session's lanes (after a warm-up), or with ``kill``
    called a third of the way in, the recovery figures."""
    import anyio

    import hookrun

    creations = Creations()
    async with hookrun.MonitoredSession(creator, [creations], max_in_flight=args.lanes) as sess:
        async for _ in sess.iterate(["x"], feeds(args, 2 * args.lanes), ordered=False):
            pass  # every lane up, caches warm
        await anyio.sleep(args.settle)
        stamps: list[float] = []
        killed_at = None
        started = time.perf_counter()
        CPU.start()
        async for _ in sess.iterate(["x"], feeds(args), ordered=False):
            stamps.append(time.monotonic())
            if kill is not None and killed_at is None and len(stamps) == args.items // 3:
                kill()
                killed_at = time.monotonic()
        elapsed = time.perf_counter() - started
        CPU.stop(args.items)
    if killed_at is None:
        return {"items_per_s": args.items / elapsed}
    after = [t for t in stamps if t >= killed_at]
    gaps = [b - a for a, b in zip([killed_at, *after], after, strict=False)]
    return {
        "lanes_recreated": len(creations.at) - args.lanes,
        "kill_to_all_lanes_s": round(max(creations.at) - killed_at, 3) if creations.at[-1] > killed_at else None,
        "longest_wait_after_kill_s": round(max(gaps), 3),
        "lanes_recreated_at_s": [round(t - killed_at, 3) for t in creations.at if t > killed_at],
        "items_in_first_s_after_kill": sum(1 for t in after if t - killed_at <= 1.0),
        "items_per_s": round(args.items / elapsed, 1),
    }


# -- Ray ---------------------------------------------------------------------------------------


def ray_bench(args: argparse.Namespace, temp_dir: str, results: dict[str, Any]) -> None:
    import anyio
    import ray
    from ray.util import ActorPool

    from hookrun.ray import RayActorSessionCreator

    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    procs = Processes(temp_dir)
    try:
        ray_node(procs, env, "head", head=True, port=RAY_PORT, ip="127.0.0.1", cpus=1)
        wait_for_port("127.0.0.1", RAY_PORT, 120)
        node_b = ray_node(procs, env, "node-b", head=False, port=RAY_PORT, ip="127.0.0.2", cpus=1)
        ray.init(address=f"127.0.0.1:{RAY_PORT}", _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
        _wait(lambda: len([n for n in ray.nodes() if n["Alive"]]) == 2, "two Ray nodes")  # type: ignore[no-untyped-call]
        options = {"num_cpus": 0, "scheduling_strategy": "SPREAD"}
        remote = ray.remote(SleepWorker).options(**options)
        pool_actors: list[Any] = [remote.remote() for _ in range(args.lanes)]
        ray.get([a.__ray_ready__.remote() for a in pool_actors])

        def pool() -> int:
            actors = ActorPool(pool_actors)
            return sum(1 for _ in actors.map_unordered(lambda a, feed: a.run.remote(["x"], feed), list(feeds(args))))

        async def lanes() -> float:
            async with RayActorSessionCreator(SleepWorker, actor_options=options) as creator:
                figures = await hookrun_items(creator, args)
            return float(figures["items_per_s"])

        cases: dict[str, Callable[[], float]] = {
            "actor_pool": lambda: rate(pool, args.settle),
            "hookrun_asyncio": lambda: anyio.run(lanes, backend="asyncio"),
            "hookrun_trio": lambda: anyio.run(lanes, backend="trio"),
        }
        rate(pool)  # warm-up
        results["ray"] = summary(alternate(cases, args.rounds), "actor_pool", args)
        if not args.no_kill:

            async def lose_node() -> dict[str, Any]:
                async with RayActorSessionCreator(SleepWorker, actor_options=options) as creator:
                    return await hookrun_items(creator, args, kill=lambda: procs.kill(node_b))

            results["ray"]["node_lost"] = anyio.run(lose_node, backend="asyncio")
        ray.shutdown()
    finally:
        procs.stop_all()


# -- Dask --------------------------------------------------------------------------------------


def dask_bench(args: argparse.Namespace, temp_dir: str, results: dict[str, Any]) -> None:
    import anyio
    import distributed

    from hookrun.dask import DaskActorSessionCreator, DaskStepSession

    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    procs = Processes(temp_dir)
    threads = args.lanes // 2
    client = None
    try:
        procs.start([cli("dask"), "scheduler", "--host", "127.0.0.1", "--port", str(DASK_PORT), "--no-dashboard"],
                    env, "scheduler.log")
        wait_for_port("127.0.0.1", DASK_PORT, 60)
        dask_worker(procs, env, "a", port=DASK_PORT, ip="127.0.0.2", threads=threads)
        worker_b = dask_worker(procs, env, "b", port=DASK_PORT, ip="127.0.0.3", threads=threads)
        client = distributed.Client(f"tcp://127.0.0.1:{DASK_PORT}", set_as_default=False, timeout=60)  # type: ignore[no-untyped-call]
        client.wait_for_workers(2, timeout=120)
        s = args.work_ms / 1000
        native = [client.submit(AsyncSleepWorker, actor=True, pure=False) for _ in range(args.lanes)]
        with client.as_current():  # an actor proxy binds to the current client
            native_actors = [f.result() for f in native]

        def completed() -> int:
            items = iter(range(args.items))
            done = 0
            first = [client.submit(sleep_plain, next(items), s, pure=False) for _ in range(args.lanes)]
            with client.as_current():
                ac = distributed.as_completed(first)  # type: ignore[no-untyped-call]
                for future in ac:
                    future.result()
                    done += 1
                    nxt = next(items, None)
                    if nxt is not None:
                        ac.add(client.submit(sleep_plain, nxt, s, pure=False))  # type: ignore[no-untyped-call]
            return done

        def actors_native() -> int:
            items = iter(list(feeds(args)))
            lock = threading.Lock()

            def drive(actor: Any) -> int:
                n = 0
                while True:
                    with lock:
                        feed = next(items, None)
                    if feed is None:
                        return n
                    actor.run(["x"], feed).result()
                    n += 1

            with ThreadPoolExecutor(args.lanes) as pool:
                return sum(pool.map(drive, native_actors))

        async def task_lanes() -> float:
            figures = await hookrun_items(functools.partial(DaskStepSession, sleep_task, client=client), args)
            return float(figures["items_per_s"])

        async def actor_lanes() -> float:
            async with DaskActorSessionCreator(SleepWorker, client=client) as creator:
                figures = await hookrun_items(creator, args)
            return float(figures["items_per_s"])

        cases: dict[str, Callable[[], float]] = {
            "as_completed": lambda: rate(completed, args.settle),
            "actors_native": lambda: rate(actors_native, args.settle),
            "hookrun_tasks": lambda: anyio.run(task_lanes, backend="asyncio"),
            "hookrun_tasks_trio": lambda: anyio.run(task_lanes, backend="trio"),
            "hookrun_actors": lambda: anyio.run(actor_lanes, backend="asyncio"),
            "hookrun_actors_trio": lambda: anyio.run(actor_lanes, backend="trio"),
        }
        rate(completed)  # warm-up
        measured = alternate(cases, args.rounds)
        results["dask"] = summary(measured, "as_completed", args)
        figures = measured[0]
        results["dask"]["hookrun_actors_over_actors_native"] = round(
            statistics.median(figures["hookrun_actors"]) / statistics.median(figures["actors_native"]), 3
        )
        if not args.no_kill:

            async def lose_worker() -> dict[str, Any]:
                async with DaskActorSessionCreator(SleepWorker, client=client) as creator:
                    return await hookrun_items(creator, args, kill=lambda: procs.kill(worker_b))

            results["dask"]["worker_lost"] = anyio.run(lose_worker, backend="asyncio")
    finally:
        if client is not None:
            client.close()  # type: ignore[no-untyped-call]
        procs.stop_all()


# -- both --------------------------------------------------------------------------------------


def alternate(cases: dict[str, Callable[[], float]], rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every case once per round, the order reversed every other round: the items per
    second and the driver's CPU ms per item of each."""
    figures: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(rounds):
        for name in list(cases) if r % 2 == 0 else list(cases)[::-1]:
            figures[name].append(round(cases[name](), 1))
            cpu[name].append(round(CPU.ms_per_item, 3))
            print(f"round {r + 1} {name}: {figures[name][-1]} items/s, {cpu[name][-1]} ms CPU per item", file=sys.stderr)
    return figures, cpu


def summary(measured: tuple[dict[str, list[float]], dict[str, list[float]]], base: str, args: argparse.Namespace) -> dict[str, Any]:
    figures, cpu = measured
    ideal = args.lanes / (args.work_ms / 1000)
    medians = {name: statistics.median(values) for name, values in figures.items()}
    return {
        "items_per_s": figures,
        "median": medians,
        f"over_{base}": {name: round(m / medians[base], 3) for name, m in medians.items() if name != base},
        "of_ideal": {name: round(m / ideal, 3) for name, m in medians.items()},
        "driver_cpu_ms_per_item": {name: statistics.median(values) for name, values in cpu.items()},
    }


def _wait(check: Callable[[], bool], what: str, within: float = 120) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {within:.0f} s")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    isolate("benchmarks.cluster", argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    results: dict[str, Any] = {
        "lanes": args.lanes, "work_ms": args.work_ms, "items": args.items, "rounds": args.rounds,
        "cpus": os.cpu_count(), "ideal_items_per_s": args.lanes / (args.work_ms / 1000),
    }
    temp_dir = tempfile.mkdtemp(prefix="hkr-bc-", dir="/tmp")  # short: Ray puts sockets there
    try:
        if args.engine in ("ray", "both"):
            ray_bench(args, temp_dir, results)
        if args.engine in ("dask", "both"):
            dask_bench(args, temp_dir, results)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)  # the clusters' logs
    print(json.dumps(results, indent=1), flush=True)


if __name__ == "__main__":
    main()
