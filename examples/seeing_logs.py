"""See what the built-in hooks log: they use the standard ``logging`` module (logger
``hookrun``), which shows nothing below WARNING until you configure it.

Run it: ``python examples/seeing_logs.py``.
"""

from __future__ import annotations

import logging

import anyio

import hookrun
from hookrun.hooks import LoggingTensorHook, ProgressBarHook, StepCounterHook, StopAtStepHook


# --8<-- [start:configure]
def configure_logging() -> None:
    # Everything at INFO and above, on stderr, one line per record:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Or only hookrun's lines, leaving the rest of your logging alone:
    # logging.getLogger("hookrun").setLevel(logging.INFO)
    # logging.getLogger("hookrun").addHandler(logging.StreamHandler())
# --8<-- [end:configure]


# --8<-- [start:hooks]
async def main(steps: int = 20) -> int:
    async def step(feed: dict[str, float]) -> dict[str, float]:
        await anyio.sleep(0.001)
        return {"loss": 1.0 / (1.0 + feed["x"])}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    hooks = [
        LoggingTensorHook({"loss": "loss"}, every_n_iter=5),  # "loss = 0.1667 (0.012 sec)"
        StepCounterHook(every_n_steps=10),  # "global_step/sec: 812.3"
        ProgressBarHook(steps, metrics=["loss"], mode="log", log_every_secs=0.01),  # "step 20/20 (100.0%), ..."
        StopAtStepHook(last_step=steps),
    ]
    async with hookrun.MonitoredSession(create, hooks) as session:
        done = sum([1 async for _ in session.iterate(feeds=({"x": float(x)} for x in range(1000)))])
    return done
# --8<-- [end:hooks]


if __name__ == "__main__":
    configure_logging()
    anyio.run(main)
