"""Without an initialised Ray, a creator starts a local one (loopback only) and shuts it down when closed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_SCRIPT = """
import os, sys, anyio, ray
import hookrun
from hookrun.ray import RayActorSessionCreator, RayStepCounter
from tests.ray import _remote
from tests.ray.conftest import is_loopback, listening_sockets, wait_until_gone

async def main() -> None:
    assert not ray.is_initialized()
    async with RayActorSessionCreator(_remote.Model, 1) as creator:
        async with hookrun.MonitoredSession(creator) as sess:
            print("result", await sess.run("y", {"x": 41}))
        sockets = listening_sockets(os.getpid())
        print("servers", sorted({"gcs_server", "raylet"} & {name for _, _, name in sockets}))
        print("exposed", [s for s in sockets if not is_loopback(s[0])])
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
    """A creator used without ray.init starts a local Ray listening on loopback only, and
    leaves no process of it behind."""
    root = Path(__file__).parents[2]
    env = {key: value for key, value in os.environ.items() if key != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, backend],
        capture_output=True, text=True, timeout=120, cwd=root, env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines == ["result 42", "servers ['gcs_server', 'raylet']", "exposed []", "step 1", "still up True", "after close False", "left []"]
