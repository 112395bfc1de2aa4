"""The periodic built-in hooks and a step given up without their ``after_run`` (an earlier
hook's ``after_run`` raised, or the caller was cancelled): the step records no trigger, so
the steps decided after it are decided by the timer alone, one step at a time exactly as
the timer would, and with steps in flight once the step is over."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from pathlib import Path

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    sequential,
)
from hookrun.hooks import LoggingTensorHook, ProfilerHook, SummarySaverHook
from tests.session._in_flight_support import Gates

from ._support import FetchLogCreator, ListWriter, fetching

pytestmark = pytest.mark.anyio

HOWS = ["error", "cancel"]


class GiveUp(SessionRunHook):
    """In the ``after_run`` of the step fed ``{"i": at}``: raise, or cancel ``scope`` (the
    caller's) and wait to be cancelled."""

    overlapping_steps = True

    def __init__(self, at: int, how: str) -> None:
        self.at = at
        self.how = how
        self.scope = anyio.CancelScope()

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        feeds = run_context.original_args.feed_dict
        if feeds is None or feeds["i"] != self.at:
            return
        if self.how == "error":
            raise RuntimeError("given up")
        self.scope.cancel()
        await anyio.sleep_forever()


async def run_giving_up(hook: object, at: int, how: str, steps: int = 8) -> dict[int, list[Hashable]]:
    """One step at a time, feeds ``{"i": i}``: the step fed ``at`` is given up in its
    ``after_run`` phase before ``hook``'s; the caller goes on. Return what each run fetched."""
    gates = Gates()
    gates.open_all = True
    creator = FetchLogCreator(gates)
    giver = GiveUp(at, how)
    async with MonitoredSession(creator, [sequential(giver, hook)]) as sess:
        with anyio.fail_after(10):
            for i in range(steps):
                with giver.scope:
                    if i == at and how == "error":
                        with pytest.raises(RuntimeError, match="given up"):
                            await sess.run(None, {"i": i})
                    else:
                        await sess.run(None, {"i": i})
                assert giver.scope.cancelled_caught is (i == at and how == "cancel")
                giver.scope = anyio.CancelScope()
    return creator.fetched


def log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "hookrun" and r.levelno == logging.INFO]


@pytest.mark.parametrize("how", HOWS)
async def test_logging_tensor_hook_one_step_at_a_time(how: str, caplog: pytest.LogCaptureFixture) -> None:
    """every_n_iter=2, feed 2 (iteration 2) given up: it is not counted, so feed 3 logs."""
    hook = LoggingTensorHook(["y"], every_n_iter=2, formatter=lambda values: f"y={values['y']}")
    with caplog.at_level(logging.INFO, logger="hookrun"):
        fetched = await run_giving_up(hook, 2, how)
    assert [line for line in log_lines(caplog) if line.startswith("y=")] == ["y=0", "y=3", "y=5", "y=7"]
    assert fetching(fetched) == [0, 2, 3, 5, 7]


@pytest.mark.parametrize("how", HOWS)
async def test_summary_saver_hook_one_step_at_a_time(how: str) -> None:
    """save_steps=2, the run reaching step 3 given up: the next run (step 4) writes."""
    writer = ListWriter()
    hook = SummarySaverHook(save_steps=2, summary_writer=writer, scalars={"y": "y"})
    fetched = await run_giving_up(hook, 2, how)
    assert writer.scalars == [("y", 0.0, 1), ("y", 3.0, 4), ("y", 5.0, 6), ("y", 7.0, 8)]
    assert fetching(fetched) == [0, 2, 3, 5, 7]


@pytest.mark.parametrize("how", HOWS)
async def test_profiler_hook_one_step_at_a_time(how: str, tmp_path: Path) -> None:
    """save_steps=2, the traced run reaching step 2 given up: the next run (step 3) is traced."""
    hook = ProfilerHook(save_steps=2, output_dir=tmp_path)
    await run_giving_up(hook, 1, how)
    assert [p.name for p in hook.saved_files] == ["timeline-3.json", "timeline-5.json", "timeline-7.json"]


async def until_started(gates: Gates, *feeds: int) -> None:
    while not set(feeds) <= set(gates.started):
        await anyio.wait_all_tasks_blocked()


async def run_cancelling_a_caller(hook: object, first: int, rest: int = 3) -> dict[int, list[Hashable]]:
    """Four in flight, feeds ``{"i": i}``: feeds ``0..first-1`` one at a time; then callers
    X (feed ``first``) and Y (``first + 1``) together, X cancelled in its run; once X is
    over, Z (``first + 2``) beside Y; then ``rest`` feeds one at a time. Return the fetches."""
    gates = Gates()
    creator = FetchLogCreator(gates)
    x_scope, x_over = anyio.CancelScope(), anyio.Event()

    async with MonitoredSession(creator, [hook], max_in_flight=4) as sess:

        async def one(i: int) -> None:
            gates.open(i)
            await sess.run(None, {"i": i})

        async def caller_x() -> None:
            with x_scope:
                await sess.run(None, {"i": first})
            x_over.set()

        with anyio.fail_after(10):
            for i in range(first):
                await one(i)
            async with anyio.create_task_group() as tg:
                tg.start_soon(caller_x)
                await until_started(gates, first)
                tg.start_soon(sess.run, None, {"i": first + 1})
                await until_started(gates, first + 1)
                x_scope.cancel()
                await x_over.wait()
                tg.start_soon(sess.run, None, {"i": first + 2})
                await until_started(gates, first + 2)
                gates.open(first + 1, first + 2)
            assert x_scope.cancelled_caught
            for i in range(first + 3, first + 3 + rest):
                await one(i)
    return creator.fetched


async def test_logging_tensor_hook_with_a_caller_cancelled_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    """every_n_iter=3: X (iteration 3) is cancelled; Z, decided after, is iteration 4 and due."""
    hook = LoggingTensorHook(["y"], every_n_iter=3, formatter=lambda values: f"y={values['y']}")
    with caplog.at_level(logging.INFO, logger="hookrun"):
        fetched = await run_cancelling_a_caller(hook, 3)
    assert log_lines(caplog) == ["y=0", "y=5", "y=8"]
    assert fetching(fetched) == [0, 3, 5, 8]


async def test_summary_saver_hook_with_a_caller_cancelled_in_flight() -> None:
    """save_steps=3: X (step 4) is cancelled; Z, decided after, reaches step 6 and is written."""
    writer = ListWriter()
    hook = SummarySaverHook(save_steps=3, summary_writer=writer, scalars={"y": "y"})
    fetched = await run_cancelling_a_caller(hook, 3)
    assert writer.scalars == [("y", 0.0, 1), ("y", 5.0, 6), ("y", 8.0, 9)]
    assert fetching(fetched) == [0, 3, 5, 8]


async def test_profiler_hook_with_a_caller_cancelled_in_flight(tmp_path: Path) -> None:
    """save_steps=3: X (step 6) is cancelled; Z, decided after, reaches step 8 and is traced."""
    hook = ProfilerHook(save_steps=3, output_dir=tmp_path)
    await run_cancelling_a_caller(hook, 5)
    assert [p.name for p in hook.saved_files] == ["timeline-3.json", "timeline-8.json", "timeline-11.json"]

