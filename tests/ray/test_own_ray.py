"""Without an initialised Ray, a creator starts a local one and shuts it down when closed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = """
import sys, anyio, ray
import hookrun
from hookrun.ray import RayActorSessionCreator, RayStepCounter
from tests.ray import _remote
from tests.ray.conftest import wait_until_gone

async def main() -> None:
    assert not ray.is_initialized()
    async with RayActorSessionCreator(_remote.Model, 1) as creator:
        async with hookrun.MonitoredSession(creator) as sess:
            print("result", await sess.run("y", {"x": 41}))
        session_dir = ray._private.worker._global_node.get_session_dir_path()
        counter = RayStepCounter("own-ray-step")
        print("step", await counter.increment())
        await counter.delete()
        await counter.aclose()
        print("still up", ray.is_initialized())  # the creator holds Ray
    print("after close", ray.is_initialized())
    print("left", wait_until_gone(session_dir))

anyio.run(main, backend=sys.argv[1])
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_creator_starts_and_stops_its_own_ray(backend: str) -> None:
    """A creator used without ray.init starts a local Ray and leaves no process of it behind."""
    root = Path(__file__).parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, backend],
        capture_output=True, text=True, timeout=120, cwd=root, env={**os.environ},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines == ["result 42", "step 1", "still up True", "after close False", "left []"]
