"""Dask sessions under a monitored session: results, hook fetches, clients, lost actors,
user errors, timeouts and cancellation (on asyncio and trio)."""

from __future__ import annotations

import os
import signal
import types
import uuid
from typing import Any

import anyio
import distributed
import pytest
from distributed.client import ClosedClientError, FutureCancelledError

import hookrun
from hookrun.dask import (
    DaskActorLostError,
    DaskActorSession,
    DaskActorSessionCreator,
    DaskStepSession,
    is_recoverable,
)

from .._engine_contract import FAST_RETRY, Creations
from . import _remote

pytestmark = pytest.mark.anyio

async def wait_event(client: distributed.Client, name: str) -> None:
    """Wait (in a thread, bounded) until the cluster-wide event ``name`` is set."""
    event = distributed.Event(name, client=client)
    with anyio.fail_after(60):
        assert await anyio.to_thread.run_sync(event.wait, 60, abandon_on_cancel=True)


def set_event(client: distributed.Client, name: str) -> None:
    distributed.Event(name, client=client).set()


def wanted_keys(client: distributed.Client, prefix: str) -> list[str]:
    """Keys starting with ``prefix`` that some client still wants from the scheduler.

    Cancellations travel on the client's batched stream to the scheduler; a task
    submitted and awaited after them is processed after them, so they have landed.
    """
    client.submit(_remote.square, {"x": 0}, pure=False).result(timeout=60)

    def keys(dask_scheduler: Any) -> list[str]:
        return [
            f"{key} {task.state} {task.who_wants}" for key, task in dask_scheduler.tasks.items()
            if str(key).startswith(prefix) and task.who_wants
        ]

    return list(client.run_on_scheduler(keys))


async def test_equal_feeds_run_the_step_again(dask_client: distributed.Client) -> None:
    """Steps are submitted with pure=False: equal feeds are never served from Dask's cache;
    closing the session leaves the user's client open."""
    session = DaskStepSession(_remote.square, client=dask_client)
    with anyio.fail_after(60):
        first = await session.run(["token"], {"x": 1})
        second = await session.run(["token"], {"x": 1})
        await session.aclose()
    assert first != second
    assert dask_client.status == "running"  # the user's client is never closed


async def test_session_with_address_owns_and_rebuilds_its_client(dask_cluster: distributed.LocalCluster) -> None:
    """address=: the session connects its own client, rebuilds it once closed, closes it with itself."""
    session = DaskStepSession(_remote.square, address=dask_cluster.scheduler_address)
    with anyio.fail_after(60):
        assert await session.run(["y"], {"x": 3}) == [9]
        first = session.client
        assert first is not None
        await anyio.to_thread.run_sync(first.close)
        assert await session.run(["y"], {"x": 4}) == [16]
        second = session.client
        assert second is not None and second is not first
        await session.aclose()
    assert second.status == "closed"


async def test_outside_cancellation_frees_the_caller_and_cancels_the_task(dask_client: distributed.Client) -> None:
    """Cancelling the caller returns at once and the task is cancelled on the scheduler."""
    name = f"cancel-{uuid.uuid4().hex[:8]}"
    session = DaskStepSession(_remote.blocking, client=dask_client)
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(session.run, [], {"name": name})
                await wait_event(dask_client, f"{name}-started")
                tg.cancel_scope.cancel()
        assert wanted_keys(dask_client, "blocking") == []
    finally:
        set_event(dask_client, f"{name}-go")  # let the worker thread finish


async def test_timeout_raises_deadline_exceeded_and_cancels_the_task(dask_client: distributed.Client) -> None:
    """RunOptions.timeout frees the caller with DeadlineExceededError; the task is cancelled."""
    name = f"timeout-{uuid.uuid4().hex[:8]}"

    async def create() -> DaskStepSession:
        return DaskStepSession(_remote.blocking, client=dask_client)

    try:
        with anyio.fail_after(60):
            async with hookrun.MonitoredSession(create) as sess:
                with pytest.raises(hookrun.DeadlineExceededError):
                    await sess.run([], {"name": name}, options=hookrun.RunOptions(timeout=0.5))
        assert wanted_keys(dask_client, "blocking") == []
    finally:
        set_event(dask_client, f"{name}-go")


@pytest.mark.usefixtures("restore_workers")
async def test_actor_lost_mid_run_is_recreated_once_and_the_run_completes(dask_client: distributed.Client) -> None:
    """The worker holding the actor is killed during a step: one new actor; the step re-runs."""
    name = f"lost-{uuid.uuid4().hex[:8]}"
    hook = Creations()
    results: list[Any] = []
    async with DaskActorSessionCreator(_remote.Model, client=dask_client) as creator:
        with anyio.fail_after(90):
            async with hookrun.MonitoredSession(creator, [hook], retry=FAST_RETRY) as sess:

                async def step() -> None:
                    results.append(await sess.run(["calls", "pid"], {"block": name}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(step)
                    await wait_event(dask_client, f"{name}-started")
                    pid = distributed.Variable(f"{name}-pid", client=dask_client).get(timeout=30)
                    os.kill(pid, signal.SIGKILL)
    assert creator.created == 2 and hook.created == 2
    [[calls, new_pid]] = results
    assert calls == 1 and new_pid != pid


async def test_lost_actor_is_unavailable_before_the_call(dask_client: distributed.Client) -> None:
    """A session whose actor future is no longer alive raises UnavailableError at once."""
    session = await DaskActorSessionCreator(_remote.Model, client=dask_client).create_session()
    assert isinstance(session, DaskActorSession)
    actor_future = session._future
    session._future = types.SimpleNamespace(status="lost")  # type: ignore[assignment]
    try:
        with pytest.raises(hookrun.UnavailableError, match=r"was lost \(status lost\)") as caught:
            await session.run(["y"], {})
        assert isinstance(caught.value.__cause__, DaskActorLostError)
    finally:
        session._future = actor_future
        await session.aclose()


def test_recoverable_errors_are_classified() -> None:
    """Scheduler loss and lost actors recover; a user's cancel and a poison task do not."""
    assert is_recoverable(FutureCancelledError("k", "scheduler-connection-lost"))
    assert not is_recoverable(FutureCancelledError("k", "unknown"))
    assert is_recoverable(ClosedClientError("closed"))
    assert not is_recoverable(ClosedClientError("closed"), own_client=False)
    assert is_recoverable(DaskActorLostError("gone"))
    assert is_recoverable(distributed.comm.core.CommClosedError("eof"))
    assert not is_recoverable(distributed.scheduler.KilledWorker("k", None, 3))  # type: ignore[arg-type]
    assert not is_recoverable(ValueError("user"))


def test_arguments_are_checked(dask_client: distributed.Client) -> None:
    """Bad functions, classes, methods and client arguments are refused, naming them."""
    with pytest.raises(TypeError, match="DaskStepSession needs a function"):
        DaskStepSession(_remote.Model)
    with pytest.raises(ValueError, match="pass client= or address=, not both"):
        DaskStepSession(_remote.square, client=dask_client, address="tcp://127.0.0.1:1")
    with pytest.raises(TypeError, match=r"client must be a distributed\.Client, got str"):
        DaskStepSession(_remote.square, client="tcp://127.0.0.1:1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a class"):
        DaskActorSessionCreator(_remote.Model(), client=dask_client)  # type: ignore[arg-type]


async def test_no_client_at_all_is_a_clear_error() -> None:
    """Without client=, address= or a default client, the first run says what to pass."""
    with pytest.raises(ValueError, match="no Dask client: pass client="):
        await DaskStepSession(_remote.square).run(["y"], {"x": 1})


async def test_creator_with_address_rebuilds_and_closes_its_client(dask_cluster: distributed.LocalCluster) -> None:
    """A creator given address= reconnects after its client closed and closes it with itself."""
    creator = DaskActorSessionCreator(_remote.Model, address=dask_cluster.scheduler_address)
    with anyio.fail_after(60):
        first = await creator.create_session()
        assert await first.run(["y"], {"x": 2}) == [2]
        await anyio.to_thread.run_sync(first._client.close)
        with pytest.raises(hookrun.UnavailableError, match="ClosedClientError"):
            await first.run(["y"], {"x": 2})
        await first.aclose()
        second = await creator.create_session()
        assert second._client is not first._client
        assert await second.run(["y"], {"x": 3}) == [3]
        await second.aclose()
        await creator.aclose()
    assert second._client.status == "closed"
