"""Function hooks: on_begin / on_after_create_session / on_before_run / on_after_run / on_end,
driven with hookrun.testing."""

from __future__ import annotations

from typing import Any

import pytest

from hookrun import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from hookrun.hooks import (
    FunctionHook,
    every,
    on_after_create_session,
    on_after_run,
    on_before_run,
    on_begin,
    on_end,
)
from hookrun.testing import Drive, MockClock

pytestmark = pytest.mark.anyio


async def test_every_n_steps_with_sync_and_async_functions(drive: Drive) -> None:
    """A sync and an async after_run function both fire on steps 1, 4, 7, 10."""
    seen: dict[str, list[int]] = {"sync": [], "async": []}

    @on_after_run(every_n_steps=3)
    def plain(ctx: SessionRunContext, vals: SessionRunValues) -> None:
        seen["sync"].append(vals.global_step)

    @on_after_run(every_n_steps=3)
    async def coroutine(ctx: SessionRunContext, vals: SessionRunValues) -> None:
        seen["async"].append(vals.global_step)

    await drive([plain, coroutine], steps=10)
    assert seen == {"sync": [1, 4, 7, 10], "async": [1, 4, 7, 10]}


async def test_fetches_are_passed_on_firing_steps_only(drive: Drive) -> None:
    """on_after_run(fetches=...) fetches by key only on the steps it fires."""
    seen: list[tuple[int, Any]] = []

    @on_after_run(every_n_steps=2, fetches={"loss": "loss"})
    def log(ctx: SessionRunContext, vals: SessionRunValues) -> None:
        seen.append((vals.global_step, vals.results))

    record = await drive(log, steps=5, values={"loss": lambda step, feed: step})
    assert seen == [(1, {"loss": 0}), (3, {"loss": 2}), (5, {"loss": 4})]
    assert record.requested_at(log) == [0, 2, 4]  # decided in before_run, for the step after
    assert [run.fetches for run in record.runs] == [["loss"], [], ["loss"], [], ["loss"]]


async def test_once_at_step_and_when(drive: Drive) -> None:
    """once_at_step fires once; when= fires where the predicate holds."""
    once: list[int] = []
    even: list[int] = []
    hooks = [
        on_after_run(once_at_step=3)(lambda c, v: once.append(v.global_step)),
        on_after_run(when=lambda s: s % 2 == 0)(lambda c, v: even.append(v.global_step)),
    ]
    await drive(hooks, steps=6)
    assert once == [3] and even == [2, 4, 6]


async def test_composed_trigger_with_a_mock_clock(mock_clock: MockClock, drive: Drive) -> None:
    """trigger=every(steps=100) | every(seconds=60) fires on time with an injected clock."""
    fired: list[int] = []
    hook = on_after_run(trigger=every(steps=100) | every(seconds=60), clock=mock_clock)(
        lambda c, v: fired.append(v.global_step)
    )
    await drive(hook, steps=10, tick=25)  # the run reaching step n ends at t = 25 (n - 1)
    assert fired == [1, 4, 7, 10]  # every 60 s (t = 0, 75, 150, 225) long before 100 steps


async def test_composed_trigger_steps_win_on_a_frozen_clock(drive: Drive) -> None:
    """With the clock standing still only the step period fires."""
    fired: list[int] = []
    hook = on_after_run(trigger=every(steps=100) | every(seconds=60), clock=MockClock())(
        lambda c, v: fired.append(v.global_step)
    )
    await drive(hook, steps=250)
    assert fired == [1, 101, 201]


async def test_every_n_secs_follows_the_clock(mock_clock: MockClock, drive: Drive) -> None:
    """on_before_run(every_n_secs=60) fires on the mock clock's time, without sleeping."""
    times: list[float] = []
    hook = on_before_run(every_n_secs=60, clock=mock_clock)(lambda ctx: times.append(mock_clock()))
    await drive(hook, steps=8, tick=25)  # the steps start at t = 0, 25, ..., 175
    assert times == [0, 75, 150]


async def test_before_run_function_may_request_fetches(drive: Drive) -> None:
    """An on_before_run function may return SessionRunArgs; it sees the step before the run."""
    steps: list[int] = []

    @on_before_run(every_n_steps=2)
    async def feed(ctx: SessionRunContext) -> SessionRunArgs:
        steps.append(ctx.global_step)
        return SessionRunArgs(feed_dict={"x": ctx.global_step})

    record = await drive(feed, steps=4, values={"y": lambda step, feeds: feeds.get("x", -1)}, fetches="y")
    assert steps == [0, 2]
    assert record.results == [0, -1, 2, -1]
    assert record.requests(feed) == [SessionRunArgs(feed_dict={"x": 0}), None,
                                     SessionRunArgs(feed_dict={"x": 2}), None]


async def test_lifecycle_functions(drive: Drive) -> None:
    """on_begin, on_after_create_session and on_end call their functions once each."""
    calls: list[str] = []

    @on_begin
    def started() -> None:
        calls.append("begin")

    @on_after_create_session
    async def created(session: object, coord: object) -> None:
        calls.append("created")

    @on_end(name="finisher")
    def finished(session: object) -> None:
        calls.append("end")

    record = await drive([started, created, finished], steps=1)
    assert calls == ["begin", "created", "end"]
    assert finished.name == "finisher" and started.name == "started"
    assert [call.phase for call in record.calls] == ["begin", "after_create_session", "end"]


async def test_after_create_session_runs_again_after_recovery(drive: Drive) -> None:
    """A recovery re-creates the session: on_after_create_session runs once per session,
    on_begin and on_end once in all."""
    started, created, finished = (on_begin(lambda: None), on_after_create_session(lambda s, c: None),
                                  on_end(lambda s: None))
    record = await drive([started, created, finished], steps=3, errors={1: "aborted"})
    assert [call.phase for call in record.calls] == [
        "begin", "after_create_session", "after_create_session", "end"
    ]
    assert [call.session for call in record.of(created)] == [0, 1]


def test_decorated_function_stays_callable_and_named() -> None:
    """The hook calls through to the function and keeps its name and docstring."""

    @on_after_run
    def tally(ctx: object, vals: object) -> str:
        """Count things."""
        return "called"

    assert isinstance(tally, FunctionHook) and isinstance(tally, SessionRunHook)
    assert tally(None, None) == "called"
    assert tally.name == "tally" and tally.__doc__ == "Count things."
    assert "tally" in repr(tally)


def test_only_needed_methods_are_overridden() -> None:
    """An after_run function hook without fetches overrides only after_run."""
    hook = on_after_run(lambda c, v: None)
    assert type(hook).before_run is SessionRunHook.before_run
    assert type(hook).after_run is not SessionRunHook.after_run


def test_schedules_are_exclusive() -> None:
    """More than one schedule is a ValueError pointing at composition."""
    with pytest.raises(ValueError, match="compose triggers with"):
        on_after_run(every_n_steps=1, every_n_secs=1)
    with pytest.raises(TypeError, match="trigger must be a Trigger"):
        on_after_run(trigger=5)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"^on_before_run: every_n_steps must be None or an int >= 1, got 0$"):
        on_before_run(every_n_steps=0)
    with pytest.raises(TypeError, match="needs a callable"):
        on_end(3)  # type: ignore[call-overload]
