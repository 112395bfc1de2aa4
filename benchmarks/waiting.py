"""The step that waits, run on demand: what K no-op hooks add to a step whose raw run sleeps.

    python -m benchmarks.waiting [--quick] [--backends asyncio,trio] [--peers pluggy,ignite] [--json PATH]

A step that waits (a remote round trip, an HTTP call, a queue) runs the hooks with
caches a millisecond cold, where they cost more than in a tight loop. Every case
(``_waiting_cases.py``) steps a raw session whose run sleeps ``--sleep-ms`` and
times its own sleep; a case's figure for one step is the step's wall time minus
that wait, minus the bare loop's (``await raw.run()`` alone) in the same round, in
µs. A round is one step of every case, all cases open side by side in one event
loop, in an order shuffled from round to round (a step runs after a random one of
the others: in a fixed or rotating order each case would mostly follow the same
neighbour, and what that neighbour left in the caches biases its figure); the
rounds are run in chunks that alternate between the backends, each chunk opening
the cases anew; of each pair of sessions that differ only in their statistics, even
chunks open the one with statistics first and odd chunks the other (the first one
opened runs a few per cent apart from the second, the same way in every run). The
figure is the median over the rounds. Ignite, a synchronous loop, is stepped in blocks of ``IGNITE_BLOCK``
steps instead (its figure is per step over its own bare loop, on no event loop).

Cases: the hand-written loop, pluggy and Ignite when installed, and hookrun's
``MonitoredSession`` with K plain and K async no-op hooks, statistics on (the
default) and off, for each K of ``--hooks``. Targets, with the statistics on: async
hooks at most 1.0x pluggy at K = 1 and 10, plain hooks at most 0.5x pluggy at every
K, the statistics at most 10 % of what the hooks cost (on over off, minus one).
Like the other benchmarks the JSON goes to stdout and the table to stderr, or the
JSON to ``--json PATH`` and the table to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

import anyio

from ._harness import emit, machine_info, pin_cpu
from ._waiting_cases import Copies, Stepper, ignite_steppers, open_cases
from ._waiting_probes import open_probes
from .report import fmt

__all__ = ["main"]

#: Rows of the table: (label, case prefix).
ROWS = (
    ("hand-written loop", "loop"),
    ("pluggy, two hook calls", "pluggy"),
    ("hookrun plain, statistics on", "plain_on"),
    ("hookrun async, statistics on", "async_on"),
    ("hookrun plain, statistics off", "plain_off"),
    ("hookrun async, statistics off", "async_off"),
    ("hookrun async awaiting, statistics on", "awaiting_on"),
)
IGNITE_BLOCK = 50
WARM_UP = 20
#: Rounds per chunk: chunks alternate between the backends.
CHUNK = 250


async def _chunk(
    seconds: float,
    ks: Sequence[int],
    pluggy: bool,
    rounds: int,
    seed: int,
    probes: bool,
    copies: int,
    statistics_first: bool,
) -> dict[str, list[float]]:
    """``rounds`` rounds of every case (or probe), after a warm-up: per case, its µs beyond
    the bare step's, one value per round. ``statistics_first``: which session of each
    statistics on / off pair is opened first (``open_cases``)."""
    out: dict[str, list[float]] = {}
    async with contextlib.AsyncExitStack() as stack:
        cases: list[Stepper] | list[Copies]
        if probes:
            cases = await open_probes(stack, seconds)
        else:
            cases = await open_cases(stack, seconds, ks, pluggy, copies, statistics_first)
        for _ in range(WARM_UP):
            for case in cases:
                await case.step()
        gc.collect()
        order: list[Stepper | Copies] = list(cases)
        shuffle = random.Random(seed).shuffle
        for _ in range(rounds):
            shuffle(order)  # each case after a random neighbour (what it left in the caches varies)
            taken = {case.name: await case.step() for case in order}
            base = taken.pop("bare")
            for name, value in taken.items():
                out.setdefault(name, []).append(value - base)
    return out


def _ignite(seconds: float, ks: Sequence[int], steps: int) -> dict[str, list[float]]:
    """Ignite's per-step µs over its bare loop, one value per block."""
    blocks = ignite_steppers(seconds, ks)
    for block in blocks.values():
        block(5)  # warm-up
    names = list(blocks)
    out: dict[str, list[float]] = {name: [] for name in blocks if name != "ignite_bare"}
    for r in range(max(2, steps // IGNITE_BLOCK)):
        s = r % len(names)
        taken = {name: blocks[name](IGNITE_BLOCK) for name in (*names[s:], *names[:s])}
        base = taken.pop("ignite_bare")
        for name, value in taken.items():
            out[name].append(value - base)
    return out


def _summary(values: Sequence[float]) -> dict[str, float]:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "p25": q[0], "p75": q[2], "n": len(values)}


def verdicts(backends: dict[str, dict[str, Any]], ks: Sequence[int]) -> dict[str, dict[str, Any]]:
    """The targets, on medians: async over pluggy, plain over pluggy, statistics share."""
    out: dict[str, dict[str, Any]] = {}

    def verdict(name: str, value: float, target: float) -> None:
        out[name] = {"target": f"<= {target}", "median": value, "met": value <= target}

    for backend, rows in backends.items():
        med = {name: s["median"] for name, s in rows.items()}
        for k in ks:
            if f"pluggy_{k}" in med:
                pluggy = max(med[f"pluggy_{k}"], 1e-3)
                if k <= 10:
                    verdict(f"async_over_pluggy_{k}_{backend}", med[f"async_on_{k}"] / pluggy, 1.0)
                verdict(f"plain_over_pluggy_{k}_{backend}", med[f"plain_on_{k}"] / pluggy, 0.5)
            for kind in ("plain", "async"):
                off = max(med[f"{kind}_off_{k}"], 1e-3)
                verdict(f"statistics_{kind}_{k}_{backend}", med[f"{kind}_on_{k}"] / off - 1.0, 0.10)
    return out


def render(result: dict[str, Any]) -> str:
    meta, ks = result["meta"], result["hook_counts"]
    lines = [
        f"waiting - {meta['date']} - Python {meta['python']} - {meta['rounds']} rounds of a {meta['sleep_ms']} ms wait"
        f" - load average {meta['load_average']}",
        "per-step us beyond the wait, over the bare step, median [p25-p75]",
    ]
    lines += [f"skipped {peer}: {why}" for peer, why in result["skipped"].items()]
    header = "case".ljust(32) + "".join(
        f"{f'K={k} {b}':>22}" for k in ks for b in result["backends"]
    )
    lines.append(header)
    for label, prefix, cells in _rows(result):
        lines.append(label.ljust(32) + "".join(f"{c:>22}" for c in cells))
        del prefix
    lines += [
        f"  target {name} {v['target']}: {fmt(v['median'])} -> {'met' if v['met'] else 'MISSED'}"
        for name, v in result["targets"].items()
    ]
    return "\n".join(lines)


def _rows(result: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    ks, rows = result["hook_counts"], []
    ignite = result.get("ignite")
    for label, prefix in ROWS:
        if prefix == "pluggy" and not any(f"pluggy_{ks[0]}" in data for data in result["backends"].values()):
            continue  # not asked for, or not installed
        cells = [
            fmt(data[f"{prefix}_{k}"]["median"]) for k in ks for data in result["backends"].values()
        ]
        rows.append((label, prefix, cells))
        if prefix == "pluggy" and ignite:
            rows.append(
                (
                    "Ignite (sync step)",
                    "ignite",
                    [fmt(ignite[f"ignite_{k}"]["median"]) for k in ks for _ in result["backends"]],
                )
            )
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The table in Markdown (what ``docs/benchmarks.md`` shows)."""
    meta, ks, backends = result["meta"], result["hook_counts"], list(result["backends"])
    lines = [
        f"Measured {meta['date']}: Python {meta['python']}; {meta['rounds']} rounds of a {meta['sleep_ms']} ms wait; "
        f"pinned to {meta['pinned_cpus']}; load average {meta['load_average'][0]:.2f}; run took {meta['duration_s']} s.",
        "",
        "| case | " + " | ".join(f"K={k} {' / '.join(backends)}" for k in ks) + " |",
        "|---|" + "---|" * len(ks),
    ]
    for label, prefix, cells in _rows(result):
        per_k = [cells[i * len(backends) : (i + 1) * len(backends)] for i in range(len(ks))]
        if prefix == "ignite":
            per_k = [[c[0]] for c in per_k]
        lines.append(f"| {label} | " + " | ".join(" / ".join(c) for c in per_k) + " |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.waiting", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--backends", default="asyncio,trio")
    p.add_argument("--hooks", default="1,10,100", help="comma-separated hook counts K")
    p.add_argument("--peers", default="pluggy,ignite", help="comma-separated: pluggy,ignite")
    p.add_argument(
        "--rounds",
        type=int,
        help="rounds (steps of each case) per backend (default 1000, --quick 24)",
    )
    p.add_argument("--sleep-ms", type=float, default=1.3, help="the raw run's wait")
    p.add_argument(
        "--copies", type=int, default=1, help="copies of each case, stepped in turn (default 1)"
    )
    p.add_argument(
        "--probes",
        action="store_true",
        help="time the pieces of a step instead (_waiting_probes.py)",
    )
    p.add_argument("--quick", action="store_true", help="a smoke run: few rounds, a short wait")
    p.add_argument(
        "--json", metavar="PATH", help="write the JSON here (the table then goes to stdout)"
    )
    p.add_argument(
        "--pin", action=argparse.BooleanOptionalAction, default=True, help="pin to the last CPU"
    )
    p.add_argument(
        "--markdown", metavar="JSON", help="only print the Markdown table of a saved result"
    )
    args = p.parse_args(argv)
    if args.rounds is None:
        args.rounds = 24 if args.quick else 1000
    if args.rounds < 1 or args.copies < 1:
        p.error("--rounds and --copies must be >= 1")
    if not 0 <= args.sleep_ms < math.inf:  # NaN fails too
        p.error("--sleep-ms must be a finite number >= 0")
    if args.quick:
        args.sleep_ms = min(args.sleep_ms, 0.2)
    return args


def _has(module: str) -> str | None:
    try:
        __import__(module)
    except ImportError as exc:
        return f"{module} is not installed ({exc})"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.markdown:
        with open(args.markdown, encoding="utf-8") as f:
            print(markdown(json.load(f)))
        return 0
    started, pinned = time.perf_counter(), pin_cpu(args.pin)
    ks, seconds = [int(k) for k in args.hooks.split(",")], args.sleep_ms / 1000.0
    wanted = {p.strip() for p in args.peers.split(",") if p.strip()}
    skipped = {
        peer: why
        for peer, module in (("pluggy", "pluggy"), ("ignite", "ignite.engine"))
        if peer in wanted and (why := _has(module)) is not None
    }
    pluggy = "pluggy" in wanted and "pluggy" not in skipped
    backends = args.backends.split(",")
    raw: dict[str, dict[str, list[float]]] = {b: {} for b in backends}
    chunk = min(CHUNK, args.rounds)
    for number, first in enumerate(range(0, args.rounds, chunk)):
        for backend in backends:
            rounds = min(chunk, args.rounds - first)
            statistics_first = number % 2 == 0  # the on / off sessions opened in turn in either order
            got = anyio.run(
                _chunk, seconds, ks, pluggy, rounds, first, args.probes, args.copies, statistics_first,
                backend=backend,
            )
            for name, values in got.items():
                raw[backend].setdefault(name, []).extend(values)
    if args.probes:
        document = {b: {name: _summary(v) for name, v in cases.items()} for b, cases in raw.items()}
        print(json.dumps(document, indent=2))
        return 0
    result: dict[str, Any] = {
        "hook_counts": ks,
        "skipped": skipped,
        "backends": {
            b: {name: _summary(v) for name, v in cases.items()} for b, cases in raw.items()
        },
    }
    if "ignite" in wanted and "ignite" not in skipped:
        result["ignite"] = {
            name: _summary(v) for name, v in _ignite(seconds, ks, args.rounds).items()
        }
    result["targets"] = verdicts(result["backends"], ks)
    meta = machine_info(("anyio", "trio", "hookrun", "pluggy", "pytorch-ignite", "torch"))
    meta.update(
        pinned_cpus=pinned,
        rounds=args.rounds,
        sleep_ms=args.sleep_ms,
        copies=args.copies,
        quick=args.quick,
        duration_s=round(time.perf_counter() - started, 1),
    )
    result = {"meta": meta, **result}
    emit(result, render(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
