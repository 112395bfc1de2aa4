"""An async data pipeline over a local Dask cluster: async source, remote transform, idempotent sink.

Items come from an async generator; each step sends one item to a Dask worker
(``DaskStepSession``: one task per step, never served from Dask's cache) and the
result goes to a sink keyed by item id, so writing an item twice changes nothing.
A progress bar and a step counter hook watch the run, and a checkpoint saver keeps
the source's cursor (the next item to read) every 10 steps and at the end, so a
pipeline started again with the same checkpoint directory resumes where the last
one stopped. One worker is killed in the middle of the transform of item
``lose_at`` (a stand-in for a lost machine): the scheduler runs that task again on
the other worker, and the pipeline ends with every item processed exactly once.

With ``--in-flight N`` the session keeps up to N items in flight (``max_in_flight``:
N lanes, each with its own ``DaskStepSession``), so N transforms can run at once on
the cluster's workers; results still come back in the source's order, so the sink
and the cursor see the same sequence as with one. ``--work-ms`` makes each transform
take that long on its worker (a stand-in for real work).

Run it with ``python -m examples.dask_pipeline`` (it starts a ``LocalCluster`` of
``--workers`` worker processes, 2 by default, on 127.0.0.1 unless given ``--address``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import tempfile
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

import hookrun
from hookrun.dask import DaskStepSession
from hookrun.hooks import CheckpointSaverHook, ProgressBarHook, StepCounterHook


def transform(feed: Mapping[str, Any]) -> dict[str, Any]:
    """The remote step: count the words of one item (and lose the worker once, mid-step)."""
    if feed.get("work_s"):
        time.sleep(feed["work_s"])  # the work of one item: its worker's thread is busy
    marker = feed.get("lose_marker")
    if marker and _first(marker):
        os.kill(os.getpid(), signal.SIGKILL)  # the worker is gone in the middle of this task
    text = feed["text"]
    return {"id": feed["id"], "words": len(text.split()), "worker": os.getpid()}


def _first(marker: str) -> bool:
    """True for the one caller that creates ``marker`` (atomically: a re-run of the task,
    on another worker, finds it made)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


@dataclass
class Cursor:
    """The source's position, saved with every checkpoint (``hookrun.Checkpointable``)."""

    next: int = 0
    checkpoint_key = "source"

    def state_dict(self) -> dict[str, int]:
        return {"next": self.next}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.next = int(state["next"])


async def source(count: int, start: int = 0) -> AsyncGenerator[dict[str, Any], None]:
    """The async input: items with ids ``start``..count-1."""
    for number in range(start, count):
        await anyio.lowlevel.checkpoint()  # a real source would await I/O here
        yield {"id": number, "text": " ".join(["word"] * (number % 7 + 1))}


@dataclass
class Sink:
    """An idempotent sink: rows keyed by item id (writing an item again overwrites it).

    It notes when its first and its last write came, for ``items_per_second``.
    """

    rows: dict[int, int] = field(default_factory=dict)
    writes: int = 0
    first_write: float | None = None
    last_write: float | None = None

    async def write(self, item_id: int, words: int) -> None:
        await anyio.lowlevel.checkpoint()  # a real sink would await I/O here
        self.writes += 1
        self.rows[item_id] = words
        self.last_write = time.perf_counter()
        if self.first_write is None:
            self.first_write = self.last_write

    def items_per_second(self) -> float | None:
        """Writes per second from the first write to the last: the pipeline's rate once
        it runs (its clients connected, its lanes made), or ``None`` before two writes."""
        if self.first_write is None or self.last_write is None or self.last_write <= self.first_write:
            return None
        return (self.writes - 1) / (self.last_write - self.first_write)


async def _feeds(
    items: AsyncGenerator[dict[str, Any], None], work_s: float, marker: str, lose_at: int | None
) -> AsyncGenerator[dict[str, Any], None]:
    """The feed of each item's step: the item, its work and the marker of the lost worker."""
    async with contextlib.aclosing(items):
        async for item in items:
            yield {**item, "work_s": work_s, "lose_marker": marker if item["id"] == lose_at else None}


# --8<-- [start:run]
async def run_pipeline(
    address: str,
    items: int,
    lose_at: int | None,
    checkpoint_dir: Path | None = None,
    sink: Sink | None = None,
    *,
    in_flight: int = 1,
    work_s: float = 0.0,
) -> Sink:
    """Push every item of the source, from the cursor of the latest checkpoint in
    ``checkpoint_dir`` (a temporary directory unless given) on, through the cluster at
    ``address`` into a sink, with up to ``in_flight`` items in flight, each transform
    taking ``work_s`` seconds on its worker."""
    if checkpoint_dir is None:
        with tempfile.TemporaryDirectory() as scratch:
            return await run_pipeline(
                address, items, lose_at, Path(scratch), sink, in_flight=in_flight, work_s=work_s
            )
    sink = Sink() if sink is None else sink
    cursor = Cursor()
    latest = await hookrun.Checkpointer(checkpoint_dir).restore()
    if latest is not None:
        cursor.load_state_dict(latest.state["hooks"]["source"])

    async def create() -> DaskStepSession:
        return DaskStepSession(transform, address=address)  # its own client, closed with it

    hooks = [
        ProgressBarHook(total=items, desc="items"),  # a bar on a terminal, else log lines
        StepCounterHook(every_n_steps=10),
        CheckpointSaverHook(checkpoint_dir, save_steps=10, checkpointables=[cursor]),
    ]
    counter = hookrun.LocalStepCounter(latest.step if latest is not None else 0)
    with tempfile.TemporaryDirectory() as scratch:
        marker = str(Path(scratch) / "worker-lost")
        feeds = _feeds(source(items, cursor.next), work_s, marker, lose_at)
        session = hookrun.MonitoredSession(create, hooks, step_counter=counter, max_in_flight=in_flight)
        async with contextlib.aclosing(feeds), session:
            # One lane per item in flight; the results come in the source's order.
            async for item_id, words in session.iterate(["id", "words"], feeds):
                await sink.write(item_id, words)
                cursor.next = item_id + 1  # saved by the next checkpoint
    return sink
# --8<-- [end:run]


async def main(
    items: int = 40,
    *,
    address: str | None = None,
    lose_at: int | None = 10,
    checkpoint_dir: Path | None = None,
    workers: int = 2,
    in_flight: int = 1,
    work_s: float = 0.0,
) -> Sink:
    """Run the pipeline (on a fresh LocalCluster of ``workers`` workers unless ``address``
    is given), resuming from ``checkpoint_dir`` (a temporary directory unless given)."""
    run = functools.partial(run_pipeline, checkpoint_dir=checkpoint_dir, in_flight=in_flight, work_s=work_s)
    if address is not None:
        return await run(address, items, lose_at)
    from distributed import LocalCluster

    start = functools.partial(
        LocalCluster, n_workers=workers, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    )
    cluster = await anyio.to_thread.run_sync(start)
    try:
        sink = await run(cluster.scheduler_address, items, lose_at)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(cluster.close)
    return sink


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--address")
    parser.add_argument("--workers", type=_positive, default=2, help="workers of the LocalCluster started")
    parser.add_argument("--in-flight", type=_positive, default=1, help="items in flight at once (lanes)")
    parser.add_argument("--work-ms", type=float, default=0.0, help="milliseconds of work per item, on its worker")
    parser.add_argument("--backend", default="asyncio")
    options = parser.parse_args()
    run = functools.partial(
        main, options.items, address=options.address, workers=options.workers,
        in_flight=options.in_flight, work_s=options.work_ms / 1000,
    )
    sink = anyio.run(run, backend=options.backend)
    rate = sink.items_per_second()
    print(
        f"{len(sink.rows)} items written, {sink.writes} writes, {sum(sink.rows.values())} words"
        + (f", {rate:.1f} items/s" if rate is not None else "")
    )
