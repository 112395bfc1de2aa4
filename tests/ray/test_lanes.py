"""Ray actor sessions as lanes (``max_in_flight``): one actor per lane, a lost actor
re-created on its own lane only (on asyncio and trio)."""

from __future__ import annotations

import os
import signal
from typing import Any

import anyio
import pytest

import hookrun
from hookrun.ray import RayActorSessionCreator
from hookrun.remote import await_future

from .._engine_contract import FAST_RETRY, Creations
from . import _remote

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ray_cluster")]

LANES = 3


class LaneCreations(Creations):
    """Counts after_create_session calls (one per lane, then one per re-created lane)."""

    overlapping_steps = True


async def _pids(sess: hookrun.MonitoredSession) -> list[int]:
    """The actor pid of each lane: ``LANES`` steps at once take every lane."""
    pids: list[int] = []

    async def step() -> None:
        pids.append(await sess.run("pid"))

    async with anyio.create_task_group() as tg:
        for _ in range(LANES):
            tg.start_soon(step)
    return pids


async def test_each_lane_has_its_own_actor_and_a_lost_one_is_recreated_alone() -> None:
    """Three lanes, three actors; the actor of one lane killed mid-step: that lane alone
    gets a new actor, the step re-runs on it, the other lanes keep theirs."""
    latch = _remote.Latch.remote()
    hook = LaneCreations()
    results: list[Any] = []
    async with RayActorSessionCreator(_remote.Model) as creator:
        with anyio.fail_after(120):
            async with hookrun.MonitoredSession(creator, [hook], retry=FAST_RETRY, max_in_flight=LANES) as sess:
                before = await _pids(sess)
                assert len(set(before)) == LANES and creator.created == LANES

                async def blocked() -> None:
                    results.append(await sess.run(["calls", "pid"], {"block": latch}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(blocked)
                    killed = await await_future(latch.wait.remote("started").future())
                    assert killed in before
                    os.kill(killed, signal.SIGKILL)
                after = await _pids(sess)
            assert creator.created == LANES + 1 and hook.created == LANES + 1
    [[calls, new_pid]] = results
    assert calls == 1 and new_pid not in before  # re-run on the lane's new actor
    assert set(after) == (set(before) - {killed}) | {new_pid}
