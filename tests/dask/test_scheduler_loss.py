"""Losing the scheduler mid-step is UnavailableError (the client's futures are cancelled)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from distributed.client import FutureCancelledError

import hookrun
from hookrun.dask import DaskStepSession

from . import _remote

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def external_cluster() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A scheduler and one worker as separate processes (the worker imports the tests)."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bin_dir = Path(sys.executable).parent
    scheduler = subprocess.Popen(
        [str(bin_dir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    worker = subprocess.Popen(
        [str(bin_dir / "dask"), "worker", address, "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        yield address, scheduler
    finally:
        for process in (worker, scheduler):
            if process.poll() is None:
                process.kill()
            process.wait(30)


async def test_scheduler_killed_mid_step_is_unavailable(
    external_cluster: tuple[str, subprocess.Popen[bytes]],
) -> None:
    """SIGKILL of the scheduler during a step raises UnavailableError from Dask's cancellation."""
    address, scheduler = external_cluster
    session = DaskStepSession(_remote.sleepy, address=address)
    try:
        with anyio.fail_after(60):
            assert await session.run(["slept"], {"seconds": 0}) == [True]  # connected, a worker is up
            async with anyio.create_task_group() as tg:
                failures: list[BaseException] = []

                async def step() -> None:
                    try:
                        await session.run(["slept"], {"seconds": 30})
                    except hookrun.UnavailableError as exc:
                        failures.append(exc)

                tg.start_soon(step)
                await anyio.wait_all_tasks_blocked()
                os.kill(scheduler.pid, signal.SIGKILL)
        [failure] = failures
        assert isinstance(failure.__cause__, FutureCancelledError)
        assert failure.__cause__.reason == "scheduler-connection-lost"
    finally:
        with anyio.fail_after(60):
            await session.aclose()
