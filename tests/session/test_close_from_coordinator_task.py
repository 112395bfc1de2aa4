"""A task a hook started on the coordinator may close the session: the close waits for the
running step and the coordinator's other tasks, never for the very task it runs in, and
leaves that task to go on after ``aclose()`` returns."""

from __future__ import annotations

import logging
import os
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import pytest

from hookrun import (
    Coordinator,
    MonitoredSession,
    MonitoredTrainingSession,
    RunAfterStopError,
    RunMetadata,
    RunOptions,
    SessionClosedError,
    SessionRunContext,
    StepSession,
    latest_checkpoint,
)

pytestmark = pytest.mark.anyio

GRACE = 30.0  # a close that waited for its own task would wait this long: the tests allow 5 s
LIMIT = 5.0


class Raw:
    def __init__(self) -> None:
        self.closed = 0

    async def run(
        self, fetches: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions, metadata: RunMetadata
    ) -> list[Any]:
        await anyio.sleep(0.001)
        return [1 for _ in fetches]

    async def aclose(self) -> None:
        self.closed += 1


class Closer:
    """Starts, at its first ``before_run``, a coordinator task that closes the session, and
    one that just waits for the stop; records what happens."""

    overlapping_steps = True

    def __init__(self, kind: str, after_close: str = "return") -> None:
        self.kind, self.after_close = kind, after_close
        self.log: list[str] = []
        self.settled = anyio.Event()  # "closed" logged, and "went on" when it goes on
        self.session: MonitoredSession | None = None
        self.coord: Coordinator | None = None
        if kind == "async":
            self.before_run = self._async_before  # type: ignore[method-assign,assignment]

    async def after_create_session(self, session: object, coord: Coordinator) -> None:
        self.coord = coord

    def before_run(self, run_context: SessionRunContext) -> None:
        self._start()

    async def _async_before(self, run_context: SessionRunContext) -> None:
        self._start()

    def _start(self) -> None:
        if not self.log:
            self.log.append("started")
            assert self.coord is not None
            self.coord.start_soon(self._close, name="closer")
            self.coord.start_soon(self._waiter, name="waiter")

    async def _waiter(self) -> None:
        assert self.coord is not None
        await self.coord.wait_for_stop()
        await anyio.sleep(0.01)  # a task that takes a moment to finish: the close waits for it
        self.log.append("waiter done")

    async def _close(self) -> None:
        assert self.session is not None
        await self.session.aclose()
        self.log.append("closed")
        if self.after_close == "sleep":  # goes on after the close: not cancelled by it
            await anyio.sleep(0.01)
            self.log.append("went on")
        self.settled.set()
        if self.after_close == "forever":  # ended when the block is left
            try:
                await anyio.sleep_forever()
            finally:
                self.log.append("cancelled at the exit")

    async def end(self, session: object) -> None:
        self.log.append("end")


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("kind", ["plain", "async"])
@pytest.mark.parametrize("after_close", ["return", "sleep", "forever"])
async def test_a_coordinator_task_closes_the_session_without_waiting_for_itself(
    n: int, kind: str, after_close: str, caplog: pytest.LogCaptureFixture
) -> None:
    raws: list[Raw] = []

    async def create() -> Raw:
        raws.append(Raw())
        return raws[-1]

    hook = Closer(kind, after_close)
    sess = MonitoredSession(create, [hook], max_in_flight=n, stop_grace_period=GRACE)
    hook.session = sess
    steps = 0
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(LIMIT):
        async with sess:
            with pytest.raises((SessionClosedError, RunAfterStopError)):
                while True:
                    await sess.run("x")
                    steps += 1
            with anyio.fail_after(LIMIT):
                await hook.settled.wait()
    assert steps >= 1
    assert hook.log[:1] == ["started"] and "end" in hook.log and "waiter done" in hook.log
    assert hook.log.index("waiter done") < hook.log.index("closed")  # the close waited for the other task
    assert hook.log.index("end") < hook.log.index("closed")
    if after_close == "sleep":
        assert hook.log[-1] == "went on"
    if after_close == "forever":
        assert hook.log[-1] == "cancelled at the exit"
    assert [raw.closed for raw in raws] == [1] * len(raws)
    assert not [r for r in caplog.records if "grace period" in r.getMessage() or "ignored" in r.getMessage()]


async def test_join_from_a_coordinator_task_waits_for_the_others_only() -> None:
    log: list[str] = []
    joined = anyio.Event()
    async with Coordinator(stop_grace_period=GRACE) as coord:

        async def other() -> None:
            await anyio.sleep(0.01)
            log.append("other done")

        async def joiner() -> None:
            await coord.join(stop_grace_period=GRACE)
            log.append(f"joined={coord.joined}")  # its own task still runs: not joined
            joined.set()

        coord.start_soon(other)
        with anyio.fail_after(LIMIT):
            coord.start_soon(joiner)
            await joined.wait()
    assert log == ["other done", "joined=False"]
    assert coord.joined  # leaving ``async with`` joined it


@pytest.mark.parametrize("max_in_flight", [1, 4])
async def test_checkpoints_stay_in_order_after_a_coordinator_task_joined(tmp_path: Any, max_in_flight: int) -> None:
    """A task that joins the coordinator while the session runs must not make the saver
    believe its writes can no longer finish: saves stay one at a time, the newest is the
    latest, and the save at the end is written."""

    class JoinFromTask:
        overlapping_steps = True

        def __init__(self) -> None:
            self.started = False

        def after_create_session(self, session: object, coord: Coordinator) -> None:
            if not self.started:
                self.started = True
                coord.start_soon(coord.join)

    session = MonitoredTrainingSession(
        lambda: StepSession(lambda feeds: {"y": feeds["x"]}), checkpoint_dir=str(tmp_path),
        save_checkpoint_steps=1, log_step_count_steps=0, hooks=[JoinFromTask()], max_in_flight=max_in_flight,
    )
    with anyio.fail_after(LIMIT):
        async with session:
            await anyio.sleep(0.02)  # the joining task ran: no other task was there to wait for
            ys = [y async for y in session.iterate("y", ({"x": i} for i in range(12)))]
    assert ys == list(range(12))
    latest = latest_checkpoint(str(tmp_path))
    assert latest is not None and latest.endswith("ckpt-12")
    steps = sorted(int(name.split("-")[1].split(".")[0]) for name in os.listdir(tmp_path) if name.startswith("ckpt-"))
    assert steps[-1] == 12
