"""Ray sessions under a monitored session: results, hook fetches, lost actors and workers,
user errors, timeouts and cancellation (on asyncio and trio)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
import ray

import hookrun
from hookrun.ray import RayActorSession, RayActorSessionCreator, RayStepSession
from hookrun.remote import await_future

from .._engine_contract import FAST_RETRY, Creations
from . import _remote
from .conftest import RayCluster

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ray_cluster")]


async def remote_wait(ref: Any) -> Any:
    with anyio.fail_after(60):
        return await await_future(ref.future())


async def test_step_session_missing_key_lists_what_the_task_returned() -> None:
    """Fetching a key the task did not return is a KeyError naming the keys it did."""
    with anyio.fail_after(60), pytest.raises(KeyError, match=r"no value for fetch 'z'.*'pid', 'token', 'y'"):
        await RayStepSession(ray.remote(_remote.square)).run(["z"], {"x": 1})


async def test_user_errors_are_ray_task_errors_carrying_the_remote_traceback() -> None:
    """A step's or an actor method's error is Ray's RayTaskError (also the user's type),
    with the traceback of the remote call."""
    with anyio.fail_after(60), pytest.raises(ValueError, match="bad feed x=3") as caught:
        await RayStepSession(_remote.failing).run(["y"], {"x": 3})
    assert isinstance(caught.value, ray.exceptions.RayTaskError)
    assert "_remote.py" in str(caught.value) and "in failing" in str(caught.value)
    session = await RayActorSessionCreator(_remote.Model).create_session()
    try:
        with anyio.fail_after(60), pytest.raises(ValueError, match="model cannot take 'nan'") as raised:
            await session.run(["y"], {"fail": "nan"})
    finally:
        await session.aclose()
    assert isinstance(raised.value, ray.exceptions.RayTaskError) and "in run" in str(raised.value)


async def test_crashed_worker_recovers_by_recreating_the_session(tmp_path: Path) -> None:
    """A task whose worker dies (no Ray retries) is UnavailableError: one re-creation."""
    hook = Creations()
    task_options = {"max_retries": 0}

    async def create() -> RayStepSession:
        return RayStepSession(_remote.crash_once, task_options=task_options)

    feeds = {"marker": str(tmp_path / "crashed")}
    with anyio.fail_after(60):
        async with hookrun.MonitoredSession(create, [hook], retry=FAST_RETRY) as sess:
            assert await sess.run("y", feeds) == 1
    assert hook.created == 2


async def until_exists(path: Path) -> None:
    """Wait (up to 60 s) for a file a remote task creates: a local cluster shares the disk."""
    for _ in range(1200):
        if await anyio.Path(path).exists():
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"{path.name} was never created")


async def test_outside_cancellation_cancels_the_remote_task(tmp_path: Path) -> None:
    """Cancelling the caller frees it at once and ray.cancel interrupts the running task."""
    session = RayStepSession(_remote.blocking)
    started, cancelled = tmp_path / "started", tmp_path / "cancelled"
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.run, [], {"started": str(started), "cancelled": str(cancelled)})
            await until_exists(started)
            tg.cancel_scope.cancel()
    try:
        await until_exists(cancelled)
    except AssertionError as exc:
        exc.add_note(f"the task found this SIGINT handler: {await anyio.Path(started).read_text()}")
        raise


async def test_actor_session_of_a_decorated_class() -> None:
    """A class already decorated with @ray.remote works (its own options kept)."""
    creator = RayActorSessionCreator(ray.remote(num_cpus=0)(_remote.Model), 3)
    session = await creator.create_session()
    try:
        with anyio.fail_after(60):
            assert await session.run(["y"], {"x": 1}) == [4]
    finally:
        await session.aclose()


async def test_closing_the_session_kills_its_actor() -> None:
    """aclose kills the actor: a call it is running fails with ActorDiedError."""
    latch = _remote.Latch.remote()
    session = await RayActorSessionCreator(_remote.Model).create_session()
    assert isinstance(session, RayActorSession)
    in_flight: Any = session.actor.run.remote(["y"], {"block": latch})
    await remote_wait(latch.wait.remote("started"))
    await session.aclose()
    await session.aclose()  # twice: nothing more
    with pytest.raises(ray.exceptions.ActorDiedError):
        await remote_wait(in_flight)
    with pytest.raises(hookrun.SessionClosedError, match="closed"):
        await session.run(["y"], {})


async def test_actor_killed_mid_run_is_recreated_once_and_the_run_completes() -> None:
    """SIGKILL of the session's actor during a step: one new actor, the step re-runs there."""
    latch = _remote.Latch.remote()
    hook = Creations()
    results: list[Any] = []
    async with RayActorSessionCreator(_remote.Model) as creator:
        with anyio.fail_after(90):
            async with hookrun.MonitoredSession(creator, [hook], retry=FAST_RETRY) as sess:
                first_pid = await sess.run("pid")

                async def step() -> None:
                    results.append(await sess.run(["calls", "pid"], {"block": latch}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(step)
                    pid = await remote_wait(latch.wait.remote("started"))
                    assert pid == first_pid
                    os.kill(pid, signal.SIGKILL)
        assert creator.created == 2
    assert hook.created == 2
    [[calls, new_pid]] = results
    assert calls == 1 and new_pid != first_pid


async def test_timeout_frees_the_caller_and_cancels_the_actor_call(tmp_path: Path) -> None:
    """RunOptions.timeout raises DeadlineExceededError and ray.cancel reaches the async actor."""
    latch = _remote.Latch.remote()
    cancelled = tmp_path / "cancelled"
    feeds = {"latch": latch, "cancelled": str(cancelled)}
    async with RayActorSessionCreator(_remote.AsyncModel) as creator:
        with anyio.fail_after(60):
            async with hookrun.MonitoredSession(creator) as sess:
                with pytest.raises(hookrun.DeadlineExceededError):
                    await sess.run([], feeds, options=hookrun.RunOptions(timeout=1.0))
                await until_exists(cancelled)


async def test_a_call_on_a_node_found_gone_ends_and_cancels_its_actor_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the creator's watch finds the node of a waiting call gone (its raylet made to
    refuse here), the call raises UnavailableError at once and ray.cancel reaches the actor."""
    from hookrun.ray import _placement

    latch = _remote.Latch.remote()
    cancelled = tmp_path / "cancelled"
    async with RayActorSessionCreator(_remote.AsyncModel) as creator:
        session = await creator.create_session()
        watch = creator._watch
        assert watch is not None and session.node is not None
        try:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:

                    async def call() -> None:
                        with pytest.raises(hookrun.UnavailableError, match="no longer answers"):
                            await session.run([], {"latch": latch, "cancelled": str(cancelled)})

                    tg.start_soon(call)
                    await remote_wait(latch.wait.remote("started"))
                    monkeypatch.setattr(_placement, "_answers", lambda address: False)
                    await watch.lost(session.node)
                await until_exists(cancelled)
            assert watch.calls(session.node) == set()
        finally:
            await session.aclose()


def test_creator_options_are_checked() -> None:
    """Restarts cannot be turned on; the method must exist; the class must be a class."""
    with pytest.raises(ValueError, match=r"actor_options\['max_restarts'\]=2"):
        RayActorSessionCreator(_remote.Model, actor_options={"max_restarts": 2})
    with pytest.raises(ValueError, match=r"actor_options\['max_task_retries'\]=-1"):
        RayActorSessionCreator(_remote.Model, actor_options={"max_task_retries": -1})
    with pytest.raises(AttributeError, match="Model has no method 'train'"):
        RayActorSessionCreator(ray.remote(_remote.Model), method="train")  # a decorated class too
    with pytest.raises(TypeError, match="needs a class"):
        RayActorSessionCreator(_remote.Model())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="actor_options must be a mapping"):
        RayActorSessionCreator(_remote.Model, actor_options=[("num_cpus", 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RayStepSession needs a function"):
        RayStepSession(_remote.Model)
    with pytest.raises(TypeError, match="task_options must be a mapping"):
        RayStepSession(_remote.square, task_options=3)  # type: ignore[arg-type]


def test_cluster_is_one_local_node(ray_cluster: RayCluster) -> None:
    """The test cluster is this machine alone (Ray advertises the host's own address)."""
    nodes = [node for node in ray.nodes() if node["Alive"]]  # type: ignore[no-untyped-call]
    assert len(nodes) == 1
    assert ray_cluster.address.rsplit(":", 1)[0] == nodes[0]["NodeManagerAddress"]


async def test_an_actor_with_state_dict_is_checkpointed_and_restored_into_its_successor(tmp_path: Path) -> None:
    """A lost checkpointable actor is re-created from the latest checkpoint, state included."""
    creator = RayActorSessionCreator(_remote.Tally)
    plain = await RayActorSessionCreator(_remote.Model).create_session()
    await plain.aclose()
    assert not isinstance(plain, hookrun.Checkpointable)
    sess = hookrun.MonitoredTrainingSession(
        creator.create_session, checkpoint_dir=tmp_path, save_checkpoint_steps=1,
        log_step_count_steps=0, retry=FAST_RETRY,
    )
    with anyio.fail_after(60):
        async with sess:
            totals = [await sess.run("total", {"x": x}) for x in (1, 2, 3)]
            first_pid = await sess.run("pid", {"x": 0})  # step 4, saved with total 6
            # The actor dies in this run; its successor is restored and runs it again:
            totals.append(await sess.run("total", {"x": 4, "die": str(tmp_path / "lost")}))
            second_pid = await sess.run("pid", {"x": 0})
    assert totals == [1, 3, 6, 10]
    assert creator.created == 2 and first_pid != second_pid
    restored = await hookrun.Checkpointer(tmp_path).restore()
    assert restored is not None and restored.state["session"] == {"total": 10}
