"""With steps in flight, the monitored session has one coordinator: a lane's recovery
re-creates that lane's raw session only, and the checkpoint saves hooks started on the
coordinator go on (the pipeline used to die with "the Coordinator is not open")."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from hookrun import (
    AbortedError,
    Checkpointer,
    MonitoredSession,
    MonitoredTrainingSession,
    RetryPolicy,
    SessionRunHook,
    UnavailableError,
)

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False)


class Worker:
    """A checkpointable raw session; the run fed ``{"fail": True}`` on its first try raises
    ``UnavailableError``; creating a worker after the first ``created`` ones waits for ``gate``."""

    def __init__(self, box: _Box) -> None:
        self.box = box
        self.items: list[int] = []
        self.closed = False

    async def run(self, fetches: Any, feed_dict: Mapping[str, Any], options: Any, run_metadata: Any) -> list[Any]:
        await anyio.lowlevel.checkpoint()
        item = feed_dict["i"]
        if item == self.box.fail_at and not self.box.failed:
            self.box.failed = True
            raise UnavailableError("worker lost")
        self.items.append(item)
        return [item for _ in fetches]

    def state_dict(self) -> dict[str, list[int]]:
        return {"items": list(self.items)}

    async def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.items = list(state["items"])

    async def aclose(self) -> None:
        self.closed = True


class _Box:
    def __init__(self, lanes: int, fail_at: int) -> None:
        self.lanes = lanes
        self.fail_at = fail_at
        self.failed = False
        self.gate = anyio.Event()
        self.workers: list[Worker] = []

    async def create(self) -> Worker:
        if len(self.workers) >= self.lanes:  # a re-creation: it takes a moment
            await self.gate.wait()
        worker = Worker(self)
        self.workers.append(worker)
        return worker


class _OpenGateAfter(SessionRunHook):
    """Opens the box's gate once ``count`` steps went through their after_run."""

    overlapping_steps = True

    def __init__(self, box: _Box, count: int) -> None:
        self.box, self.count, self.seen = box, count, 0

    async def after_run(self, run_context: Any, run_values: Any) -> None:
        self.seen += 1
        if self.seen >= self.count:
            self.box.gate.set()


async def test_a_lane_recovering_while_saves_are_pending_does_not_end_the_pipeline(tmp_path: Path) -> None:
    """save_checkpoint_steps=1 with four lanes: a lane's run fails with UnavailableError and
    its re-creation waits while the other lanes finish steps and save; every item comes back."""
    box = _Box(lanes=4, fail_at=4)  # the step after the first four, on the lane freed first
    feeds = [{"i": i} for i in range(24)]
    with anyio.fail_after(20):
        async with MonitoredTrainingSession(
            box.create, checkpoint_dir=tmp_path, save_checkpoint_steps=1, max_in_flight=4, retry=NO_WAIT,
            hooks=[_OpenGateAfter(box, 4)], log_step_count_steps=None,
        ) as sess:
            results = [r async for r in sess.iterate("x", feeds)]
            assert sess.statistics().recoveries == 1
    assert results == list(range(24))
    latest = await Checkpointer(tmp_path).latest()
    assert latest is not None and latest.step == 24
    assert all(worker.closed for worker in box.workers)


async def test_the_coordinator_hooks_receive_is_the_same_for_every_lane_and_outlives_recovery() -> None:
    """Every after_create_session of a session with lanes gets the one coordinator, also
    after a lane's recovery; a task started on it at entry runs until the session closes."""
    coords: list[object] = []
    ran_until_close = anyio.Event()
    box = _Box(lanes=3, fail_at=2)
    box.gate.set()

    class Keeper(SessionRunHook):
        overlapping_steps = True

        async def after_create_session(self, session: object, coord: Any) -> None:
            if not coords:
                async def watch() -> None:
                    await coord.wait_for_stop()
                    ran_until_close.set()

                coord.start_soon(watch)
            coords.append(coord)

    with anyio.fail_after(10):
        async with MonitoredSession(box.create, [Keeper()], max_in_flight=3, retry=NO_WAIT) as sess:
            assert [r async for r in sess.iterate("x", [{"i": i} for i in range(9)])] == list(range(9))
            assert sess.statistics().recoveries == 1
            assert not ran_until_close.is_set()
        await ran_until_close.wait()
    assert len(coords) == 4 and all(coord is coords[0] for coord in coords)


async def test_a_background_tasks_recoverable_error_recreates_one_lane_and_steps_go_on() -> None:
    """A recoverable error a coordinator task records is taken by one step, whose lane is
    re-created; the coordinator forgets it and the other lanes go on."""
    box = _Box(lanes=3, fail_at=-1)
    box.gate.set()
    raised = anyio.Event()

    class Breaker(SessionRunHook):
        overlapping_steps = True

        def __init__(self) -> None:
            self.coord: Any = None

        async def after_create_session(self, session: object, coord: Any) -> None:
            self.coord = coord

        async def after_run(self, run_context: Any, run_values: Any) -> None:
            if run_values.global_step == 3 and not raised.is_set():
                raised.set()

                async def fail() -> None:
                    raise AbortedError("background task lost its worker")

                self.coord.start_soon(fail)

    with anyio.fail_after(10):
        async with MonitoredSession(box.create, [Breaker()], max_in_flight=3, retry=NO_WAIT) as sess:
            assert [r async for r in sess.iterate("x", [{"i": i} for i in range(12)])] == list(range(12))
            assert sess.statistics().recoveries == 1
            assert not sess.should_stop()
    assert len(box.workers) == 4
