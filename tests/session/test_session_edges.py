"""Edges of the session's states and of the dispatcher's entry points: each says what it
refuses and why, and closing reports every failure."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun import AbortedError, RetryPolicy, SessionClosedError, SessionRunContext, SessionRunHook
from hookrun._dispatch._dispatcher import Dispatcher
from hookrun.testing import ScriptedCreator

pytestmark = pytest.mark.anyio


class Waits(SessionRunHook):
    async def before_run(self, run_context: SessionRunContext) -> None:
        await anyio.lowlevel.checkpoint()


def test_repr_names_the_state_and_every_hook() -> None:
    """repr shows the state and the hooks' names."""
    sess = hookrun.MonitoredSession(ScriptedCreator({}), [Waits(), Waits()])
    assert repr(sess) == "MonitoredSession(new, hooks=[Waits, Waits])"


def test_with_instead_of_async_with_is_refused() -> None:
    """``with`` on a monitored session is a TypeError saying to use ``async with``."""
    sess = hookrun.MonitoredSession(ScriptedCreator({}))
    with pytest.raises(TypeError, match="use 'async with'"):
        sess.__enter__()
    with pytest.raises(TypeError, match="use 'async with'"):
        sess.__exit__(None, None, None)


async def test_closing_reports_the_first_failure_with_the_others_as_notes() -> None:
    """When several hooks' end and the session's close fail, the first propagates, the
    others are attached as notes."""

    class FailsAtEnd(SessionRunHook):
        def __init__(self, name: str) -> None:
            self.name = name

        async def end(self, session: Any) -> None:
            raise ValueError(self.name)

    class BadClose:
        async def run(self, fetches: Any, feeds: Any, options: Any, metadata: Any) -> list[Any]:
            return [None] * len(fetches)

        async def aclose(self) -> None:
            raise OSError("cannot close")

    async def create() -> BadClose:
        return BadClose()

    with pytest.raises(ValueError, match="first") as info:
        async with hookrun.MonitoredSession(create, [FailsAtEnd("first"), FailsAtEnd("second")]) as sess:
            await sess.run()
    notes = "\n".join(info.value.__notes__)
    assert "cannot close" in notes


async def test_a_step_function_without_a_session_says_why() -> None:
    """run_step_fn() on a SingularMonitoredSession never needs recovery; with no session left
    (re-creation failed for good) a MonitoredSession's step function tries to create again
    and raises the creator's error."""
    creator = ScriptedCreator(
        {"x": 1}, session_errors={0: {0: AbortedError("lost")}}, errors={1: ValueError("cannot create")}
    )
    async with hookrun.MonitoredSession(creator, retry=RetryPolicy(max_attempts=3, initial_delay=0)) as sess:
        with pytest.raises(ValueError, match="cannot create"):
            await sess.run("x")
        assert sess.raw_session() is None and not sess.should_stop()

        async def step(context: hookrun.StepContext) -> Any:
            return await context.run_with_hooks("x")

        assert await sess.run_step_fn(step) == 1
    with pytest.raises(SessionClosedError, match="after the session closed"):
        await sess.run_step_fn(step)


async def test_a_dispatcher_without_a_task_group_refuses_hooks_that_wait() -> None:
    """A hook that waits needs workers, which need the session's task group."""
    dispatcher = Dispatcher([Waits(), Waits()])
    plan = dispatcher.plans["before_run"]
    with pytest.raises(RuntimeError, match="no task group"):
        await dispatcher.run(plan, [(None,)] * 2)


async def test_a_cancellable_phase_started_without_a_scope_is_refused() -> None:
    """The session must enter a cancel scope before a phase whose hooks may need cancelling."""
    async with anyio.create_task_group() as tg:
        dispatcher = Dispatcher([Waits(), Waits()], task_group=lambda: tg)
        plan = dispatcher.plans["before_run"]
        with pytest.raises(RuntimeError, match="without a cancel scope"):
            dispatcher.start(plan, [(None,)] * 2, None)
