"""The periodic built-in hooks with steps in flight (``max_in_flight=4``), runs ending out of
order: each acts on the steps one step at a time would, with that step's own values, and
fetches on no other step."""

from __future__ import annotations

import json
import logging
from collections.abc import Hashable
from pathlib import Path

import anyio
import pytest

from hookrun import AbortedError, MonitoredSession, RetryPolicy
from hookrun.hooks import LoggingTensorHook, ProfilerHook, SummarySaverHook
from tests.session._in_flight_support import Gates, release_in_order

from ._support import FetchLogCreator, ListWriter, fetching

pytestmark = pytest.mark.anyio

#: Runs end in this order (by feed): each pair swapped, then a run overtaking two.
ORDER = [1, 0, 3, 2, 6, 4, 5, 7, 9, 8, 11, 10]


async def run_overlapping(hook: object, steps: int = len(ORDER)) -> dict[int, list[Hashable]]:
    """Run ``steps`` steps (feeds ``{"i": i}``) four in flight, releasing the runs in ``ORDER``;
    return the keys each feed's run was asked for."""
    gates = Gates()
    creator = FetchLogCreator(gates)
    feeds = [{"i": i} for i in range(steps)]
    async with MonitoredSession(creator, [hook], max_in_flight=4) as sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, ORDER[:steps], 4)
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate(None, feeds)] == [None] * steps
    return creator.fetched


async def test_logging_tensor_hook_logs_the_iterations_one_lane_would(caplog: pytest.LogCaptureFixture) -> None:
    """every_n_iter=3: iterations 0, 3, 6, 9 log their own values and only they fetch."""
    hook = LoggingTensorHook(["y"], every_n_iter=3, formatter=lambda values: f"y={values['y']}")
    with caplog.at_level(logging.INFO, logger="hookrun"):
        fetched = await run_overlapping(hook)
    lines = [r.getMessage() for r in caplog.records if r.name == "hookrun" and r.levelno == logging.INFO]
    assert lines == ["y=0", "y=3", "y=6", "y=9"]
    assert fetching(fetched) == [0, 3, 6, 9]


async def test_logging_tensor_hook_at_end_logs_the_last_step(caplog: pytest.LogCaptureFixture) -> None:
    """at_end with overlap: every step fetches, the last step's values are logged at end."""
    hook = LoggingTensorHook(["y"], every_n_iter=5, at_end=True, formatter=lambda values: f"y={values['y']}")
    with caplog.at_level(logging.INFO, logger="hookrun"):
        fetched = await run_overlapping(hook)
    lines = [r.getMessage() for r in caplog.records if r.name == "hookrun" and r.levelno == logging.INFO]
    assert lines == ["y=0", "y=5", "y=10", "y=11"]
    assert fetching(fetched) == list(range(len(ORDER)))


async def test_summary_saver_hook_writes_the_steps_one_lane_would() -> None:
    """save_steps=3: steps 1, 4, 7, 10 are written with their own values and only they fetch."""
    writer = ListWriter()
    hook = SummarySaverHook(save_steps=3, summary_writer=writer, scalars={"y": "y"})
    fetched = await run_overlapping(hook)
    assert writer.scalars == [("y", 0.0, 1), ("y", 3.0, 4), ("y", 6.0, 7), ("y", 9.0, 10)]
    assert fetching(fetched) == [0, 3, 6, 9]


async def test_profiler_hook_traces_the_steps_one_lane_would(tmp_path: Path) -> None:
    """save_steps=3: the first run starts the count, steps 3, 6, 9, 12 are traced, one timeline
    each holding that step's own calls."""
    hook = ProfilerHook(save_steps=3, output_dir=tmp_path)
    await run_overlapping(hook)
    assert [p.name for p in hook.saved_files] == [f"timeline-{n}.json" for n in (3, 6, 9, 12)]
    for path in hook.saved_files:
        events = json.loads(path.read_text())["traceEvents"]
        names = sorted(e["name"] for e in events if e["ph"] == "X")
        assert names == ["after_run:ProfilerHook", "before_run:ProfilerHook", "run"]


async def test_profiler_hook_writes_every_traced_step_done_before_the_next_before_run(tmp_path: Path) -> None:
    """save_steps=1: after_run phases of several traced steps may come before the next
    before_run; none of their timelines is lost."""
    hook = ProfilerHook(save_steps=1, output_dir=tmp_path)
    await run_overlapping(hook)
    assert [p.name for p in hook.saved_files] == [f"timeline-{n}.json" for n in range(2, len(ORDER) + 1)]


async def test_a_step_re_run_after_its_lane_recovers_decides_again(caplog: pytest.LogCaptureFixture) -> None:
    """Feed 2's lane fails once: the step re-runs (before_run again, after later steps'), and the
    lines are still those of iterations 0, 2, 4, 6, each with its own value."""
    gates = Gates()
    gates.open_all = True
    creator = FetchLogCreator(gates, errors={2: {2: AbortedError("lane lost")}})
    hook = LoggingTensorHook(["y"], every_n_iter=2, formatter=lambda values: f"y={values['y']}")
    with caplog.at_level(logging.INFO, logger="hookrun"):
        async with MonitoredSession(
            creator, [hook], max_in_flight=4, retry=RetryPolicy(initial_delay=0, jitter=False)
        ) as sess:
            with anyio.fail_after(10):
                assert [r async for r in sess.iterate(None, [{"i": i} for i in range(8)])] == [None] * 8
    assert len(creator.sessions) == 5  # the lane was re-created
    lines = [r.getMessage() for r in caplog.records if r.name == "hookrun" and r.levelno == logging.INFO]
    assert lines == ["y=0", "y=2", "y=4", "y=6"]
    assert fetching(creator.fetched) == [0, 2, 4, 6]
