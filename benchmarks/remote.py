"""Remote-step benchmarks, run on demand: what hooks add to a step that is a Ray or Dask call.

    python -m benchmarks.remote --engine ray|dask [--quick] [--json PATH]

On a local cluster (Ray: ``num_cpus=2``, loopback, no dashboard; Dask: a
``LocalCluster`` of two single-thread worker processes on 127.0.0.1), per backend
(asyncio and trio, alternating round by round in one process), steps of a trivial
remote function (``{"y": x}``):

* ``raw``: awaiting the engine's own future with ``hookrun.remote.await_future``;
* ``session``: the bare loop: ``await session.run(["y"], feed)`` on a
  ``RayStepSession`` / ``DaskStepSession`` (the same remote call as below, no hooks);
* ``hooked_0``, ``noop_10``: a ``MonitoredSession`` over that session with no hooks
  and with 10 async no-op hooks;
* ``worker_hooks``: with the built-in hooks a worker runs: ``StepCounterHook``,
  ``LoggingTensorHook`` (fetching ``y``) and ``StopAtStepHook``.

The overhead of a case is its per-step time over ``session``'s, taken within each
round, minus one. As a cross-check less exposed to the remote call's jitter, the
same rounds time the same hooks on an in-process session that returns at once
(``local_*`` over ``local_bare``, as in ``python -m benchmarks``): that difference
over ``session``'s step is the hooks' share of a remote step. Then, for Ray: increments per second of K worker processes (async
actors) sharing one ``RayStepCounter``, K = 1, 2, 4, each incrementing in a loop; for
Dask: items per second of the example pipeline (``examples/dask_pipeline.py``, no
worker lost) on a cluster of 1 and of 2 workers, client connection included.
Everything is interleaved in rounds in one process; read the ratios, not the
absolute figures. The JSON goes to stdout and a table to stderr, or the JSON to
``--json PATH`` and the table to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
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

from hookrun import MonitoredSession, SessionRunHook
from hookrun.hooks import LoggingTensorHook, StepCounterHook, StopAtStepHook
from hookrun.remote import await_future

from ._harness import Case, Measurement, Timing, clock, emit, machine_info, measure, stats, timed
from ._remote_steps import CounterWorker, trivial_step
from .cases import bare_step, hooked_step, hooks_of
from .report import fmt, fmt_stats

__all__ = ["main"]

BACKENDS = ("asyncio", "trio")
BASE = "session"
LOCAL_BASE = "local_bare"
HOOKED = ("hooked_0", "noop_10", "worker_hooks")
#: Cases whose overhead over ``session`` must stay under ``LIMIT``, per engine.
TARGETED = {"ray": ("noop_10", "worker_hooks"), "dask": ("noop_10",)}
LIMIT = 0.05
COUNTER_KS = (1, 2, 4)
FEED = {"x": 1}


def worker_hooks() -> list[SessionRunHook]:
    """The built-in hooks a remote worker usually runs (logging every 100 steps)."""
    return [
        StepCounterHook(every_n_steps=100),
        LoggingTensorHook(["y"], every_n_iter=100),
        StopAtStepHook(num_steps=10**12),
    ]


HOOK_SETS: dict[str, Callable[[], list[SessionRunHook]]] = {
    "hooked_0": list,
    "noop_10": hooks_of("async", 10),
    "worker_hooks": worker_hooks,
}


def _loop(call: Callable[[], Any]) -> Callable[[int], Any]:
    async def sample(n: int) -> Timing:
        start = clock()
        for _ in range(n):
            await call()
        return timed(start)

    return sample


def step_cases(raw: Callable[[], Any], make_session: Callable[[], Any]) -> list[Case]:
    """The five cases, given a raw remote call and a factory of the engine's step session.

    Each monitored session gets a session of its own (it closes it at its end).
    """
    session = make_session()

    async def create() -> Any:
        return make_session()

    def hooked(name: str) -> Callable[[int], Any]:
        async def sample(n: int) -> Timing:
            async with MonitoredSession(create, HOOK_SETS[name]()) as sess:
                start = clock()
                for _ in range(n):
                    if sess.should_stop():
                        break
                    await sess.run(["y"], FEED)
                elapsed = timed(start)
            return elapsed

        return sample

    cases = [
        Case(LOCAL_BASE, bare_step()),
        *(Case(f"local_{name}", hooked_step(HOOK_SETS[name])) for name in HOOKED[1:]),
        Case("raw", _loop(raw), min_n=20),
        Case(BASE, _loop(lambda: session.run(["y"], FEED)), min_n=20),
    ]
    return cases + [Case(name, hooked(name), min_n=20) for name in HOOKED]


def measure_backends(cases: list[Case], rounds: int, sample_ms: float, log: Callable[[str], None]) -> dict[str, Measurement]:
    """``rounds`` rounds on every backend, the backends alternating (and swapping order)."""
    result = {backend: Measurement() for backend in BACKENDS}
    for r in range(rounds):
        order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
        for backend in order:
            anyio.run(measure, cases, 1, sample_ms, None, result[backend], backend=backend)
        log(f"round {r + 1}")
    return result


def _ratio_minus_one(name: str) -> Callable[[Mapping[str, float]], float]:
    return lambda r: r[name] / r[BASE] - 1.0


def _difference(name: str) -> Callable[[Mapping[str, float]], float]:
    return lambda r: r[name] - r[BASE]


def _local_share(name: str) -> Callable[[Mapping[str, float]], float]:
    """The hooks' cost on an in-process session, as a share of the remote step."""
    return lambda r: (r[f"local_{name}"] - r[LOCAL_BASE]) / r[BASE]


def overheads(m: Measurement) -> dict[str, Any]:
    out: dict[str, Any] = {"per_step_us": {name: m.per_step(name) for name in m.steps}, "steps": m.steps}
    out["cpu_share"] = {name: m.share(name) for name in m.steps}
    out["over_session"] = {name: m.derive(_ratio_minus_one(name)) for name in HOOKED}
    out["over_session_us"] = {name: m.derive(_difference(name)) for name in HOOKED}
    out["local_hook_cost_over_session"] = {
        name: m.derive(_local_share(name)) for name in HOOKED[1:]
    }
    out["session_over_raw_us"] = m.derive(lambda r: r[BASE] - r["raw"])
    return out


# -- Ray ----------------------------------------------------------------------------------


@contextlib.contextmanager
def ray_cluster() -> Iterator[Any]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    temp_dir = tempfile.mkdtemp(prefix="hkr-bench-", dir="/tmp" if os.path.isdir("/tmp") else None)
    ray.init(
        address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
        configure_logging=False, _node_ip_address="127.0.0.1", _temp_dir=temp_dir,
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def ray_run(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    from hookrun.ray import RayStepCounter, RayStepSession

    with ray_cluster() as ray:
        fn = ray.remote(trivial_step)
        cases = step_cases(lambda: await_future(fn.remote(FEED).future()), lambda: RayStepSession(fn))
        backends = measure_backends(cases, args.rounds, args.sample_ms, log)
        name = f"bench-{uuid.uuid4().hex[:8]}"
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
        "backends": {b: overheads(m) for b, m in backends.items()},
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
        cases = step_cases(
            lambda: await_future(client.submit(trivial_step, FEED, pure=False)),
            lambda: DaskStepSession(trivial_step, client=client),
        )
        backends = measure_backends(cases, args.rounds, args.sample_ms, log)
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
        "backends": {b: overheads(m) for b, m in backends.items()},
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
            median = data["over_session"][name]["median"]
            out[f"{name}_{backend}"] = {"target": f"< {LIMIT}", "median": median, "met": median < LIMIT}
    return out


def render(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        f"remote ({meta['engine']}) - {meta['date']} - Python {meta['python']} - {meta['rounds']} rounds",
        "per step, us, median [min-max]; overhead over the bare session loop, within each round",
    ]
    for backend, data in result["backends"].items():
        lines.append(f"  {backend}")
        for name, st in data["per_step_us"].items():
            extra = ""
            if name in data["over_session"]:
                extra = f"   overhead {fmt_stats(data['over_session'][name], 100.0)} %"
            if name in data["local_hook_cost_over_session"]:
                share = data["local_hook_cost_over_session"][name]
                extra += f"   in-process hooks / remote step {fmt_stats(share, 100.0)} %"
            lines.append(f"    {name:<18} {fmt_stats(st)}{extra}")
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
    p.add_argument("--sample-ms", type=float, default=800.0, help="length of one step sample")
    p.add_argument("--increments", type=int, default=300, help="Ray: increments per counter worker")
    p.add_argument("--items", type=int, default=200, help="Dask: items per pipeline run")
    p.add_argument("--quick", action="store_true", help="a few seconds past the cluster's start")
    p.add_argument("--json", metavar="PATH", help="write the JSON here (the table then goes to stdout)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.sample_ms, args.increments, args.items = 2, 60.0, 20, 10
    if args.rounds < 1 or args.sample_ms <= 0 or args.increments < 1 or args.items < 1:
        p.error("--rounds, --increments and --items must be >= 1 and --sample-ms > 0")
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
        engine=args.engine, rounds=args.rounds, sample_ms=args.sample_ms, quick=args.quick,
        duration_s=round(time.perf_counter() - started, 1),
    )
    result = {"meta": meta, **result}
    result["targets"] = verdicts(args.engine, result)
    emit(result, render(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
