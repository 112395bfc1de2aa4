"""hookrun's benchmark runner: ``python -m benchmarks`` or ``python benchmarks/run.py``.

Prints one JSON document and a readable table. By default the JSON goes to
stdout and the table to stderr; with ``--json PATH`` the JSON is written to PATH
and the table goes to stdout. See ``docs/benchmarks.md`` for the method.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

import anyio

from ._harness import (
    CLOCKS,
    Measurement,
    RoundFn,
    Stats,
    emit,
    machine_info,
    measure,
    pin_cpu,
    stats,
)
from .cases import BASELINE, HOOK_COUNTS, concurrency_cases, hooked_name, step_cases
from .memory import import_times, memory_run, workloads
from .report import evaluate, render

__all__ = ["main", "run"]

T = TypeVar("T")
Logger = Callable[[str], None]

BACKENDS: dict[str, tuple[str, dict[str, Any]]] = {
    "asyncio": ("asyncio", {}),
    "uvloop": ("asyncio", {"use_uvloop": True}),
    "trio": ("trio", {}),
}
#: The reference figures' 2 x seq_await_100 on asyncio (us), to compare machine speed with.
ANCHOR_SEQ_AWAIT_200 = 18.48
#: Settings of a full run and of ``--quick`` (a CI smoke run, well under a minute).
FULL = {"rounds": 7, "sample_ms": 120.0, "conc_steps": 50, "conc_rounds": 5, "memory_steps": 1_000_000, "import_runs": 15}
QUICK = {"rounds": 3, "sample_ms": 12.0, "conc_steps": 4, "conc_rounds": 2, "memory_steps": 50_000, "import_runs": 5}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="short CI smoke run (< 60 s)")
    p.add_argument("--backends", default="asyncio,uvloop,trio", help="comma-separated: asyncio,uvloop,trio")
    p.add_argument("--rounds", type=int, help="rounds per case (default 7, --quick 3)")
    p.add_argument("--sample-ms", type=float, help="target duration of one sample (default 120 ms)")
    p.add_argument("--memory-steps", type=int, help="steps of the memory run (default 1,000,000, --quick 50,000)")
    p.add_argument("--import-runs", type=int, help="subprocess runs per import command (default 15)")
    p.add_argument(
        "--clock",
        choices=CLOCKS,
        default="wall",
        help="clock of the us-scale cases: wall (perf_counter_ns, default) or cpu (thread_time_ns, "
        "immune to other processes taking the CPU); concurrency always uses wall time",
    )
    p.add_argument("--json", metavar="PATH", help="write the JSON here (the table then goes to stdout)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True, help="pin to the last CPU (default on)")
    p.add_argument("--no-concurrency", action="store_true", help="skip the 10 ms sleeping-hook cases")
    p.add_argument("--no-memory", action="store_true", help="skip the memory runs")
    p.add_argument("--no-import", action="store_true", help="skip the import timings")
    p.add_argument("--only", help="run only step cases whose name contains one of these comma-separated words")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    return p.parse_args(argv)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The defaults of the run kind, overridden by explicit options."""
    chosen: dict[str, Any] = dict(QUICK if args.quick else FULL)
    for key in ("rounds", "sample_ms", "memory_steps", "import_runs"):
        value = getattr(args, key)
        if value is not None:
            chosen[key] = value
    if args.rounds is not None:
        chosen["conc_rounds"] = args.rounds
    return chosen


# -- one backend --------------------------------------------------------------------------


def _difference(a: str, b: str, scale: float = 1.0) -> RoundFn:
    """Per round: ``(a - b) * scale``."""
    return lambda r: (r[a] - r[b]) * scale


def _ratio(a: str, b: str) -> RoundFn:
    """Per round: ``a / b``."""
    return lambda r: r[a] / r[b]


def _pairwise(m: Measurement, name: str) -> dict[str, Any]:
    return {
        "steps": m.steps[name],
        "per_step_us": m.per_step(name),
        "overhead_us": m.derive(_difference(name, BASELINE)),
        "ratio": m.derive(_ratio(name, BASELINE)),
        "cpu_share": m.share(name),
    }


def _derived(m: Measurement) -> dict[str, Stats]:
    """Pair-wise figures beyond overhead and ratio (only those whose cases were run)."""
    wanted: dict[str, tuple[str, str, float]] = {}
    for kind in ("async", "suspend", "plain"):
        wanted[f"{kind}_per_hook_us (K=1->100)"] = (hooked_name(kind, 100), hooked_name(kind, 1), 1 / 99)
    for kind in ("async", "plain"):
        wanted[f"fetch_{kind}_extra_per_hook_us"] = (f"fetch_{kind}_10", hooked_name(kind, 10), 1 / 10)
    for k in (0, 10):
        wanted[f"recovery_wrapper_us (K={k})"] = (hooked_name("async", k), f"singular_async_{k}", 1.0)
    for k in (10, 100):
        wanted[f"async_{k} above probe_ctx_send_{k}"] = (hooked_name("async", k), f"probe_ctx_send_{k}", 1.0)
        wanted[f"plain_{k} above probe_sync_calls_{k}"] = (hooked_name("plain", k), f"probe_sync_calls_{k}", 1.0)
    out = {
        name: m.derive(_difference(a, b, scale))
        for name, (a, b, scale) in wanted.items()
        if a in m.steps and b in m.steps
    }
    for kind in ("async", "plain"):
        for k in HOOK_COUNTS:
            _add_ratio(out, m, f"{kind}_{k} / ref_{kind}_{k}", (hooked_name(kind, k), BASELINE), (f"ref_{kind}_{k}", BASELINE))
    for k in HOOK_COUNTS:
        _add_ratio(out, m, f"async_{k} / refctx_async_{k}", (hooked_name("async", k), BASELINE), (f"refctx_async_{k}", BASELINE))
        _add_ratio(out, m, f"refctx_async_{k} / ref_async_{k}", (f"refctx_async_{k}", BASELINE), (f"ref_async_{k}", BASELINE))
    _add_ratio(out, m, "fetch_async_extra / ref_fetch_async_extra", ("fetch_async_10", "async_10"), ("ref_fetch_async_10", "ref_async_10"))
    naive = "probe_naive_tg_suspend_10"
    for floor in ("probe_pool_suspend_10", "probe_pool_ctx_suspend_10", "probe_pool_native_suspend_10"):
        _add_ratio(out, m, f"suspend_10 / {floor}", ("suspend_10", BASELINE), (floor, BASELINE))
    for top in ("suspend_10", "probe_pool_ctx_suspend_10", "probe_pool_native_suspend_10"):
        _add_ratio(out, m, f"{top} / {naive}", (top, BASELINE), (naive, BASELINE))
    if "probe_seq_await_100" in m.steps:
        # 200 inline awaits; the reference figures have 9.24 us per 100 (seq_await_100, asyncio).
        out["slowdown vs the anchor figures (probe_seq_await_100 / 18.5 us)"] = m.derive(
            _difference("probe_seq_await_100", BASELINE, 1 / ANCHOR_SEQ_AWAIT_200)
        )
    return out


def _add_ratio(
    out: dict[str, Stats], m: Measurement, name: str, top: tuple[str, str], bottom: tuple[str, str]
) -> None:
    """Per round: ``(top[0] - top[1]) / (bottom[0] - bottom[1])``, if all four cases ran."""
    if not all(case in m.steps for case in (*top, *bottom)):
        return
    pairs = [(r[top[0]] - r[top[1]], r[bottom[0]] - r[bottom[1]]) for r in m.rounds]
    ratios = [a / b for a, b in pairs if b > 0]  # a round where the yardstick cost nothing says nothing
    if ratios:
        out[name] = stats(ratios)


def _step_results(m: Measurement) -> dict[str, Any]:
    return {
        "clock": m.clock,
        "bare_step_us": m.per_step(BASELINE),
        "cases": {name: _pairwise(m, name) for name in m.steps if name != BASELINE},
        "derived": _derived(m),
    }


async def _step_round(cfg: dict[str, Any], only: list[str] | None, into: Measurement, log: Logger) -> None:
    cases = step_cases()
    if only:
        cases = [c for c in cases if c.name == BASELINE or any(word in c.name for word in only)]
    await measure(cases, 1, cfg["sample_ms"], log, into, into.clock)


async def _concurrency_suite(cfg: dict[str, Any], log: Logger) -> dict[str, Any]:
    cases = concurrency_cases(cfg["conc_steps"])
    m = await measure(cases, cfg["conc_rounds"], 0.0, log)
    floor = cases[0].name
    return {
        c.name: {
            "steps": m.steps[c.name],
            "step_ms": m.per_step(c.name, scale=1 / 1000),
            "ratio_to_floor": m.derive(_ratio(c.name, floor)),
        }
        for c in cases
    }


async def _memory_suite(cfg: dict[str, Any], log: Logger) -> dict[str, Any]:
    out = {}
    for name, (make_hooks, steps) in workloads(cfg["memory_steps"]).items():
        log(f"memory: {name}, {steps:,} steps")
        out[name] = await memory_run(make_hooks, steps)
    return out


def _logger(args: argparse.Namespace, backend: str) -> Logger:
    def log(message: str) -> None:
        if not args.quiet:
            print(f"[{backend}] {message}", file=sys.stderr, flush=True)

    return log


def _on(backend: str, fn: Callable[..., Awaitable[T]], *fn_args: Any) -> T:
    """``anyio.run(fn, *fn_args)`` on ``backend`` (a key of ``BACKENDS``)."""
    name, options = BACKENDS[backend]
    return anyio.run(fn, *fn_args, backend=name, backend_options=options)


# -- the whole run ------------------------------------------------------------------------


def _backends(spec: str) -> list[str]:
    chosen = [b.strip() for b in spec.split(",") if b.strip()]
    for backend in chosen:
        if backend not in BACKENDS:
            raise SystemExit(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    return chosen


def measure_steps(args: argparse.Namespace, cfg: dict[str, Any], backends: list[str], skipped: dict[str, str]) -> dict[str, Measurement]:
    """The µs-scale cases: round r of every backend runs before round r + 1 of any,
    so that slow drift of the (shared) machine hits every backend alike."""
    only = args.only.split(",") if args.only else None
    measurements = {b: Measurement(args.clock) for b in backends}
    for _ in range(cfg["rounds"]):
        for backend in list(measurements):
            try:
                _on(backend, _step_round, cfg, only, measurements[backend], _logger(args, backend))
            except ImportError as exc:
                skipped[backend] = f"skipped: {exc}"
                del measurements[backend]
    return measurements


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure everything asked for; return the result document."""
    started = time.perf_counter()
    cfg = settings(args)
    pinned = pin_cpu(args.pin)
    meta = machine_info()
    meta.update(pinned_cpus=pinned, argv=sys.argv[1:], quick=args.quick, clock=args.clock, hook_counts=list(HOOK_COUNTS))
    skipped: dict[str, str] = {}
    steps = measure_steps(args, cfg, _backends(args.backends), skipped)
    backends: dict[str, dict[str, Any]] = {}
    for backend, m in steps.items():
        log = _logger(args, backend)
        data = backends[backend] = _step_results(m)
        if not args.no_concurrency:
            log("concurrency")
            data["concurrency"] = _on(backend, _concurrency_suite, cfg, log)
        if not args.no_memory:
            data["memory"] = _on(backend, _memory_suite, cfg, log)
    result: dict[str, Any] = {"meta": meta, "settings": cfg, "backends": backends, "skipped": skipped}
    if not args.no_import:
        _logger(args, "import")("timing subprocesses")
        result["import"] = import_times(cfg["import_runs"])
    result["targets"] = evaluate(result)
    meta["duration_s"] = round(time.perf_counter() - started, 1)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    emit(result, render(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
