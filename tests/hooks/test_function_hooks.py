"""Function hooks: on_begin / on_after_create_session / on_before_run / on_after_run / on_end."""

from __future__ import annotations

from typing import Any

import pytest

from hookrun import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from hookrun.hooks import (
    FunctionHook,
    StopAtStepHook,
    every,
    on_after_create_session,
    on_after_run,
    on_before_run,
    on_begin,
    on_end,
)

from ._support import FakeClock, context, drive, settle, values


@pytest.mark.anyio
async def test_every_n_steps_with_sync_and_async_functions(session_kind: str) -> None:
    """A sync and an async after_run function both fire on steps 1, 4, 7, 10."""
    seen: dict[str, list[int]] = {"sync": [], "async": []}

    @on_after_run(every_n_steps=3)
    def plain(ctx: SessionRunContext, vals: SessionRunValues) -> None:
        seen["sync"].append(vals.global_step)

    @on_after_run(every_n_steps=3)
    async def coroutine(ctx: SessionRunContext, vals: SessionRunValues) -> None:
        seen["async"].append(vals.global_step)

    await drive([plain, coroutine, StopAtStepHook(num_steps=10)], lambda i: {}, kind=session_kind)
    assert seen == {"sync": [1, 4, 7, 10], "async": [1, 4, 7, 10]}


@pytest.mark.anyio
async def test_fetches_are_passed_on_firing_steps_only(session_kind: str) -> None:
    """on_after_run(fetches=...) fetches by key only on the steps it fires."""
    seen: list[tuple[int, Any]] = []

    @on_after_run(every_n_steps=2, fetches={"loss": "loss"})
    def log(ctx: SessionRunContext, vals: SessionRunValues) -> None:
        seen.append((vals.global_step, vals.results))

    await drive([log, StopAtStepHook(num_steps=5)], lambda i: {"loss": i}, kind=session_kind)
    assert seen == [(1, {"loss": 0}), (3, {"loss": 2}), (5, {"loss": 4})]


@pytest.mark.anyio
async def test_once_at_step_and_when() -> None:
    """once_at_step fires once; when= fires where the predicate holds."""
    once: list[int] = []
    even: list[int] = []
    hooks = [
        on_after_run(once_at_step=3)(lambda c, v: once.append(v.global_step)),
        on_after_run(when=lambda s: s % 2 == 0)(lambda c, v: even.append(v.global_step)),
        StopAtStepHook(num_steps=6),
    ]
    await drive(hooks, lambda i: {})
    assert once == [3] and even == [2, 4, 6]


@pytest.mark.anyio
async def test_composed_trigger_with_a_mock_clock() -> None:
    """trigger=every(steps=100) | every(seconds=60) fires on time with an injected clock."""
    clock, fired = FakeClock(), []
    hook = on_after_run(trigger=every(steps=100) | every(seconds=60), clock=clock)(
        lambda c, v: fired.append(v.global_step)
    )
    for step in range(1, 6):
        clock.advance(25)
        await settle(hook.after_run(context(step - 1), values(step)))
    assert fired == [1, 4]


@pytest.mark.anyio
async def test_before_run_function_may_request_fetches(session_kind: str) -> None:
    """An on_before_run function may return SessionRunArgs; it sees the step before the run."""
    steps: list[int] = []

    @on_before_run(every_n_steps=2)
    async def feed(ctx: SessionRunContext) -> SessionRunArgs:
        steps.append(ctx.global_step)
        return SessionRunArgs(feed_dict={"x": ctx.global_step})

    results = await drive(
        [feed, StopAtStepHook(num_steps=4)], lambda i: {"x": -1}, kind=session_kind, fetches="x"
    )
    assert steps == [0, 2]
    assert results == [0, -1, 2, -1]


@pytest.mark.anyio
async def test_lifecycle_functions(session_kind: str) -> None:
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

    await drive(
        [started, created, finished, StopAtStepHook(num_steps=1)], lambda i: {}, kind=session_kind
    )
    assert calls == ["begin", "created", "end"]
    assert finished.name == "finisher" and started.name == "started"


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
    with pytest.raises(ValueError, match="positive int"):
        on_before_run(every_n_steps=0)
    with pytest.raises(TypeError, match="needs a callable"):
        on_end(3)  # type: ignore[call-overload]
