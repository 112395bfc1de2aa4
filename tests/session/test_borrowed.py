"""hookrun.borrowed: a nested monitored session over a raw session it does not close, and a
closed raw session that refuses steps instead of running them silently."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    MonitoredSession,
    RunMetadata,
    RunOptions,
    SessionClosedError,
    SingularMonitoredSession,
    StepSession,
)
from hookrun.hooks import StopAtStepHook
from hookrun.testing import RecordingHook, ScriptedSession, drive

pytestmark = pytest.mark.anyio


def _train_session() -> StepSession:
    return StepSession(lambda feeds: {"loss": 0.5, "accuracy": 0.9})


async def test_a_nested_session_over_a_borrowed_session_leaves_it_open() -> None:
    """An evaluation pass with its own hooks over borrowed(raw) ends; training steps go on; the owner closes it."""
    evaluation_hook = RecordingHook()
    with anyio.fail_after(5):
        async with MonitoredSession(_train_session, [StopAtStepHook(last_step=4)]) as train:
            raw = train.raw_session()
            while not train.should_stop():
                assert await train.run("loss") == 0.5
                lent = hookrun.borrowed(train.raw_session())
                async with SingularMonitoredSession(lent, [evaluation_hook, StopAtStepHook(num_steps=2)]) as ev:
                    assert [r async for r in ev.iterate("accuracy")] == [0.9, 0.9]
                assert not raw.closed
            assert await train.global_step() == 4  # the evaluation steps have a counter of their own
    assert raw.closed
    assert [call.phase for call in evaluation_hook.calls].count("end") == 4


async def test_a_step_on_a_raw_session_a_nested_session_closed_is_an_error() -> None:
    """Without borrowed, the nested session closes the raw session; the next training step raises, never silent."""
    async with MonitoredSession(_train_session) as train:
        async with SingularMonitoredSession(lambda: train.raw_session()) as ev:
            await ev.run("accuracy")
        with pytest.raises(SessionClosedError, match=r"run called after the session was closed.*hookrun.borrowed"):
            await train.run("loss")


async def test_a_step_session_refuses_run_after_aclose() -> None:
    """StepSession.run after aclose() raises SessionClosedError."""
    session = StepSession(lambda feeds: {"x": 1})
    assert await session.run(["x"], {}) == [1]
    await session.aclose()
    with pytest.raises(SessionClosedError, match=r"StepSession\(.*\)\.run called after the session was closed"):
        await session.run(["x"], {})


async def test_the_lent_session_reads_through_but_cannot_be_closed() -> None:
    """Hooks see the borrowed session's attributes; its close belongs to the owner."""
    owner = ScriptedSession({"x": 1}, name="owner")
    seen: list[Any] = []

    class Peek(hookrun.SessionRunHook):
        def after_create_session(self, session: Any, coord: object) -> None:
            seen.append((session.name, session.steps, getattr(session, "close", None)))

    async with SingularMonitoredSession(hookrun.borrowed(owner), [Peek()]) as ev:
        assert await ev.run("x") == 1
        assert repr(ev.raw_session()) == f"borrowed({owner!r})"
    assert seen == [("owner", 0, None)] and owner.closed == 0 and owner.steps == 1


def test_borrowed_refuses_what_it_cannot_lend() -> None:
    """None, a monitored session and a non-session are refused, saying what to pass."""
    with pytest.raises(TypeError, match=r"borrowed\(None\): there is no session to lend"):
        hookrun.borrowed(None)
    with pytest.raises(TypeError, match=r"MonitoredSession is a monitored session .*pass its raw_session\(\)"):
        hookrun.borrowed(MonitoredSession(_train_session))
    with pytest.raises(TypeError, match=r"borrowed\(\) needs a session with 'async def run"):
        hookrun.borrowed(42)


async def test_lending_a_lent_session_lends_the_owners_session() -> None:
    """borrowed(nested.raw_session()) lends the owner's session again, not the view."""
    owner = ScriptedSession({"x": 1})
    async with (
        SingularMonitoredSession(hookrun.borrowed(owner)) as outer,
        SingularMonitoredSession(hookrun.borrowed(outer.raw_session())) as inner,
    ):
        assert inner.raw_session().session is owner
        assert await inner.run("x") == 1
    assert owner.closed == 0


async def test_the_kits_sessions_refuse_run_after_close() -> None:
    """ScriptedSession and drive()'s sessions raise SessionClosedError after close, as StepSession does."""
    scripted = ScriptedSession({"x": 1})
    await scripted.aclose()
    with pytest.raises(SessionClosedError, match="used after close"):
        await scripted.run(["x"], {}, RunOptions(), RunMetadata())

    kept: list[Any] = []

    class Keep(hookrun.SessionRunHook):
        def after_create_session(self, session: Any, coord: object) -> None:
            kept.append(session)

    await drive(Keep(), steps=1)
    with pytest.raises(SessionClosedError, match="used after close"):
        await kept[0].run([], {}, RunOptions(), RunMetadata())
