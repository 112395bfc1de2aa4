"""Where a pipeline's time goes: the statistics table, a slow-hook warning, and log
records with structured fields.

A small pipeline of 40 steps with three hooks, one of them slow on purpose (it
"uploads" metrics every step). At the end it prints ``session.statistics()``: the
steps, the sessions, and every hook's calls and latency per phase. The slow hook
is also logged once, as a WARNING whose record carries ``step``, ``hook`` and
``phase`` fields, which the JSON formatter below prints.

Run it: ``python examples/observability.py``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TextIO

import anyio

import hookrun
from hookrun.hooks import StepCounterHook, on_after_run


# --8<-- [start:json-logs]
class JsonFormatter(logging.Formatter):
    """One JSON object per record, with hookrun's structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps({
            "level": record.levelname,
            "message": record.getMessage(),
            "step": getattr(record, "step", None),
            "hook": getattr(record, "hook", None),
            "phase": getattr(record, "phase", None),
        })


def configure_logging(stream: TextIO = sys.stderr) -> logging.Handler:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logging.getLogger("hookrun").addHandler(handler)
    return handler
# --8<-- [end:json-logs]


# --8<-- [start:statistics]
async def main(steps: int = 40) -> hookrun.SessionStatistics:
    async def step(feed: dict[str, float]) -> dict[str, float]:
        await anyio.sleep(0.001)  # the real work: a remote call, a batch
        return {"loss": 1.0 / (1.0 + feed["x"])}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    @on_after_run(fetches="loss", name="upload")
    async def upload(run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        await anyio.sleep(0.02)  # much longer than the step: the warning names it

    hooks = [StepCounterHook(every_n_steps=100), upload]
    async with hookrun.MonitoredSession(
        create, hooks, statistics=hookrun.StatisticsOptions(slow_hook_seconds=0.01)
    ) as session:
        async for _ in session.iterate(feeds=({"x": float(x)} for x in range(steps))):
            pass
    stats = session.statistics()
    print(stats.format())
    return stats
# --8<-- [end:statistics]


if __name__ == "__main__":
    configure_logging()
    anyio.run(main)
