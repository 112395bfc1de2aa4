"""Steps on a local Dask cluster: the smallest complete program.

It starts a ``LocalCluster`` of two single-thread worker processes bound to
127.0.0.1 (no dashboard), runs each step as one Dask task (``DaskStepSession``),
two steps in flight, stops after the fifth step and closes the cluster. It
prints the results in feed order: ``[0.0, 1.0, 4.0, 9.0, 16.0]``.

Run it with ``python -m examples.dask_steps`` (``--backend trio`` for trio).
"""

# --8<-- [start:program]
from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping
from typing import Any

import anyio
from distributed import LocalCluster

import hookrun
from hookrun.dask import DaskStepSession
from hookrun.hooks import StopAtStepHook


def square(feed: Mapping[str, Any]) -> dict[str, Any]:
    """The remote step, run by a Dask worker: any picklable function of the feed dict."""
    return {"y": feed["x"] ** 2}


async def run_steps(address: str, steps: int = 5) -> list[float]:
    """Run ``steps`` steps on the cluster whose scheduler is at ``address``."""

    async def create_session() -> DaskStepSession:
        return DaskStepSession(square, address=address)  # one per lane, with its own client

    hooks = [StopAtStepHook(last_step=steps)]
    feeds = ({"x": float(x)} for x in range(100))
    async with hookrun.MonitoredSession(create_session, hooks, max_in_flight=2) as session:
        ys = [y async for y in session.iterate("y", feeds)]  # in feed order
    return ys


async def main(steps: int = 5) -> list[float]:
    """Start a local cluster, run the steps on it, close it."""
    start = functools.partial(
        LocalCluster, n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    )
    cluster = await anyio.to_thread.run_sync(start)  # starting it blocks: off the event loop
    try:
        return await run_steps(cluster.scheduler_address, steps)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(cluster.close)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Steps on a local Dask cluster.")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    print(anyio.run(main, backend=parser.parse_args().backend))
# --8<-- [end:program]
