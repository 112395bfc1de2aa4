"""Remote-step benchmarks, run on demand: what hooks add to a step that is a Ray or Dask call.

    python -m benchmarks.remote --engine ray|dask [--quick] [--json PATH]

On a local cluster (Ray: ``num_cpus=2``, listening on 127.0.0.1 only, no dashboard;
Dask: a ``LocalCluster`` of two single-thread worker processes on 127.0.0.1), per
backend (asyncio and trio, alternating round by round in one process), steps of a
trivial remote function (``{"y": x}``), each case against its baseline, the two
interleaved in blocks of steps in the same window (``_paired.py``):

* ``session`` over ``raw``: ``await session.run(["y"], feed)`` on a
  ``RayStepSession`` / ``DaskStepSession`` over awaiting the engine's own future
  with ``hookrun.remote.await_future`` (the adapter's cost);
* ``hooked_0``, ``noop_10`` over ``session``: a ``MonitoredSession`` over such a
  session with no hooks and with 10 async no-op hooks;
* ``worker_hooks`` over ``session``: with the built-in hooks a worker runs:
  ``StepCounterHook``, ``LoggingTensorHook`` (fetching ``y``) and ``StopAtStepHook``,
  on the default in-process step counter;
* Ray only, ``shared_worker_hooks`` over ``session_inc``: the same hooks with the
  global step in a ``RayStepCounter`` (a worker of a job), over a bare loop making
  the same Ray calls: the step, then one ``increment()`` of the counter;
* Ray only, ``idle_noop_10`` and ``idle_worker_hooks`` over ``idle_session``: the
  hooks on an in-process ``StepSession`` whose step sleeps about as long as the
  Ray round trip: what the hooks cost when each step really waits (caches gone
  cold), without Ray.

The overhead of a case is its per-step time over its baseline's in the same
window, minus one; medians and ranges over the rounds. As a cross-check that no
remote jitter can reach, the same rounds time the same hooks on an in-process
session that returns at once (``local_*`` over ``local_bare``, as in
``python -m benchmarks``): that difference over ``session``'s step is the hooks'
own share of a remote step. Then, Ray: increments per second of K = 1, 2, 4 worker
processes (async actors) sharing one ``RayStepCounter``, each in a loop; Dask:
items per second of ``examples/dask_pipeline.py`` (no worker lost) on 1 and on 2
workers, client connection included. The JSON goes to stdout and a table to
stderr, or the JSON to ``--json PATH`` and the table to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

import anyio

from hookrun import StepSession
from hookrun.remote import await_future

from ._harness import Measurement, emit, machine_info, measure, stats
from ._paired import MEAN, TRIM, Pair, measure_pairs
from ._remote_cases import FEED, IDLE, LOCAL, LOCAL_BASE, idle_step, local_cases, step_pairs
from ._remote_steps import CounterWorker, trivial_step
from .report import fmt, fmt_stats

__all__ = ["main"]

BACKENDS = ("asyncio", "trio")
#: Cases whose overhead over their baseline must stay under ``LIMIT``, per engine.
TARGETED = {"ray": ("noop_10", "worker_hooks", "shared_worker_hooks"), "dask": ("noop_10",)}
LIMIT = 0.05
COUNTER_KS = (1, 2, 4)


def measure_backends(
    pairs: list[Pair], args: argparse.Namespace, log: Callable[[str], None]
) -> dict[str, tuple[Measurement, Measurement]]:
    """``args.rounds`` rounds on every backend, the backends alternating (and swapping order):
    each round samples every pair once, then the in-process cases once."""
    result = {backend: (Measurement(), Measurement()) for backend in BACKENDS}
    local = local_cases()

    async def one_round(remote: Measurement, in_process: Measurement) -> None:
        await measure_pairs(pairs, args.steps, args.block, remote)
        await measure(local, 1, args.sample_ms, None, in_process)

    for r in range(args.rounds):
        for backend in BACKENDS if r % 2 == 0 else BACKENDS[::-1]:
            anyio.run(one_round, *result[backend], backend=backend)
        log(f"round {r + 1}")
    return result


def overheads(pairs: list[Pair], remote: Measurement, in_process: Measurement) -> dict[str, Any]:
    """Per-step figures, each case's overhead over its baseline, and the in-process cross-check."""
    def of_base(base: str) -> list[float]:  # a baseline's figures from all its pairs
        return [r[k] for r in remote.rounds for k in r if k.startswith(f"{base}@") and not k.endswith(MEAN)]

    per_step: dict[str, Any] = {base: stats(of_base(base)) for base in dict.fromkeys(p.base for p in pairs)}
    per_step.update({pair.name: remote.per_step(pair.name) for pair in pairs})
    per_step.update({name: in_process.per_step(name) for name in in_process.steps})
    session_us = statistics.median(of_base("session"))

    def local_share(name: str) -> Callable[[Mapping[str, float]], float]:
        return lambda r: (r[f"local_{name}"] - r[LOCAL_BASE]) / session_us

    def over(pair: Pair, ratio: bool, suffix: str = "") -> Callable[[Mapping[str, float]], float]:
        case, base = pair.name + suffix, f"{pair.base}@{pair.name}{suffix}"
        return (lambda r: r[case] / r[base] - 1.0) if ratio else (lambda r: r[case] - r[base])

    return {
        "per_step_us": per_step,
        "steps_per_round": dict(remote.steps),
        "baseline": {pair.name: pair.base for pair in pairs},
        "over_base": {pair.name: remote.derive(over(pair, True)) for pair in pairs},
        "over_base_us": {pair.name: remote.derive(over(pair, False)) for pair in pairs},
        "over_base_plain_mean": {pair.name: remote.derive(over(pair, True, MEAN)) for pair in pairs},
        "local_hook_cost_over_session": {name: in_process.derive(local_share(name)) for name in LOCAL},
    }


# -- Ray ----------------------------------------------------------------------------------


@contextlib.contextmanager
def ray_cluster() -> Iterator[Any]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from hookrun.ray import init_local

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    temp_dir = tempfile.mkdtemp(prefix="hkr-bench-", dir="/tmp" if os.path.isdir("/tmp") else None)
    init_local(num_cpus=2, log_to_driver=False, configure_logging=False, _temp_dir=temp_dir)
    try:
        yield ray
    finally:
        ray.shutdown()


def ray_run(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    from hookrun.ray import RayStepCounter, RayStepSession

    with ray_cluster() as ray:
        fn = ray.remote(trivial_step)
        name = f"bench-{uuid.uuid4().hex[:8]}"
        pairs = step_pairs(
            lambda: await_future(fn.remote(FEED).future()), lambda: RayStepSession(fn),
            lambda: RayStepCounter(f"{name}-steps", "hookrun"),
        ) + [p for p in step_pairs(None, lambda: StepSession(idle_step), prefix="idle_") if p.name in IDLE]
        backends = measure_backends(pairs, args, log)
        anyio.run(_delete_counter, RayStepCounter(f"{name}-steps", "hookrun"))
        actor = ray.remote(num_cpus=0)(CounterWorker)
        workers = [actor.remote(name, "hookrun") for _ in range(max(COUNTER_KS))]
        ray.get([w.warm.remote() for w in workers])
        rates: dict[int, list[float]] = {k: [] for k in COUNTER_KS}
        for r in range(args.rounds):
            shift = r % len(COUNTER_KS)
            for k in (*COUNTER_KS[shift:], *COUNTER_KS[:shift]):
                start = time.perf_counter()
                ray.get([w.run.remote(args.increments) for w in workers[:k]])
                rates[k].append(k * args.increments / (time.perf_counter() - start))
            log(f"counter round {r + 1}")
        final = ray.get(workers[0].warm.remote())
        expected = args.increments * sum(COUNTER_KS) * args.rounds
        for w in workers:
            ray.kill(w)
        anyio.run(_delete_counter, RayStepCounter(name, "hookrun"))
    if final != expected:
        raise RuntimeError(f"the shared counter reads {final}, expected {expected}: increments were lost")
    return {
        "backends": {b: overheads(pairs, *m) for b, m in backends.items()},
        "counter": {
            "increments_per_worker": args.increments,
            "final_value": final,
            "increments_per_s": {str(k): stats(v) for k, v in rates.items()},
        },
    }


async def _delete_counter(counter: Any) -> None:
    await counter.delete()
    await counter.aclose()


# -- Dask ---------------------------------------------------------------------------------


def _cluster(workers: int) -> Any:
    from distributed import LocalCluster

    return LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )


def dask_run(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    from distributed import Client
    from examples.dask_pipeline import run_pipeline

    from hookrun.dask import DaskStepSession

    with _cluster(2) as two, _cluster(1) as one, Client(  # type: ignore[no-untyped-call]
        two.scheduler_address, set_as_default=False
    ) as client:
        pairs = step_pairs(
            lambda: await_future(client.submit(trivial_step, FEED, pure=False)),
            lambda: DaskStepSession(trivial_step, client=client),
        )
        backends = measure_backends(pairs, args, log)
        variants = [(w, b) for w in (1, 2) for b in BACKENDS]
        addresses = {1: one.scheduler_address, 2: two.scheduler_address}
        rates: dict[tuple[int, str], list[float]] = {v: [] for v in variants}
        for r in range(args.rounds):
            shift = r % len(variants)
            for workers, backend in (*variants[shift:], *variants[:shift]):
                start = time.perf_counter()
                sink = anyio.run(run_pipeline, addresses[workers], args.items, None, backend=backend)
                elapsed = time.perf_counter() - start
                if sorted(sink.rows) != list(range(args.items)):
                    raise RuntimeError(f"the pipeline wrote {len(sink.rows)} of {args.items} items")
                rates[(workers, backend)].append(args.items / elapsed)
            log(f"pipeline round {r + 1}")
    return {
        "backends": {b: overheads(pairs, *m) for b, m in backends.items()},
        "pipeline": {
            "items": args.items,
            "items_per_s": {f"{w}_workers_{b}": stats(v) for (w, b), v in rates.items()},
        },
    }


# -- the run ------------------------------------------------------------------------------


def verdicts(engine: str, result: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for backend, data in result["backends"].items():
        for name in TARGETED[engine]:
            median = data["over_base"][name]["median"]
            out[f"{name}_{backend}"] = {"target": f"< {LIMIT}", "median": median, "met": median < LIMIT}
    return out


def render(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        f"remote ({meta['engine']}) - {meta['date']} - Python {meta['python']} - {meta['rounds']} rounds, "
        f"{meta['steps']} steps of each side per pair, blocks of {meta['block']}",
        f"per step, us (mean without each side's slowest {TRIM:.0%}), median [min-max] over rounds; "
        "overhead over the baseline timed in the same window (plain means in brackets)",
    ]
    for backend, data in result["backends"].items():
        lines.append(f"  {backend}")
        per_step = data["per_step_us"]
        for name, base in data["baseline"].items():
            lines.append(
                f"    {name:<20} {fmt_stats(per_step[name])} over {base} {fmt_stats(per_step[base])}: "
                f"+{fmt_stats(data['over_base_us'][name])} us, {fmt_stats(data['over_base'][name], 100.0)} % "
                f"({fmt(data['over_base_plain_mean'][name]['median'] * 100.0)} %)"
            )
        for name, share in data["local_hook_cost_over_session"].items():
            lines.append(
                f"    in-process {name:<9} {fmt_stats(per_step[f'local_{name}'])} over "
                f"{fmt_stats(per_step[LOCAL_BASE])}: {fmt_stats(share, 100.0)} % of a remote step"
            )
    for key, v in result.get("counter", {}).get("increments_per_s", {}).items():
        lines.append(f"  RayStepCounter, K={key}: {fmt_stats(v)} increments/s")
    for key, v in result.get("pipeline", {}).get("items_per_s", {}).items():
        lines.append(f"  pipeline, {key.replace('_', ' ')}: {fmt_stats(v)} items/s")
    for key, v in result["targets"].items():
        lines.append(f"  target {key} {v['target']}: {fmt(v['median'])} -> {'met' if v['met'] else 'MISSED'}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.remote", description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=("ray", "dask"), required=True)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--steps", type=int, default=200, help="remote steps of each side of a pair, per round")
    p.add_argument("--block", type=int, default=1, help="steps per block of the interleaving")
    p.add_argument("--sample-ms", type=float, default=400.0, help="length of one in-process sample")
    p.add_argument("--increments", type=int, default=300, help="Ray: increments per counter worker")
    p.add_argument("--items", type=int, default=200, help="Dask: items per pipeline run")
    p.add_argument("--quick", action="store_true", help="a few seconds past the cluster's start")
    p.add_argument("--json", metavar="PATH", help="write the JSON here (the table then goes to stdout)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.block, args.sample_ms, args.increments, args.items = 2, 20, 1, 60.0, 20, 10
    if min(args.rounds, args.steps, args.block, args.increments, args.items) < 1 or args.sample_ms <= 0:
        p.error("--rounds, --steps, --block, --increments and --items must be >= 1 and --sample-ms > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[remote {args.engine}] {message}", file=sys.stderr, flush=True)

    run = ray_run if args.engine == "ray" else dask_run
    result = run(args, log)
    packages = ("anyio", "trio", "hookrun", "ray") if args.engine == "ray" else ("anyio", "trio", "hookrun", "distributed")
    meta = machine_info(packages)
    meta.update(
        engine=args.engine, rounds=args.rounds, steps=args.steps, block=args.block,
        sample_ms=args.sample_ms, quick=args.quick,
        duration_s=round(time.perf_counter() - started, 1),
    )
    result = {"meta": meta, **result}
    result["targets"] = verdicts(args.engine, result)
    emit(result, render(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
