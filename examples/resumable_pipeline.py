"""A pipeline that survives being killed: restarted, it finishes with every item's output
present exactly once.

The source is a list of keyed items; each step reads the item at the session's
offset, transforms it and writes the result to an idempotent sink: one file
per item, named by its key and written atomically, so writing it again
changes nothing. The session is checkpointable (its state is the source
offset), and ``MonitoredTrainingSession`` saves a checkpoint after every step
and restores the latest valid one when it starts. A restarted run therefore
continues from the last checkpointed offset; the few items processed after
that checkpoint and before the crash are processed again, and their outputs
rewritten with the same bytes.

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


class PipelineSession:
    """Each run processes the item at ``offset``; the source's end is a clean stop.

    Checkpointable: ``state_dict`` / ``load_state_dict`` carry the offset.
    """

    def __init__(self, items: Sequence[str], sink: FileSink, delay: float) -> None:
        self.items = items
        self.sink = sink
        self.delay = delay
        self.offset = 0

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any], options: Any, run_metadata: Any
    ) -> list[Any]:
        if self.offset >= len(self.items):
            raise hookrun.OutOfRangeError("the source is exhausted")
        key = self.items[self.offset]
        if self.delay:
            await anyio.sleep(self.delay)  # stands for real work
        await self.sink.put(key, transform(key))
        self.offset += 1
        produced: dict[Hashable, object] = {"key": key, "offset": self.offset}
        return [produced[name] for name in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"offset": self.offset}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.offset = state["offset"]


async def main(workdir: Path, items: int = 50, delay: float = 0.0, verbose: bool = False) -> dict[str, str]:
    """Process ``items`` items (resuming from ``workdir``'s checkpoints); return the outputs."""
    keys = [f"item-{i:05d}" for i in range(items)]
    sink = FileSink(workdir / "outputs")
    session = hookrun.MonitoredTrainingSession(
        lambda: PipelineSession(keys, sink, delay),
        checkpoint_dir=workdir / "checkpoints",
        save_checkpoint_steps=1,
        log_step_count_steps=0,
    )
    async with session:
        if verbose:
            print(f"resumed at offset {await session.step_counter.get()}", flush=True)
        while not session.should_stop():
            key = await session.run("key")
            if verbose:
                print(f"processed {key}", flush=True)
    return sink.contents()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds of work per item")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    outputs = anyio.run(main, args.workdir, args.items, args.delay, True, backend=args.backend)
    print(f"finished: {len(outputs)} outputs", flush=True)
