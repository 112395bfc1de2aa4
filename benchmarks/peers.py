"""Peers, run on demand: the same K no-op hooks on TensorFlow, Ignite and pluggy,
next to hookrun's figures measured in the same process and the same rounds.

    python -m benchmarks.peers [--peers tf,ignite,pluggy] [--json PATH]

* TensorFlow: ``tf.compat.v1.train.MonitoredSession`` in graph mode with K
  ``SessionRunHook``s overriding ``before_run`` and ``after_run``, running
  ``y = placeholder_with_default(1.0) + 1`` with 1 inter-op and 1 intra-op thread;
  baseline: a raw ``Session.run(y)`` on its own graph and session.
* PyTorch Ignite: ``Engine.run`` over a list of ints with K no-op handlers on each
  of ``ITERATION_STARTED`` and ``ITERATION_COMPLETED``; baseline: a bare loop
  calling the same process function (``run``'s set-up is amortised over >= 2000
  iterations).
* pluggy: a ``before_run`` and an ``after_run`` hook call with K implementations;
  no baseline (the whole two calls).
* hookrun (on ``--backend``, asyncio by default): async and plain-function no-op
  hooks, over the bare step; and the floor of the async column: what a step of K
  async no-op hooks does at the least with hookrun's guarantees (each hook's
  coroutine created and awaited in place in a copied context, and one cancel scope
  around both phases when a phase has more than one async hook), with no dispatcher.

Each peer is optional (``pip install tensorflow-cpu pytorch-ignite pluggy`` with the
CPU torch); a missing one is reported and skipped. Like ``python -m benchmarks``,
the JSON goes to stdout and the table to stderr, or the JSON to ``--json PATH``
and the table to stdout.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

import anyio

from ._harness import (
    CLOCKS,
    Case,
    Measurement,
    RoundFn,
    Timing,
    clock,
    emit,
    machine_info,
    measure,
    pin_cpu,
    timed,
)
from .cases import BASELINE, async_floor_case, bare_step, hooked_step, hooks_of
from .report import DASH, fmt, fmt_stats

__all__ = ["main"]

PEERS = ("tf", "ignite", "pluggy")
Sampler = Callable[[int], Coroutine[Any, Any, Timing]]


def _optional(module: str, install: str) -> Any:
    """Import ``module`` or raise ``ImportError`` with the install hint."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is not installed ({exc}); pip install {install}") from exc


def _loop(step: Callable[[], object]) -> Sampler:
    """A sampler timing ``n`` calls of ``step``."""

    async def sample(n: int) -> Timing:
        gc.collect()
        start = clock()
        for _ in range(n):
            step()
        return timed(start)

    return sample


# -- TensorFlow ---------------------------------------------------------------------------


def tf_cases(ks: Sequence[int]) -> list[Case]:
    """``tf_raw_run`` and ``tf_ms_K``: one graph and one open session per case."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = _optional("tensorflow", "tensorflow-cpu")
    v1 = tf.compat.v1
    hook_type = type(
        "NoopHook",
        (v1.train.SessionRunHook,),
        {"before_run": lambda self, run_context: None, "after_run": lambda self, run_context, run_values: None},
    )

    def config() -> Any:
        return v1.ConfigProto(inter_op_parallelism_threads=1, intra_op_parallelism_threads=1)

    def graph() -> tuple[Any, Any]:
        g = tf.Graph()
        with g.as_default():
            y = v1.placeholder_with_default(1.0, shape=[]) + 1
        return g, y

    g, y = graph()
    raw = v1.Session(graph=g, config=config())
    cases = [Case("tf_raw_run", _tf_loop(g, raw, y), min_n=200)]
    for k in ks:
        g, y = graph()
        with g.as_default():
            creator = v1.train.ChiefSessionCreator(config=config())
            ms = v1.train.MonitoredSession(session_creator=creator, hooks=[hook_type() for _ in range(k)])
        cases.append(Case(f"tf_ms_{k}", _tf_loop(g, ms, y), min_n=200))
    return cases


def _tf_loop(graph: Any, session: Any, fetch: Any) -> Sampler:
    """Time ``session.run(fetch)`` with ``graph`` as the default graph."""
    inner = _loop(lambda: session.run(fetch))

    async def sample(n: int) -> Timing:
        with graph.as_default():
            return await inner(n)

    return sample


# -- Ignite -------------------------------------------------------------------------------


def ignite_cases(ks: Sequence[int]) -> list[Case]:
    """``ignite_bare`` and ``ignite_K``: ``Engine.run`` over ``n`` items."""
    engine_mod = _optional("ignite.engine", "torch==2.13.0 pytorch-ignite")
    logging.getLogger("ignite").setLevel(logging.WARNING)

    def process(engine: Any, batch: int) -> None:
        return None

    cases = [Case("ignite_bare", _ignite_bare(process), min_n=2000)]
    for k in ks:
        engine = engine_mod.Engine(process)
        for _ in range(k):
            engine.add_event_handler(engine_mod.Events.ITERATION_STARTED, _noop_handler())
            engine.add_event_handler(engine_mod.Events.ITERATION_COMPLETED, _noop_handler())
        cases.append(Case(f"ignite_{k}", _ignite_run(engine), min_n=2000))
    return cases


def _noop_handler() -> Callable[[Any], None]:
    def handler(engine: Any) -> None:
        return None

    return handler


def _ignite_bare(process: Callable[[Any, int], None]) -> Sampler:
    async def sample(n: int) -> Timing:
        data = list(range(n))
        gc.collect()
        start = clock()
        for batch in data:
            process(None, batch)
        return timed(start)

    return sample


def _ignite_run(engine: Any) -> Sampler:
    async def sample(n: int) -> Timing:
        data = list(range(n))
        gc.collect()
        start = clock()
        engine.run(data, max_epochs=1)
        return timed(start)

    return sample


# -- pluggy -------------------------------------------------------------------------------


def pluggy_hook(k: int, project: str = "hookrun_bench") -> Any:
    """A pluggy hook relay with ``before_run`` and ``after_run`` specs and K no-op
    implementations (``pluggy_K`` here, and the waiting step's pluggy case)."""
    try:
        import pluggy
    except ImportError as exc:
        raise ImportError(f"pluggy is not installed ({exc}); pip install pluggy") from exc
    spec, impl = pluggy.HookspecMarker(project), pluggy.HookimplMarker(project)

    class Spec:
        @spec
        def before_run(self, run_context: object) -> None: ...

        @spec
        def after_run(self, run_context: object, run_values: object) -> None: ...

    class Plugin:
        @impl
        def before_run(self, run_context: object) -> None:
            return None

        @impl
        def after_run(self, run_context: object, run_values: object) -> None:
            return None

    pm = pluggy.PluginManager(project)
    pm.add_hookspecs(Spec)
    for i in range(k):
        pm.register(Plugin(), name=f"plugin{i}")
    return pm.hook


def pluggy_cases(ks: Sequence[int]) -> list[Case]:
    """``pluggy_K``: a before_run and an after_run call with K implementations."""
    cases = []
    for k in ks:
        hook, ctx = pluggy_hook(k), object()

        def step(hook: Any = hook, ctx: object = ctx) -> None:
            hook.before_run(run_context=ctx)
            hook.after_run(run_context=ctx, run_values=None)

        cases.append(Case(f"pluggy_{k}", _loop(step)))
    return cases


# -- hookrun ------------------------------------------------------------------------------


def hookrun_cases(ks: Sequence[int]) -> list[Case]:
    """hookrun's bare step, K async / plain no-op hooks (as in ``cases.py``) and the floor
    of the async ones."""
    cases = [Case(BASELINE, bare_step())]
    for kind in ("async", "plain"):
        cases += [Case(f"{kind}_{k}", hooked_step(hooks_of(kind, k))) for k in ks]
    return cases + [async_floor_case(k) for k in ks]


# -- the run ------------------------------------------------------------------------------


def _minus(a: str, b: str | None) -> RoundFn:
    return (lambda r: r[a] - r[b]) if b is not None else (lambda r: r[a])


#: Column name -> (case prefix, baseline case or None, what is subtracted).
COLUMNS: dict[str, tuple[str, str | None, str]] = {
    "TF MonitoredSession": ("tf_ms_", "tf_raw_run", "raw Session.run(y)"),
    "Ignite Engine": ("ignite_", "ignite_bare", "bare loop"),
    "pluggy (2 calls)": ("pluggy_", None, "nothing (the whole two calls)"),
    "hookrun async": ("async_", BASELINE, "bare step"),
    "hookrun plain": ("plain_", BASELINE, "bare step"),
    "hookrun async floor": ("floor_async_", BASELINE, "bare step"),
}


def overheads(m: Measurement, ks: Sequence[int]) -> dict[str, dict[str, Any]]:
    """Per column and K: overhead over the column's baseline, pair-wise per round."""
    out: dict[str, dict[str, Any]] = {}
    for column, (prefix, base, what) in COLUMNS.items():
        if f"{prefix}{ks[0]}" not in m.steps:
            continue
        out[column] = {
            "baseline": what,
            "baseline_us": m.per_step(base) if base else None,
            "overhead_us": {str(k): m.derive(_minus(f"{prefix}{k}", base)) for k in ks},
        }
    return out


def render(result: dict[str, Any]) -> str:
    meta, ks = result["meta"], result["hook_counts"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    lines = [
        f"peers - {meta['date']} - Python {meta['python']} - {versions}",
        f"CPU: {meta['cpu_model']}, pinned to {meta['pinned_cpus']}; backend {meta.get('backend', 'asyncio')}",
    ]
    lines += [f"skipped {peer}: {why}" for peer, why in result["skipped"].items()]
    lines.append("per-step overhead of K no-op hooks, us, median [min-max]")
    for column, data in result["overheads"].items():
        base = f" ({fmt_stats(data['baseline_us'])} us)" if data["baseline_us"] else ""
        lines.append(f"  {column} - {data['baseline']}{base}")
        for k in ks:
            lines.append(f"    K={k:<4} {fmt_stats(data['overhead_us'][str(k)])}")
    header = "K     " + "".join(f"{column:>22}" for column in result["overheads"])
    lines += ["", "medians side by side:", header]
    for k in ks:
        cells = "".join(f"{fmt(d['overhead_us'][str(k)]['median']):>22}" for d in result["overheads"].values())
        lines.append(f"{k:<6}{cells}")
    return "\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    """The side-by-side table in Markdown (what ``docs/benchmarks.md`` shows)."""
    meta, ks, columns = result["meta"], result["hook_counts"], result["overheads"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    lines = [
        f"Measured {meta['date']}: Python {meta['python']}, {versions}; {meta.get('backend', 'asyncio')}; "
        f"pinned to {meta['pinned_cpus']}; "
        f"{meta['rounds']} rounds, {meta.get('clock', 'wall')} clock; run took {meta['duration_s']} s.",
        "",
        "| K | " + " | ".join(f"{c} over {d['baseline']}" for c, d in columns.items()) + " |",
        "|" + "---|" * (len(columns) + 1),
    ]
    for k in ks:
        cells = []
        for d in columns.values():
            st = d["overhead_us"][str(k)]
            cells.append(f"{fmt(st['median'])} [{fmt(st['min'])}{DASH}{fmt(st['max'])}]")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    bases = [f"{c}: {fmt_stats(d['baseline_us'])} µs" for c, d in columns.items() if d["baseline_us"]]
    lines += ["", "Baselines per step: " + "; ".join(bases) + "."]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    p.add_argument("--peers", default=",".join(PEERS), help="comma-separated: tf,ignite,pluggy")
    p.add_argument("--hooks", default="0,1,10,100", help="comma-separated hook counts K")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--sample-ms", type=float, default=120.0)
    p.add_argument("--clock", choices=CLOCKS, default="wall", help="wall (default) or cpu (thread CPU time)")
    p.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio", help="the event loop every case runs in")
    p.add_argument("--json", metavar="PATH", help="write the JSON here (the table then goes to stdout)")
    p.add_argument("--pin", action=argparse.BooleanOptionalAction, default=True, help="pin to the last CPU")
    p.add_argument("--markdown", metavar="JSON", help="only print the Markdown table of a saved result")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        with open(args.markdown, encoding="utf-8") as f:
            print(markdown(json.load(f)))
        return 0
    started = time.perf_counter()
    pinned = pin_cpu(args.pin)
    ks = [int(k) for k in args.hooks.split(",")]
    makers = {"tf": tf_cases, "ignite": ignite_cases, "pluggy": pluggy_cases}
    cases, skipped = hookrun_cases(ks), {}
    for peer in args.peers.split(","):
        try:
            cases += makers[peer.strip()](ks)
        except ImportError as exc:
            skipped[peer] = str(exc)
            print(f"peers: skipping {peer}: {exc}", file=sys.stderr)

    def log(message: str) -> None:
        print(f"[peers] {message}", file=sys.stderr, flush=True)

    m = anyio.run(measure, cases, args.rounds, args.sample_ms, log, None, args.clock, backend=args.backend)
    meta = machine_info(("anyio", "trio", "hookrun", "tensorflow-cpu", "tensorflow", "pytorch-ignite", "torch", "pluggy"))
    meta.update(
        pinned_cpus=pinned, rounds=args.rounds, clock=args.clock, backend=args.backend,
        duration_s=round(time.perf_counter() - started, 1),
    )
    result = {
        "meta": meta,
        "hook_counts": ks,
        "skipped": skipped,
        "steps": m.steps,
        "per_step_us": {name: m.per_step(name) for name in m.steps},
        "cpu_share": {name: m.share(name) for name in m.steps},
        "overheads": overheads(m, ks),
    }
    emit(result, render(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
