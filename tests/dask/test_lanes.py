"""Dask actor sessions as lanes (``max_in_flight``): one actor per lane, each on one
worker; a lost worker re-creates the lanes whose actor it held, and only those (on
asyncio and trio)."""

from __future__ import annotations

import functools
import os
import signal
import uuid
from collections import Counter
from typing import Any

import anyio
import distributed
import pytest

import hookrun
from hookrun.dask import DaskActorSessionCreator

from .._engine_contract import FAST_RETRY, Creations
from . import _remote
from .test_sessions import wait_event

pytestmark = pytest.mark.anyio

LANES = 2


class LaneCreations(Creations):
    """Counts after_create_session calls (one per lane, then one per re-created lane)."""

    overlapping_steps = True


async def _pids(sess: hookrun.MonitoredSession) -> list[int]:
    """The actor's worker pid of each lane: ``LANES`` steps at once take every lane."""
    pids: list[int] = []

    async def step() -> None:
        pids.append(await sess.run("pid"))

    async with anyio.create_task_group() as tg:
        for _ in range(LANES):
            tg.start_soon(step)
    return pids


@pytest.mark.usefixtures("restore_workers")
async def test_a_lost_worker_recreates_only_the_lanes_whose_actor_it_held(dask_client: distributed.Client) -> None:
    """Two lanes, two actors; the worker of one lane's actor killed mid-step: the lanes
    whose actor was on that worker get a new one (the step re-runs), the others keep theirs."""
    name = f"lanes-{uuid.uuid4().hex[:8]}"
    hook = LaneCreations()
    results: list[Any] = []
    async with DaskActorSessionCreator(_remote.Model, client=dask_client) as creator:
        with anyio.fail_after(120):
            async with hookrun.MonitoredSession(creator, [hook], retry=FAST_RETRY, max_in_flight=LANES) as sess:
                before = await _pids(sess)
                assert creator.created == LANES

                async def blocked() -> None:
                    results.append(await sess.run(["calls", "pid"], {"block": name}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(blocked)
                    await wait_event(dask_client, f"{name}-started")
                    killed = distributed.Variable(f"{name}-pid", client=dask_client).get(timeout=30)
                    assert killed in before
                    os.kill(killed, signal.SIGKILL)
                after = await _pids(sess)
            lost = before.count(killed)
            assert creator.created == LANES + lost and hook.created == LANES + lost
    [[calls, new_pid]] = results
    assert calls == 1 and new_pid != killed  # re-run on the lane's new actor
    kept = Counter(pid for pid in before if pid != killed)
    assert kept <= Counter(after)  # the other lanes kept their actors
    assert new_pid in after and killed not in after  # (a new actor may be on the other worker)


async def test_n_actor_lanes_run_n_calls_at_once_on_fewer_workers(dask_client: distributed.Client) -> None:
    """Four lanes on two single-thread workers: all four synchronous step calls run at
    once (a worker would otherwise run its actors' calls one at a time)."""
    name = f"gate-{uuid.uuid4().hex[:8]}"
    lanes = 4
    started = distributed.Queue(f"{name}-started", client=dask_client)
    go = distributed.Event(f"{name}-go", client=dask_client)
    pids: list[int] = []

    async def step(sess: hookrun.MonitoredSession) -> None:
        pids.append(await sess.run("pid", {"name": name}))

    async with DaskActorSessionCreator(_remote.Gate, client=dask_client) as creator:
        with anyio.fail_after(60):
            async with hookrun.MonitoredSession(creator, [], max_in_flight=lanes) as sess, anyio.create_task_group() as tg:
                for _ in range(lanes):
                    tg.start_soon(step, sess)
                running = [
                    await anyio.to_thread.run_sync(functools.partial(started.get, timeout=30)) for _ in range(lanes)
                ]
                go.set()
    assert len(running) == lanes and len(pids) == lanes
    assert len(set(pids)) <= len(dask_client.scheduler_info()["workers"]) < lanes


async def test_the_session_actor_keeps_the_users_class_and_methods(dask_client: distributed.Client) -> None:
    """The actor made for a session answers the user's other methods and has the class's name."""
    async with DaskActorSessionCreator(_remote.Gate, client=dask_client) as creator:
        with anyio.fail_after(30):
            session = await creator.create_session()
            try:
                pid = await anyio.to_thread.run_sync(_where, session)
                assert isinstance(pid, int)
                assert repr(session) == "DaskActorSession(Gate.run)"
            finally:
                await session.aclose()


async def test_a_creators_actors_are_spread_over_the_workers(dask_client: distributed.Client) -> None:
    """Four sessions of one creator: two actors on each of the two workers."""
    async with DaskActorSessionCreator(_remote.Gate, client=dask_client) as creator:
        with anyio.fail_after(30):
            sessions = [await creator.create_session() for _ in range(4)]
            try:
                pids = [await anyio.to_thread.run_sync(_where, session) for session in sessions]
            finally:
                for session in sessions:
                    await session.aclose()
    assert sorted(Counter(pids).values()) == [2, 2]


def _where(session: Any) -> int:
    """The pid of the worker holding a session's actor (a call outside a step)."""
    pid: int = session.actor.where().result()
    return pid
