"""``python -m benchmarks.in_flight --engine dask|ray``: items per second with steps in flight
on a local cluster, one configuration after the other in rotating order, per round.

* Dask: ``examples/dask_pipeline.py``'s pipeline (no worker lost, each item's
  transform taking ``--work-ms`` on its worker) on a ``LocalCluster`` of 1 and
  of 2 single-thread worker processes, at ``--in-flight 1`` and ``4``, timed by its
  sink from the first write to the last (its clients' connections left out); the
  ratio is 2 workers over 1 at N = 4, round by round.
* Ray: one ``RayActorSessionCreator`` lane per step in flight (``_remote_steps.SleepActor``:
  each call sleeps ``--work-ms`` inside the actor), under the in-process
  benchmark's hooks, with 1 actor (N = 1) and 4 actors (N = 4); the ratio is
  4 over 1, round by round. Each run is timed from the moment every lane has
  finished a step (so that starting the actors is left out).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import anyio

from ._harness import stats
from ._in_flight_loops import hook_set
from ._remote_steps import SleepActor

__all__ = ["WORK_S", "run_engine"]

ENGINE_BACKENDS = ("asyncio", "trio")
#: What one step takes on its worker (Dask) or inside its actor (Ray), by default: it
#: sleeps, keeping the worker's thread or the actor busy (``--work-ms``).
WORK_S = 0.05
DASK_TARGET, RAY_TARGET = 1.8, 3.5


def _log(args: argparse.Namespace, message: str) -> None:
    if not args.quiet:
        print(f"[in_flight {args.engine}] {message}", file=sys.stderr, flush=True)


def _work_s(args: argparse.Namespace) -> float:
    return WORK_S if args.work_ms is None else args.work_ms / 1000


def _rotating(variants: Sequence[Any], rounds: int) -> Iterator[tuple[int, Any]]:
    for r in range(rounds):
        shift = r % len(variants)
        for variant in (*variants[shift:], *variants[:shift]):
            yield r, variant


def _ratios(rates: Mapping[Any, list[float]], top: Any, bottom: Any) -> dict[str, float]:
    return stats([a / b for a, b in zip(rates[top], rates[bottom], strict=True)])


def _verdict(median: float, target: float) -> dict[str, Any]:
    return {"target": f">= {target}", "median": median, "met": median >= target}


# -- Dask ---------------------------------------------------------------------------------


def _dask_cluster(workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )


def dask_run(args: argparse.Namespace) -> dict[str, Any]:
    from examples.dask_pipeline import run_pipeline

    items = args.items or (24 if args.quick else 80)
    variants = [(w, n, b) for w, n in ((1, 1), (1, 4), (2, 4)) for b in ENGINE_BACKENDS]
    rates: dict[tuple[int, int, str], list[float]] = {v: [] for v in variants}
    with _dask_cluster(1) as one, _dask_cluster(2) as two:
        addresses = {1: one.scheduler_address, 2: two.scheduler_address}
        for r, (workers, in_flight, backend) in _rotating(variants, args.rounds):
            run = functools.partial(
                run_pipeline, addresses[workers], items, None, in_flight=in_flight, work_s=_work_s(args)
            )
            sink = anyio.run(run, backend=backend)
            rate = sink.items_per_second()
            if sorted(sink.rows) != list(range(items)) or rate is None:
                raise RuntimeError(f"the pipeline wrote {len(sink.rows)} of {items} items")
            rates[(workers, in_flight, backend)].append(rate)
            _log(args, f"round {r + 1}: {workers} worker(s), in flight {in_flight}, {backend}: {rate:.1f} items/s")
    ratios = {f"2_workers_over_1_n4_{b}": _ratios(rates, (2, 4, b), (1, 4, b)) for b in ENGINE_BACKENDS}
    return {
        "engine": {
            "items": items,
            "work_s": _work_s(args),
            "items_per_s": {f"{w}_workers_n{n}_{b}": stats(v) for (w, n, b), v in rates.items()},
            "ratios": ratios,
        },
        "targets": {name: _verdict(r["median"], DASK_TARGET) for name, r in ratios.items()},
    }


# -- Ray ----------------------------------------------------------------------------------


async def ray_items(in_flight: int, items: int, work_s: float) -> float:
    """Items per second of one run: ``in_flight`` actors, one per lane, timed from the
    moment each lane has finished a step."""
    import hookrun
    from hookrun.ray import RayActorSessionCreator

    creator = RayActorSessionCreator(SleepActor, work_s, actor_options={"num_cpus": 0})
    feeds = [{"x": i} for i in range(items + in_flight)]
    async with creator, hookrun.MonitoredSession(creator.create_session, hook_set(), max_in_flight=in_flight) as sess:
        start = 0.0
        i = 0
        async for (x,) in sess.iterate(["x"], feeds):
            if x != i:
                raise RuntimeError(f"result {i} came out of order or wrong: {x!r}")
            i += 1
            if i == in_flight:
                start = time.perf_counter()
        elapsed = time.perf_counter() - start
    if i != len(feeds) or creator.created != in_flight:
        raise RuntimeError(f"{i} of {len(feeds)} steps ran on {creator.created} actors (expected {in_flight})")
    return items / elapsed


@contextlib.contextmanager
def _ray() -> Iterator[None]:
    import ray

    from hookrun.ray import init_local

    with tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp") as temp_dir:
        init_local(num_cpus=2, log_to_driver=False, configure_logging=False, _temp_dir=temp_dir)
        try:
            yield
        finally:
            ray.shutdown()


def ray_run(args: argparse.Namespace) -> dict[str, Any]:
    items = args.items or (16 if args.quick else 120)
    variants = [(n, b) for n in (1, 4) for b in ENGINE_BACKENDS]
    rates: dict[tuple[int, str], list[float]] = {v: [] for v in variants}
    with _ray():
        for r, (in_flight, backend) in _rotating(variants, args.rounds):
            rate = anyio.run(ray_items, in_flight, items, _work_s(args), backend=backend)
            rates[(in_flight, backend)].append(rate)
            _log(args, f"round {r + 1}: {in_flight} actor(s), {backend}: {rate:.1f} items/s")
    ratios = {f"4_actors_over_1_{b}": _ratios(rates, (4, b), (1, b)) for b in ENGINE_BACKENDS}
    return {
        "engine": {
            "items": items,
            "work_s": _work_s(args),
            "items_per_s": {f"{n}_actors_n{n}_{b}": stats(v) for (n, b), v in rates.items()},
            "ratios": ratios,
        },
        "targets": {name: _verdict(r["median"], RAY_TARGET) for name, r in ratios.items()},
    }


def run_engine(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {"dask": dask_run, "ray": ray_run}
    return runs[args.engine](args)
