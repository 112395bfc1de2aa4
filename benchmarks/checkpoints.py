"""Checkpoint benchmarks, run on demand: save throughput and step latency during a save.

    python -m benchmarks.checkpoints [--quick] [--mib 64] [--dir DIR] [--json PATH] [--write-nice N]

* **Save throughput**: ``Checkpointer.save(step, state)`` of a state of NumPy arrays
  (``--mib`` MiB in 8 float32 arrays, plus a few scalars), against a plain
  ``open`` / ``write`` / ``fsync`` / ``close`` of the same array bytes, both run in
  a worker thread from the event loop, in the same directory. Like the plain write,
  ``save`` writes the arrays from their own memory; it also encodes the structure,
  checksums the file (CRC-32), renames it into place, writes the index, fsyncs the
  directory and removes the checkpoint retention drops; the plain write does none
  of that. The figure is the ratio of the two throughputs, taken within each round.
  Also measured, with no target: ``encode`` + ``write``, the path of
  ``CheckpointSaverHook``, which first snapshots (copies) the arrays.
* **Step latency during a background save**: ``n`` steps of a monitored session with
  10 async no-op hooks on a session that yields to the event loop once per step (as
  awaiting a source would), while a task of the same
  event loop saves the same state again and again (every timed step overlaps a
  save), against the same steps with no save running.

Variants are interleaved in rounds in one process (the order rotates from round to
round) and every ratio is taken within a round before the median: the figures are
relative, measured side by side, not absolute claims about this machine. The JSON
goes to stdout and a table to stderr, or the JSON to ``--json PATH`` and the table
to stdout. NumPy is needed (``pip install 'hookrun[numpy]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Hashable, Mapping, Sequence
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` and ``hookrun`` importable
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [_root, os.path.join(_root, "src")]
    __package__ = "benchmarks"

import anyio
import anyio.lowlevel

from hookrun import Checkpointer, MonitoredSession, RunMetadata, RunOptions

from ._harness import Case, Measurement, Timing, clock, emit, machine_info, measure, stats, timed
from .cases import hooks_of
from .report import fmt, fmt_stats

__all__ = ["main", "make_state"]

MIB = 1 << 20
#: The arrays the state's bytes are split into.
ARRAYS = 8
#: Hooks of the pipeline whose step latency is measured.
PIPELINE_HOOKS = 10


def make_state(mib: float) -> dict[str, Any]:
    """A checkpoint state of ``mib`` MiB of float32 arrays (random, so nothing compresses)."""
    import numpy as np

    rng = np.random.default_rng(0)
    per_array = max(1, int(mib * MIB) // ARRAYS // 4)
    arrays = {f"layer{i}": rng.standard_normal(per_array, dtype=np.float32) for i in range(ARRAYS)}
    return {"weights": arrays, "epoch": 3, "source_offset": 12345, "name": "bench"}


def _array_bytes(state: dict[str, Any]) -> list[memoryview]:
    return [memoryview(array).cast("B") for array in state["weights"].values()]


def _plain_write(path: str, buffers: Sequence[memoryview]) -> None:
    """The yardstick: write the same bytes to a new file, fsync it, close it."""
    with open(path, "wb") as file:
        for buffer in buffers:
            file.write(buffer)
        file.flush()
        os.fsync(file.fileno())


def _checkpointer(directory: str, options: Mapping[str, Any]) -> Checkpointer:
    return Checkpointer(directory, max_to_keep=2, **options)


def save_cases(directory: str, state: dict[str, Any], saves: int, options: Mapping[str, Any] | None = None) -> list[Case]:
    """``save``: ``Checkpointer.save``; ``snapshot_write``: ``encode`` then ``write``;
    ``plain_write``: write + fsync of the same bytes."""
    checkpointer = _checkpointer(os.path.join(directory, "ckpt"), options or {})
    buffers = _array_bytes(state)
    plain_dir = os.path.join(directory, "plain")
    os.makedirs(plain_dir, exist_ok=True)
    steps = iter(range(1, 1 << 62))

    async def save(n: int) -> Timing:
        gc.collect()
        start = clock()
        for _ in range(n):
            await checkpointer.save(next(steps), state)
        return timed(start)

    async def snapshot_write(n: int) -> Timing:
        gc.collect()
        start = clock()
        for _ in range(n):
            await checkpointer.write(next(steps), await checkpointer.encode(state))
        return timed(start)

    async def plain(n: int) -> Timing:
        paths = [os.path.join(plain_dir, f"plain-{i}") for i in range(n)]
        gc.collect()
        start = clock()
        for path in paths:
            await anyio.to_thread.run_sync(_plain_write, path, buffers)
        elapsed = timed(start)
        for path in paths:
            os.unlink(path)
        return elapsed

    return [Case("save", save, n=saves), Case("snapshot_write", snapshot_write, n=saves), Case("plain_write", plain, n=saves)]


@contextlib.asynccontextmanager
async def _saving(checkpointer: Checkpointer, state: dict[str, Any]) -> AsyncIterator[list[int]]:
    """Save ``state`` again and again in a task of this event loop while the block runs.

    At the end of the block the save in progress is let finish (not cancelled), so
    every timed step overlapped a save and no write is cut short.
    """
    count = [0]
    started, stopping = anyio.Event(), False

    async def loop() -> None:
        step = 0
        while not stopping:
            step += 1
            started.set()
            await checkpointer.save(step, state)
            count[0] += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(loop)
        await started.wait()
        await anyio.sleep(0.01)  # the first save is under way (encoding in its thread)
        try:
            yield count
        finally:
            stopping = True


class PipelineSession:
    """A pipeline step that yields to the event loop once (as awaiting a source would)."""

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> Sequence[Hashable]:
        await anyio.lowlevel.checkpoint()
        return fetches


async def _create_pipeline() -> PipelineSession:
    return PipelineSession()


def latency_cases(
    directory: str, state: dict[str, Any], saves_done: list[int] | None = None, options: Mapping[str, Any] | None = None
) -> list[Case]:
    """``steps_idle`` and ``steps_saving``: 10-hook steps, alone and during a save.

    ``saves_done`` gets, for each ``steps_saving`` sample, the saves completed during it.
    """
    make_hooks = hooks_of("async", PIPELINE_HOOKS)
    checkpointer = _checkpointer(os.path.join(directory, "background"), options or {})
    if saves_done is None:
        saves_done = []

    async def steps(session: MonitoredSession, n: int) -> Timing:
        gc.collect()
        start = clock()
        for _ in range(n):
            if session.should_stop():
                break
            await session.run()
        return timed(start)

    async def idle(n: int) -> Timing:
        async with MonitoredSession(_create_pipeline, make_hooks()) as session:
            elapsed = await steps(session, n)
        return elapsed

    async def saving(n: int) -> Timing:
        async with (
            MonitoredSession(_create_pipeline, make_hooks()) as session,
            _saving(checkpointer, state) as count,
        ):
            elapsed = await steps(session, n)
            saves_done.append(count[0])
        return elapsed

    return [Case("steps_idle", idle, min_n=200), Case("steps_saving", saving, min_n=200)]


def loop_time_per_save(m: Measurement, saves: Sequence[int]) -> dict[str, float] | None:
    """Per round: the loop time the steps lost to saving (saving minus idle, over the
    sample), in ms per save completed during it; ``None`` if no sample saw a save end."""
    n = m.steps["steps_saving"]
    values = [
        (r["steps_saving"] - r["steps_idle"]) * n / count / 1000.0
        for r, count in zip(m.rounds, saves[-len(m.rounds):], strict=True)
        if count > 0
    ]
    return stats(values) if values else None


def summarise(m: Measurement, mib: float) -> dict[str, Any]:
    """Throughputs, latencies and the per-round ratios the targets are read from."""
    return {
        "save_mib_per_s": m.derive(lambda r: mib / (r["save"] / 1e6)),
        "plain_write_mib_per_s": m.derive(lambda r: mib / (r["plain_write"] / 1e6)),
        "save_over_plain_throughput": m.derive(lambda r: r["plain_write"] / r["save"]),
        "snapshot_write_mib_per_s": m.derive(lambda r: mib / (r["snapshot_write"] / 1e6)),
        "snapshot_write_over_plain_throughput": m.derive(lambda r: r["plain_write"] / r["snapshot_write"]),
        "step_idle_us": m.per_step("steps_idle"),
        "step_saving_us": m.per_step("steps_saving"),
        "step_saving_over_idle": m.derive(lambda r: r["steps_saving"] / r["steps_idle"]),
    }


TARGETS = {"save_over_plain_throughput": (">=", 0.5), "step_saving_over_idle": ("<=", 1.2)}


def verdicts(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for key, (op, bound) in TARGETS.items():
        median = summary[key]["median"]
        met = median >= bound if op == ">=" else median <= bound
        out[key] = {"target": f"{op} {bound}", "median": median, "met": met}
    return out


def render(result: dict[str, Any]) -> str:
    meta, s = result["meta"], result["summary"]
    lines = [
        f"checkpoints - {meta['date']} - Python {meta['python']} - {meta['rounds']} rounds, "
        f"state {meta['state_mib']} MiB, {meta['saves_per_sample']} saves per sample, dir on {meta['filesystem']}, "
        f"write_nice={meta['write_nice']}",
        "median [min-max] over rounds",
        f"  Checkpointer.save       {fmt_stats(s['save_mib_per_s'])} MiB/s",
        f"  plain write + fsync     {fmt_stats(s['plain_write_mib_per_s'])} MiB/s",
        f"  save / plain (thrpt)    {fmt_stats(s['save_over_plain_throughput'])}",
        f"  encode + write          {fmt_stats(s['snapshot_write_mib_per_s'])} MiB/s",
        f"  encode+write / plain    {fmt_stats(s['snapshot_write_over_plain_throughput'])}",
        f"  step, 10 hooks, idle    {fmt_stats(s['step_idle_us'])} us",
        f"  step, 10 hooks, saving  {fmt_stats(s['step_saving_us'])} us",
        f"  saving / idle           {fmt_stats(s['step_saving_over_idle'])}",
        f"  saves per saving sample {fmt_stats(s['saves_per_saving_sample'])}",
    ]
    if "loop_ms_lost_per_save" in s:
        lines.append(f"  loop time lost per save {fmt_stats(s['loop_ms_lost_per_save'])} ms")
    for key, v in result["targets"].items():
        lines.append(f"  target {key} {v['target']}: {fmt(v['median'])} -> {'met' if v['met'] else 'MISSED'}")
    return "\n".join(lines)


def _filesystem(path: str) -> str:
    """The type of the file system holding ``path`` (from /proc/mounts), or ``unknown``."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return "unknown"
    path, best = os.path.realpath(path), ("", "unknown")
    for fields in mounts:
        inside = len(fields) > 2 and (path == fields[1] or path.startswith(fields[1].rstrip("/") + "/"))
        if inside and len(fields[1]) > len(best[0]):
            best = (fields[1], fields[2])
    return best[1]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.checkpoints", description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=float, default=64.0, help="state size in MiB (default 64)")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--saves", type=int, default=3, help="saves (and plain writes) per sample")
    p.add_argument("--sample-ms", type=float, default=800.0, help="length of a latency sample")
    p.add_argument("--dir", help="where to write (default: a temporary directory in the system's temp dir)")
    p.add_argument("--quick", action="store_true", help="a few seconds: 4 MiB, 2 rounds, short samples")
    p.add_argument("--json", metavar="PATH", help="write the JSON here (the table then goes to stdout)")
    p.add_argument(
        "--write-nice", type=int, metavar="N",
        help="Checkpointer(write_nice=N) for both measurements (default: the library's default)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.mib, args.rounds, args.saves, args.sample_ms = min(args.mib, 4.0), 2, 1, 100.0
    if not args.mib > 0 or args.rounds < 1 or args.saves < 1:
        p.error("--mib must be > 0, --rounds and --saves >= 1")
    return args


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure, and return the result document."""
    started = time.perf_counter()
    state = make_state(args.mib)
    mib = sum(b.nbytes for b in _array_bytes(state)) / MIB
    directory = tempfile.mkdtemp(prefix="hookrun-bench-ckpt-", dir=args.dir)
    try:
        saves_done: list[int] = []
        options = {} if args.write_nice is None else {"write_nice": args.write_nice}
        cases = [
            *save_cases(directory, state, args.saves, options),
            *latency_cases(directory, state, saves_done, options),
        ]

        def log(message: str) -> None:
            print(f"[checkpoints] {message}", file=sys.stderr, flush=True)

        m = anyio.run(measure, cases, args.rounds, args.sample_ms, log)
        filesystem = _filesystem(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    meta = machine_info(("anyio", "hookrun", "numpy", "msgspec"))
    meta.update(
        rounds=args.rounds, state_mib=round(mib, 3), saves_per_sample=args.saves, filesystem=filesystem,
        write_nice=inspect.signature(Checkpointer).parameters["write_nice"].default
        if args.write_nice is None else args.write_nice,
        quick=args.quick, duration_s=round(time.perf_counter() - started, 1),
    )
    summary = summarise(m, mib)
    summary["saves_per_saving_sample"] = stats([float(count) for count in saves_done[-len(m.rounds):]])
    lost = loop_time_per_save(m, saves_done)
    if lost is not None:
        summary["loop_ms_lost_per_save"] = lost
    return {
        "meta": meta,
        "steps": m.steps,
        "per_step_us": {name: m.per_step(name) for name in m.steps},
        "cpu_share": {name: m.share(name) for name in m.steps},
        "summary": summary,
        "targets": verdicts(summary),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    emit(result, render(result), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
