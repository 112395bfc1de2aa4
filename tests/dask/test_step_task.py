"""A DaskStepSession's task, submitted and fetched on the client's IO loop: the paths
around the hand-over (a closed client, a closed IO loop, a cancellation before the
submit), on asyncio and trio, and its future kept until the session's next submission."""

from __future__ import annotations

import asyncio
import types
from typing import Any

import anyio
import distributed
import pytest
from distributed.client import ClosedClientError

import hookrun
from hookrun.dask import DaskStepSession
from hookrun.dask import _step_task as step_task
from hookrun.dask._step_task import _Task, run_task

from . import _remote

pytestmark = pytest.mark.anyio


async def test_a_closed_user_client_raises_closed_client_error(dask_cluster: distributed.LocalCluster) -> None:
    """The user's closed client: Dask's ClosedClientError, unchanged (it is not recoverable)."""
    client = await anyio.to_thread.run_sync(
        lambda: distributed.Client(dask_cluster.scheduler_address, set_as_default=False)
    )
    session = DaskStepSession(_remote.square, client=client)
    with anyio.fail_after(60):
        assert await session.run(["y"], {"x": 2}) == [4]
        await anyio.to_thread.run_sync(client.close)
        with pytest.raises(ClosedClientError):
            await session.run(["y"], {"x": 2})
        await session.aclose()


def _client_with_closed_loop() -> Any:
    """A stand-in for a client whose status still says running but whose IO loop is closed."""
    loop = asyncio.new_event_loop()
    loop.close()
    return types.SimpleNamespace(status="running", loop=types.SimpleNamespace(asyncio_loop=loop))


async def test_a_closed_io_loop_is_a_closed_client() -> None:
    """The IO loop closed under a running status: ClosedClientError (recoverable for an own client)."""
    with pytest.raises(ClosedClientError, match="IO loop is closed"):
        await run_task(_client_with_closed_loop(), _remote.square, {"x": 1}, "step", own_client=False)
    with pytest.raises(hookrun.UnavailableError, match="ClosedClientError") as caught:
        await run_task(_client_with_closed_loop(), _remote.square, {"x": 1}, "step", own_client=True)
    assert isinstance(caught.value.__cause__, ClosedClientError)


async def test_a_task_cancelled_before_its_submit_is_never_submitted() -> None:
    """A caller cancelled before the IO loop got to the submit: the task is never submitted."""
    submitted: list[Any] = []
    client: Any = types.SimpleNamespace(submit=lambda *args, **kwargs: submitted.append(args))
    task = _Task()
    task.cancel()
    assert await task.run(client, _remote.square, {"x": 1}) is None
    assert submitted == [] and task.future is None


class _Future:
    """A stand-in for a submitted task's future whose result is ``value``."""

    def __init__(self, value: int) -> None:
        self.value = value

    async def _result(self) -> int:
        await asyncio.sleep(0)
        return self.value


def test_a_steps_future_is_kept_until_the_next_submission(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the IO loop: the session's next submission comes before the kept future's
    release (its message goes first), and the timer lets go of the last one."""
    monkeypatch.setattr(step_task, "RELEASE_AFTER", 0.0)
    released = asyncio.Event()

    class Watched(step_task.Kept):
        def release(self) -> None:
            super().release()
            released.set()

    kept = Watched()
    seen: list[Any] = []  # the future kept when each task is submitted

    def submit(fn: Any, feed: dict[str, int], pure: bool) -> _Future:
        seen.append(kept._future)
        return _Future(feed["x"])

    client: Any = types.SimpleNamespace(submit=submit)

    async def steps() -> list[int]:
        values = [await _Task().run(client, _remote.square, {"x": x}, kept) for x in (1, 2)]
        assert getattr(kept._future, "value", None) == 2
        released.clear()  # set by the releases so far: the next one is the timer's
        async with asyncio.timeout(10):
            await released.wait()
        assert kept._future is None
        return values

    assert asyncio.run(steps()) == [1, 2]
    assert seen[0] is None and seen[1].value == 1  # the first future, kept until the second submit
