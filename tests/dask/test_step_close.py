"""A DaskStepSession's close releases the step future it kept, before it returns, with
the user's own client (on asyncio and trio): closed alone or under a monitored session
with lanes, cancelled while it closes, or with a step still running.

The kept future's timer is set far beyond any test here, so only the close can have
released what is found released."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import distributed
import pytest

import hookrun
from hookrun.dask import DaskStepSession
from hookrun.dask import _step_task as step_task

from . import _remote
from .test_sessions import set_event, wait_event

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_release_timer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(step_task, "RELEASE_AFTER", 3600.0)
    yield


@pytest.fixture
async def client(dask_cluster: distributed.LocalCluster) -> AsyncIterator[distributed.Client]:
    """A client of the test's own (the user's: passed in, never closed by hookrun), so
    every key it holds is one of the test's."""
    made = await anyio.to_thread.run_sync(
        lambda: distributed.Client(dask_cluster.scheduler_address, set_as_default=False)
    )
    try:
        yield made
    finally:
        await anyio.to_thread.run_sync(made.close)


def _kept_key(session: DaskStepSession) -> Any:
    """The key of the step future ``session`` keeps (its reference is not taken)."""
    future = session._kept._future
    assert future is not None
    return future.key


def _io_loop_caught_up(client: distributed.Client) -> None:
    """Return once the client's IO loop has run the callbacks queued on it so far, and
    those they queued in turn."""
    done = threading.Event()
    loop: Any = client.loop
    loop.add_callback(lambda: loop.add_callback(done.set))
    assert done.wait(60)


def _wanted(client: distributed.Client, key: Any) -> bool:
    """Whether the scheduler still has ``key`` wanted by ``client``.

    The client's releases travel on its batched stream to the scheduler; a task
    submitted and awaited after them is processed after them, so they have landed.
    """
    client.submit(_remote.square, {"x": 0}, pure=False).result(timeout=60)
    return bool(client.run_on_scheduler(_wanted_by, key, client.id))


def _wanted_by(key: Any, client_id: str, dask_scheduler: Any) -> bool:
    task = dask_scheduler.tasks.get(key)
    return task is not None and any(who.client_key == client_id for who in task.who_wants)


async def test_close_releases_the_kept_future_before_it_returns(client: distributed.Client) -> None:
    """The latest step's future, kept until the next submission, is released by the close:
    the client has let go of its key when ``aclose()`` returns; later runs are refused."""
    session = DaskStepSession(_remote.square, client=client)
    with anyio.fail_after(60):
        assert await session.run(["y"], {"x": 2}) == [4]
        assert await session.run(["y"], {"x": 3}) == [9]
        key = _kept_key(session)
        assert key in client.refcount  # kept
        await session.aclose()
        assert key not in client.refcount and key not in client.futures
        assert not await anyio.to_thread.run_sync(_wanted, client, key)
        with pytest.raises(hookrun.SessionClosedError):
            await session.run(["y"], {"x": 4})
        await session.aclose()  # closing twice does nothing more
    assert client.status == "running"  # the user's client is never closed


async def test_closing_a_monitored_session_releases_every_lanes_kept_future(client: distributed.Client) -> None:
    """Task lanes (one session per lane, the user's client): when the monitored session
    has closed, the client holds no key of theirs."""
    lanes = 3
    made: list[DaskStepSession] = []

    def create() -> DaskStepSession:
        made.append(DaskStepSession(_remote.square, client=client))
        return made[-1]

    async def step(sess: hookrun.MonitoredSession, x: int) -> None:
        assert await sess.run("y", {"x": x}) == x * x

    with anyio.fail_after(60):
        async with hookrun.MonitoredSession(create, [], max_in_flight=lanes) as sess:
            async with anyio.create_task_group() as tg:
                for x in range(2 * lanes):
                    tg.start_soon(step, sess, x)
            assert len(client.refcount) == lanes  # each lane keeps its latest step's future
        assert dict(client.refcount) == {} and client.futures == {}
        assert len(made) == lanes and all(session.closed for session in made)


async def test_a_cancelled_close_still_releases_the_kept_future(client: distributed.Client) -> None:
    """The close is cancelled as it starts: the release is handed to the client's IO loop
    all the same (it runs there next), and the session is closed."""
    session = DaskStepSession(_remote.square, client=client)
    with anyio.fail_after(60):
        assert await session.run(["y"], {"x": 2}) == [4]
        key = _kept_key(session)
        with anyio.CancelScope() as scope:
            scope.cancel()
            await session.aclose()
        assert session.closed
        await anyio.to_thread.run_sync(_io_loop_caught_up, client)  # the release handed over has run
        assert key not in client.refcount and key not in client.futures
        assert not await anyio.to_thread.run_sync(_wanted, client, key)


async def test_a_cancelled_close_still_closes_the_sessions_own_client(dask_cluster: distributed.LocalCluster) -> None:
    """address=: a close cancelled while it releases the kept future closes the client it connected."""
    session = DaskStepSession(_remote.square, address=dask_cluster.scheduler_address)
    with anyio.fail_after(60):
        assert await session.run(["y"], {"x": 2}) == [4]
        own = session.client
        assert own is not None
        with anyio.CancelScope() as scope:
            scope.cancel()
            await session.aclose()
    assert own.status == "closed" and session.client is None


async def test_a_step_running_when_the_session_closes_is_not_kept(client: distributed.Client) -> None:
    """A step in flight during the close returns its result; its future is released as
    it ends (the closed session keeps nothing)."""
    name = f"in-flight-{uuid.uuid4().hex[:8]}"
    session = DaskStepSession(_remote.blocking, client=client)
    results: list[Any] = []

    async def running() -> None:
        results.append(await session.run([], {"name": name}))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(running)
            await wait_event(client, f"{name}-started")
            await session.aclose()
            set_event(client, f"{name}-go")
        assert results == [[]]
        assert session._kept._future is None
        await anyio.to_thread.run_sync(_io_loop_caught_up, client)  # the step's end let go of it
        assert not [key for key in client.refcount if str(key).startswith("blocking")]
