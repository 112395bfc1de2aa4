"""A clean-stop error (``OutOfRangeError``, ``StopAsyncIteration``, ``anyio.EndOfStream``)
follows one rule at every ``max_in_flight``, TensorFlow's: raised by the step of a
``run()`` or ``run_step_fn()`` it is that caller's error, and nothing more (the session
does not stop, the other steps in flight and the other callers go on); met by a step of
``iterate()`` it is the end of the input: the loop ends and the session stops."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import MonitoredSession, OutOfRangeError, RunAfterStopError, StepContext, StepSession

pytestmark = pytest.mark.anyio

LIMIT = 10.0
LANES = [1, 2, 4]
CLEAN_STOPS = [
    pytest.param(lambda: OutOfRangeError("input exhausted"), id="OutOfRangeError"),
    pytest.param(StopAsyncIteration, id="StopAsyncIteration"),
    pytest.param(anyio.EndOfStream, id="EndOfStream"),
]


@pytest.mark.parametrize("make_error", CLEAN_STOPS)
@pytest.mark.parametrize("max_in_flight", LANES)
async def test_run_raises_a_clean_stop_to_its_caller_and_the_session_goes_on(max_in_flight: int, make_error: Any) -> None:
    error = make_error()

    async def step(feeds: Mapping[str, Any]) -> dict[str, Any]:
        if feeds["x"] == 1:
            raise error
        return {"y": feeds["x"]}

    async with MonitoredSession(lambda: StepSession(step), max_in_flight=max_in_flight) as sess:
        with anyio.fail_after(LIMIT):
            assert await sess.run("y", {"x": 0}) == 0
            with pytest.raises(type(error)) as raised:
                await sess.run("y", {"x": 1})
            assert raised.value is error
            assert not sess.should_stop()
            assert await sess.run("y", {"x": 2}) == 2  # a later run() runs
            assert not sess.should_stop()
        assert await sess.step_counter.get() == 2


@pytest.mark.parametrize("max_in_flight", LANES)
async def test_a_clean_stop_of_one_run_leaves_the_other_callers_alone(max_in_flight: int) -> None:
    """The failing step holds a lane while the others are in flight or wait for a lane: they
    all get their results (none is cancelled, none is refused as after a stop)."""
    fail_now, release = anyio.Event(), anyio.Event()

    async def step(feeds: Mapping[str, Any]) -> dict[str, Any]:
        if feeds["x"] == 0:
            await fail_now.wait()
            raise OutOfRangeError("input exhausted")
        await release.wait()
        return {"y": feeds["x"]}

    others = range(1, max_in_flight + 2)  # N - 1 in flight beside it, two waiting for a lane
    outcomes: dict[int, Any] = {}
    async with MonitoredSession(lambda: StepSession(step), max_in_flight=max_in_flight) as sess:

        async def call(x: int) -> None:
            try:
                outcomes[x] = await sess.run("y", {"x": x})
            except Exception as exc:
                outcomes[x] = exc

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, 0)
                await anyio.wait_all_tasks_blocked()  # its step holds a lane first
                for x in others:
                    tg.start_soon(call, x)
                await anyio.wait_all_tasks_blocked()
                fail_now.set()
                await anyio.wait_all_tasks_blocked()
                assert isinstance(outcomes.pop(0), OutOfRangeError)
                assert not sess.should_stop()
                release.set()
            assert outcomes == {x: x for x in others}
            assert not sess.should_stop()
            assert await sess.run("y", {"x": 9}) == 9


@pytest.mark.parametrize("max_in_flight", LANES)
async def test_run_step_fn_raising_a_clean_stop_cancels_no_other_step(max_in_flight: int) -> None:
    release = anyio.Event()

    async def step(feeds: Mapping[str, Any]) -> dict[str, Any]:
        await release.wait()
        return {"y": feeds["x"]}

    async def step_fn(ctx: StepContext) -> Any:
        raise OutOfRangeError("input exhausted")

    outcomes: dict[str, Any] = {}
    async with MonitoredSession(lambda: StepSession(step), max_in_flight=max_in_flight) as sess:

        async def run() -> None:
            try:
                outcomes["run"] = await sess.run("y", {"x": 1})
            except Exception as exc:
                outcomes["run"] = exc

        async def run_step_fn() -> None:
            try:
                outcomes["step_fn"] = await sess.run_step_fn(step_fn)
            except Exception as exc:
                outcomes["step_fn"] = exc

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run)
                await anyio.wait_all_tasks_blocked()  # in flight (its raw run waits)
                tg.start_soon(run_step_fn)  # with one lane: waits for its turn
                await anyio.wait_all_tasks_blocked()
                release.set()
            assert outcomes["run"] == 1
            assert isinstance(outcomes["step_fn"], OutOfRangeError)
            assert not sess.should_stop()
            assert await sess.run("y", {"x": 2}) == 2
        assert await sess.step_counter.get() == 2


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("max_in_flight", LANES)
async def test_iterate_ends_its_loop_on_a_clean_stop_and_stops_the_session(max_in_flight: int, ordered: bool) -> None:
    async def step(feeds: Mapping[str, Any]) -> dict[str, Any]:
        if feeds["x"] == 3:
            raise OutOfRangeError("input exhausted")
        await anyio.lowlevel.checkpoint()
        return {"y": feeds["x"]}

    feeds = [{"x": x} for x in range(20)]
    options = {} if ordered else {"ordered": False}
    async with MonitoredSession(lambda: StepSession(step), max_in_flight=max_in_flight) as sess:
        with anyio.fail_after(LIMIT):
            got = [value async for value in sess.iterate("y", feeds, **options)]
            assert sess.should_stop()
            with pytest.raises(RunAfterStopError):
                await sess.run("y", {"x": 0})
    assert 3 not in got
    assert {0, 1, 2} <= set(got)
    # Admission stops as the step fails: only steps admitted before it may still yield.
    assert max(got) < 3 + 2 * max_in_flight
