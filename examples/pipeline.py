"""An async data pipeline: each step takes a batch from the input, transforms it, writes it.

The input is a memory stream (any async iterable works: a queue reader, a
file, a message broker); an async generator turns each batch into a feed
dict, and ``iterate`` runs one step per feed. When the input is exhausted the
loop ends and the monitored session closes cleanly (every hook's ``end`` runs).
Two hooks: one logs the row count every few steps (a plain method, called
inline), one keeps a running total of what was written.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

import hookrun

logger = logging.getLogger("hookrun.examples.pipeline")


# --8<-- [start:hooks]
class ThroughputLogger(hookrun.SessionRunHook):
    """Logs the number of rows every ``every`` steps (a plain, inline hook)."""

    def __init__(self, every: int = 2) -> None:
        self.every = every
        self.lines: list[str] = []

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs("rows")

    def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        if run_values.global_step % self.every == 0:
            line = f"step {run_values.global_step}: {run_values.results} rows"
            self.lines.append(line)
            logger.info(line)


class RunningTotal(hookrun.SessionRunHook):
    """Fetches each batch's sum and keeps the total; reports it at the end."""

    def __init__(self) -> None:
        self.total = 0
        self.final: int | None = None

    async def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs({"sum": "batch_sum"})

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        self.total += run_values.results["sum"]

    async def end(self, session: Any) -> None:
        self.final = self.total
# --8<-- [end:hooks]


# --8<-- [start:pipeline]
def make_step(sink: list[list[int]]) -> Callable[[Mapping[str, Any]], Any]:
    async def step(feed_dict: Mapping[str, Any]) -> dict[str, int]:
        doubled = [2 * x for x in feed_dict["batch"]]
        sink.append(doubled)  # "write" the batch
        return {"rows": len(doubled), "batch_sum": sum(doubled)}

    return step


async def feeds(source: MemoryObjectReceiveStream[list[int]]) -> AsyncIterator[dict[str, list[int]]]:
    async for batch in source:  # ends when the sender closes
        yield {"batch": batch}


async def main(batches: int = 5) -> tuple[list[list[int]], int | None]:
    send, receive = anyio.create_memory_object_stream[list[int]](max_buffer_size=batches)
    async with send:
        for i in range(batches):
            send.send_nowait(list(range(i, i + 3)))
    written: list[list[int]] = []

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(make_step(written))

    total = RunningTotal()
    async with receive, hookrun.MonitoredSession(create, [ThroughputLogger(), total]) as sess:
        async for _ in sess.iterate(feeds=feeds(receive)):
            pass
    print(f"wrote {len(written)} batches, total {total.final}")
    return written, total.final
# --8<-- [end:pipeline]


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)  # without it the hook's log lines do not show
    anyio.run(main)
