"""A pipeline that survives being killed: restarted, it finishes with every item's output
present exactly once.

The source is a list of keyed items, and up to four of them are in flight at
once (``max_in_flight=4``: four lanes, each with its own session). Each step
transforms the item it is fed and writes the result to an idempotent sink: one
file per item, named by its key and written atomically, so writing it again
changes nothing. ``MonitoredTrainingSession`` saves a checkpoint after every
step and restores the latest valid one when it starts. Steps end in any order,
but a checkpoint is only taken at step n once steps 1..n are done, so its global
step counts the items whose outputs are written: a restarted run feeds the items
from there on. The few items processed after that checkpoint and before the
crash (those in flight, and those whose checkpoint was still being written) are
processed again, and their outputs rewritten with the same bytes.

Run it, kill it (``kill -9``), run it again::

    python -m examples.resumable_pipeline /tmp/pipeline --items 200 --delay 0.02
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

import hookrun


def transform(key: str) -> str:
    """The work done on one item."""
    return key.upper()[::-1]


class FileSink:
    """Writes each item's output to ``<directory>/<key>``, atomically: idempotent by key."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _write(self, key: str, value: str) -> None:
        temporary = self.directory / f".{key}.tmp"
        temporary.write_text(value)
        os.replace(temporary, self.directory / key)

    async def put(self, key: str, value: str) -> None:
        await anyio.to_thread.run_sync(self._write, key, value)

    def contents(self) -> dict[str, str]:
        """Every output written, by key."""
        return {path.name: path.read_text() for path in self.directory.iterdir() if not path.name.startswith(".")}


# --8<-- [start:session]
class PipelineSession:
    """The session of one lane: each run transforms the item it is fed and writes it."""

    def __init__(self, sink: FileSink, delay: float) -> None:
        self.sink = sink
        self.delay = delay

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any], options: Any, run_metadata: Any
    ) -> list[Any]:
        key = feed_dict["key"]
        if self.delay:
            await anyio.sleep(self.delay)  # stands for real work
        await self.sink.put(key, transform(key))
        produced: dict[Hashable, object] = {"key": key}
        return [produced[name] for name in fetches]
# --8<-- [end:session]


# --8<-- [start:main]
async def main(
    workdir: Path, items: int = 50, delay: float = 0.0, verbose: bool = False, in_flight: int = 4
) -> dict[str, str]:
    """Process ``items`` items, ``in_flight`` at a time (resuming from ``workdir``'s
    checkpoints); return the outputs."""
    keys = [f"item-{i:05d}" for i in range(items)]
    sink = FileSink(workdir / "outputs")
    session = hookrun.MonitoredTrainingSession(
        lambda: PipelineSession(sink, delay),  # called once per lane
        checkpoint_dir=workdir / "checkpoints",
        save_checkpoint_steps=1,
        log_step_count_steps=0,
        max_in_flight=in_flight,
    )
    async with session:
        done = await session.step_counter.get()  # restored: the items already written
        if verbose:
            print(f"resumed at offset {done}", flush=True)
        async for (key,) in session.iterate(["key"], ({"key": key} for key in keys[done:])):
            if verbose:
                print(f"processed {key}", flush=True)
    return sink.contents()
# --8<-- [end:main]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds of work per item")
    parser.add_argument("--in-flight", type=_positive, default=4, help="items in flight at once (lanes)")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    outputs = anyio.run(main, args.workdir, args.items, args.delay, True, args.in_flight, backend=args.backend)
    print(f"finished: {len(outputs)} outputs", flush=True)
