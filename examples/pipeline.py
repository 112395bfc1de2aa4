"""An async data pipeline: each step pulls a batch, transforms it, writes it.

The input is a memory stream; when it is exhausted the step function lets
``anyio.EndOfStream`` escape, which ends the monitored session cleanly (every
hook's ``end`` runs). Two hooks: one logs throughput every few steps (a plain
function, called inline), one keeps a running total of what was written.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

import hookrun

logger = logging.getLogger("hookrun.examples.pipeline")


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


def make_step(source: MemoryObjectReceiveStream[list[int]], sink: list[list[int]]) -> Any:
    async def step(feed_dict: Mapping[Any, Any]) -> dict[str, int]:
        batch = await source.receive()  # raises EndOfStream when the input is exhausted
        doubled = [2 * x for x in batch]
        sink.append(doubled)
        return {"rows": len(doubled), "batch_sum": sum(doubled)}

    return step


async def main(batches: int = 5) -> tuple[list[list[int]], int | None]:
    send, receive = anyio.create_memory_object_stream[list[int]](max_buffer_size=batches)
    async with send:
        for i in range(batches):
            send.send_nowait(list(range(i, i + 3)))
    written: list[list[int]] = []

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(make_step(receive, written))

    total = RunningTotal()
    async with receive, hookrun.MonitoredSession(create, [ThroughputLogger(), total]) as sess:
        while not sess.should_stop():
            await sess.run()
    print(f"wrote {len(written)} batches, total {total.final}")
    return written, total.final


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    anyio.run(main)
