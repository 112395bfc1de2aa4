"""Steps in flight, run on demand: the throughput of ``max_in_flight=N`` against a step that waits.

    python -m benchmarks.in_flight [--quick] [--backends asyncio,uvloop,trio] [--shapes 10ms_n256,...] [--json PATH]
    python -m benchmarks.in_flight --engine dask|ray [--quick] [--json PATH]

In process, per backend (rounds alternating between backends), every case drives
a raw session whose run sleeps (a stand-in for a remote step) under 10 async
no-op hooks and a ``StepCounterHook``, with up to N steps in flight, results in
feed order:

* ``hookrun_<ms>ms_n<N>``: ``MonitoredSession(..., max_in_flight=N)`` and
  ``async for ... in session.iterate(fetches, feeds)``;
* ``tasks_<ms>ms_n<N>``: the same session, ``run`` awaited from N tasks (results as
  they come, not re-ordered);
* ``loop_<ms>ms_n<N>``: the hand-written anyio loop: a task group, a semaphore of
  N, the same hooks awaited inline before and after each run, results re-ordered
  by index.

A 10 ms step at N = 1, 8, 64 gives the *efficiency*: steps per second over the
ideal N / 10 ms. A 1 ms step at N = 64, and a 10 ms step at N = 256 and 1024,
are the driver's limit: the event loop, not the step, bounds the rate, and
hookrun's rate is read over the hand-written loop's, pair-wise per round. Steps
whose latency varies (drawn from 2-20 ms per step, seeded, the same in every
case) at N = 8 and 64 show whether a slow step holds the others back: the
ideal is then N over the steps' mean latency (about 11 ms).

With ``--engine``, items per second on a local cluster, each configuration
timed in turn, in rotating order (see ``_in_flight_engines.py``). Like the other
benchmarks the JSON goes to stdout and the table to stderr, or the JSON to
``--json PATH`` and the table to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

import anyio

from ._harness import Case, Measurement, RoundFn, emit, machine_info, measure, pin_cpu
from ._in_flight_loops import VARIED, baseline_case, hookrun_case, mean_latency, tasks_case
from .report import DASH, fmt, fmt_stats

__all__ = ["main"]

BACKENDS: dict[str, tuple[str, dict[str, Any]]] = {
    "asyncio": ("asyncio", {}),
    "uvloop": ("asyncio", {"use_uvloop": True}),
    "trio": ("trio", {}),
}
#: (step seconds, steps in flight) of every case pair; ``None`` seconds: a latency drawn per
#: step from ``VARIED`` (2-20 ms, seeded by the step's index, the same in every case).
SHAPES: tuple[tuple[float | None, int], ...] = (
    (0.010, 1), (0.010, 8), (0.010, 64), (0.001, 64), (None, 8), (None, 64), (0.010, 256), (0.010, 1024),
)
#: Efficiency targets (rate over N / step) and the targets over the hand-written loop.
EFFICIENCY_TARGETS: dict[tuple[float | None, int], float] = {(0.010, 8): 0.85, (0.010, 64): 0.7}
OVER_LOOP_TARGETS: dict[tuple[float | None, int], float] = {
    (0.001, 64): 0.8, (None, 8): 0.95, (None, 64): 0.95, (0.010, 256): 0.9, (0.010, 1024): 0.9,
}
#: Steps per sample of each shape: full run and ``--quick``.
FULL_STEPS: dict[tuple[float | None, int], int] = {
    (0.010, 1): 30, (0.010, 8): 240, (0.010, 64): 1920, (0.001, 64): 4000, (None, 8): 400, (None, 64): 3200,
    (0.010, 256): 4096, (0.010, 1024): 8192,
}
QUICK_STEPS: dict[tuple[float | None, int], int] = {
    (0.010, 1): 4, (0.010, 8): 16, (0.010, 64): 128, (0.001, 64): 256, (None, 8): 16, (None, 64): 128,
    (0.010, 256): 512, (0.010, 1024): 2048,
}


def shape_name(seconds: float | None, in_flight: int) -> str:
    if seconds is None:
        return f"{round(VARIED[0] * 1000)}-{round(VARIED[1] * 1000)}ms_n{in_flight}"
    return f"{round(seconds * 1000)}ms_n{in_flight}"


def cases(steps: Mapping[tuple[float | None, int], int], shapes: Sequence[tuple[float | None, int]] = SHAPES) -> list[Case]:
    """Every shape's hookrun case next to its hand-written loop."""
    out = []
    for shape in shapes:
        name = shape_name(*shape)
        out += [
            hookrun_case(f"hookrun_{name}", *shape, steps[shape]),
            tasks_case(f"tasks_{name}", *shape, steps[shape]),
            baseline_case(f"loop_{name}", *shape, steps[shape]),
        ]
    return out


def _rate(case: str, per: float = 1.0) -> RoundFn:
    """Per round: the case's steps per second (over ``per``)."""
    return lambda r: 1e6 / r[case] / per


def _over(case: str, base: str) -> RoundFn:
    """Per round: the case's steps per second over the base's."""
    return lambda r: r[base] / r[case]


def summarise(m: Measurement, shapes: Sequence[tuple[float | None, int]] = SHAPES) -> dict[str, Any]:
    """Per shape: steps/s of both, their efficiencies and hookrun over the loop (pair-wise)."""
    out: dict[str, Any] = {}
    for seconds, n in shapes:
        name = shape_name(seconds, n)
        ours, tasks, loop = f"hookrun_{name}", f"tasks_{name}", f"loop_{name}"
        ideal = n / mean_latency(seconds, m.steps[ours])
        out[name] = {
            "steps": m.steps[ours],
            "ideal_steps_per_s": ideal,
            "hookrun_steps_per_s": m.derive(_rate(ours)),
            "loop_steps_per_s": m.derive(_rate(loop)),
            "hookrun_efficiency": m.derive(_rate(ours, ideal)),
            "loop_efficiency": m.derive(_rate(loop, ideal)),
            "hookrun_over_loop": m.derive(_over(ours, loop)),
            "tasks_steps_per_s": m.derive(_rate(tasks)),
            "tasks_efficiency": m.derive(_rate(tasks, ideal)),
            "cpu_share": {"hookrun": m.share(ours), "tasks": m.share(tasks), "loop": m.share(loop)},
        }
    return out


def verdicts(backends: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for backend, data in backends.items():
        for shape, target in EFFICIENCY_TARGETS.items():
            if shape_name(*shape) not in data:
                continue
            median = data[shape_name(*shape)]["hookrun_efficiency"]["median"]
            out[f"efficiency_{shape_name(*shape)}_{backend}"] = {"target": f">= {target}", "median": median, "met": median >= target}
        for shape, target in OVER_LOOP_TARGETS.items():
            if shape_name(*shape) not in data:
                continue
            median = data[shape_name(*shape)]["hookrun_over_loop"]["median"]
            out[f"over_loop_{shape_name(*shape)}_{backend}"] = {"target": f">= {target}", "median": median, "met": median >= target}
    return out


async def _round(chosen: list[Case], into: Measurement, log: Any) -> None:
    await measure(chosen, 1, 0.0, log, into)


def in_process(args: argparse.Namespace) -> dict[str, Any]:
    """Round r of every backend runs before round r + 1 of any (a fresh event loop each)."""
    shapes = _shapes(args.shapes)
    chosen = cases(QUICK_STEPS if args.quick else FULL_STEPS, shapes)
    measurements = {b: Measurement() for b in _backends(args.backends)}
    skipped: dict[str, str] = {}
    for _ in range(args.rounds):
        for backend in list(measurements):
            name, options = BACKENDS[backend]

            def log(message: str, backend: str = backend) -> None:
                if not args.quiet:
                    print(f"[in_flight {backend}] {message}", file=sys.stderr, flush=True)

            try:
                anyio.run(_round, chosen, measurements[backend], log, backend=name, backend_options=options)
            except ImportError as exc:
                skipped[backend] = f"skipped: {exc}"
                del measurements[backend]
    backends = {b: summarise(m, shapes) for b, m in measurements.items()}
    return {"backends": backends, "skipped": skipped, "targets": verdicts(backends)}


def _backends(spec: str) -> list[str]:
    chosen = [b.strip() for b in spec.split(",") if b.strip()]
    for backend in chosen:
        if backend not in BACKENDS:
            raise SystemExit(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    return chosen


def _shapes(spec: str | None) -> list[tuple[float | None, int]]:
    """The shapes named in ``spec`` (comma-separated, as the JSON names them), or every one."""
    if spec is None:
        return list(SHAPES)
    names = {shape_name(*shape): shape for shape in SHAPES}
    chosen = [name.strip() for name in spec.split(",") if name.strip()]
    for name in chosen:
        if name not in names:
            raise SystemExit(f"unknown shape {name!r}; choose from {', '.join(names)}")
    return [names[name] for name in chosen]


def render(result: Mapping[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        f"in_flight - {meta['date']} - Python {meta['python']} - {meta['rounds']} rounds - "
        f"load average {meta['load_average']} -> {meta['load_average_after']}",
    ]
    lines += [f"skipped {backend}: {why}" for backend, why in result.get("skipped", {}).items()]
    if "backends" in result:
        lines.append("steps/s, median [min-max] over rounds; efficiency = steps/s over N / step")
        for backend, data in result["backends"].items():
            lines.append(f"  {backend}")
            for name, d in data.items():
                lines.append(
                    f"    {name:<10} hookrun {fmt_stats(d['hookrun_steps_per_s'])} ({fmt_stats(d['hookrun_efficiency'])}), "
                    f"run() from N tasks {fmt_stats(d['tasks_steps_per_s'])} ({fmt_stats(d['tasks_efficiency'])}), "
                    f"loop {fmt_stats(d['loop_steps_per_s'])} ({fmt_stats(d['loop_efficiency'])}); "
                    f"hookrun / loop {fmt_stats(d['hookrun_over_loop'])}"
                )
    for name, d in result.get("engine", {}).get("items_per_s", {}).items():
        lines.append(f"  {name}: {fmt_stats(d)} items/s")
    for name, d in result.get("engine", {}).get("ratios", {}).items():
        lines.append(f"  {name}: {fmt_stats(d)}")
    for key, v in result["targets"].items():
        lines.append(f"  target {key} {v['target']}: {fmt(v['median'])} -> {'met' if v['met'] else 'MISSED'}")
    return "\n".join(lines)


def markdown(result: Mapping[str, Any]) -> str:
    """The in-process table in Markdown (what ``docs/benchmarks.md`` shows)."""
    meta = result["meta"]
    lines = [
        f"Measured {meta['date']}: Python {meta['python']}; {meta['rounds']} rounds; pinned to "
        f"{meta['pinned_cpus']}; load average {meta['load_average'][0]:.2f} at the start, "
        f"{meta['load_average_after'][0]:.2f} at the end; run took {meta['duration_s']} s.",
        "",
        "| backend | step, N | hookrun `iterate`, steps/s | hand-written loop, steps/s | `iterate` efficiency "
        "| loop efficiency | `iterate` / loop | `run()` from N tasks, efficiency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for backend, data in result["backends"].items():
        for name, d in data.items():
            ms, n = name.split("_n")
            lines.append(
                f"| {backend} | {ms.removesuffix('ms').replace('-', DASH)} ms, {n} | {_cell(d['hookrun_steps_per_s'])} | "
                f"{_cell(d['loop_steps_per_s'])} | {_cell(d['hookrun_efficiency'])} | "
                f"{_cell(d['loop_efficiency'])} | {_cell(d['hookrun_over_loop'])} | {_cell(d['tasks_efficiency'])} |"
            )
    return "\n".join(lines)


def _cell(st: Mapping[str, float]) -> str:
    return f"{fmt(st['median'])} [{fmt(st['min'])}{DASH}{fmt(st['max'])}]"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.in_flight", description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=("dask", "ray"), help="items per second on a local cluster instead")
    p.add_argument("--backends", default="asyncio,uvloop,trio", help="comma-separated: asyncio,uvloop,trio")
    p.add_argument("--shapes", help="comma-separated shapes to run (e.g. 10ms_n256,10ms_n1024; default: every one)")
    p.add_argument("--rounds", type=int, help="rounds (default 7, --engine 3, --quick 1)")
    p.add_argument("--items", type=int, help="--engine: items per run (default 80 for Dask, 120 for Ray)")
    p.add_argument("--work-ms", type=float, help="--engine: the step's work on its worker or actor, ms (default 50)")
    p.add_argument("--quick", action="store_true", help="a smoke run on tiny sizes")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True, help="pin to the last CPU (in process)")
    p.add_argument("--json", metavar="PATH", help="write the JSON here (the table then goes to stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    p.add_argument("--markdown", metavar="JSON", help="only print the Markdown table of a saved in-process result")
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3 if args.engine else 7
    if args.rounds < 1 or (args.items is not None and args.items < 1):
        p.error("--rounds and --items must be >= 1")
    if args.work_ms is not None and args.work_ms < 0:
        p.error("--work-ms must be >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        with open(args.markdown, encoding="utf-8") as f:
            print(markdown(json.load(f)))
        return 0
    started = time.perf_counter()
    meta = machine_info(("anyio", "trio", "uvloop", "hookrun", "ray", "distributed"))
    pinned = pin_cpu(args.pin and args.engine is None)
    if args.engine is None:
        result = in_process(args)
    else:
        from ._in_flight_engines import run_engine

        result = run_engine(args)
    meta.update(
        pinned_cpus=pinned, rounds=args.rounds, quick=args.quick, engine=args.engine,
        load_average_after=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        duration_s=round(time.perf_counter() - started, 1),
    )
    result = {"meta": meta, **result}
    emit(result, render(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
