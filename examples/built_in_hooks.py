"""Two blocks of the built-in hooks page: a subclass of a built-in hook, and a function
hook that pushes a metric every ten steps.

``main()`` runs 25 steps with both and returns what they saw: the counter's ``begin``
ran its base's and then its own, and the metric was pushed after
steps 1, 11 and 21 (``every_n_steps`` is TensorFlow's timer).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import anyio.lowlevel

import hookrun
from hookrun.hooks import StepCounterHook, StopAtStepHook


class Metrics:
    """A stand-in for a metrics service with an async client."""

    def __init__(self) -> None:
        self.pushed: list[tuple[int, float]] = []

    async def push(self, step: int, loss: float) -> None:
        await anyio.lowlevel.checkpoint()  # a real client would await the network
        self.pushed.append((step, loss))


metrics = Metrics()


# --8<-- [start:subclass]
class MyCounter(StepCounterHook):
    async def begin(self) -> None:
        await super().begin()  # opens the summary writer, restarts the measurement
        self.started_at = anyio.current_time()  # then your own set-up
# --8<-- [end:subclass]


async def main(steps: int = 25) -> dict[str, Any]:
    """Run ``steps`` steps with ``MyCounter`` and ``report``."""

    async def step(feed: dict[str, float]) -> dict[str, float]:
        return {"loss": 1.0 / (1 + feed["x"])}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    # --8<-- [start:function-hook]
    @hookrun.hooks.on_after_run(every_n_steps=10, fetches={"loss": "loss"})
    async def report(run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        await metrics.push(run_values.global_step, run_values.results["loss"])
    # --8<-- [end:function-hook]

    counter = MyCounter(every_n_steps=10)
    metrics.pushed.clear()
    feeds = ({"x": float(x)} for x in range(steps))
    async with hookrun.MonitoredSession(create, [counter, report, StopAtStepHook(last_step=steps)]) as session:
        async for _ in session.iterate([], feeds):
            pass
    return {"started_at": counter.started_at, "pushed": list(metrics.pushed)}


if __name__ == "__main__":
    print(anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio"))
