"""The semantics of cancellation, errors, timeouts and contextvars on a monitored session,
fresh and after a warm-up: many quiet steps, or many steps in which every hook waited
(so the dispatcher has learnt that hooks wait and parks a worker per hook).

Every hook here behaves quietly (or waits once) during the warm-up and does its test
behaviour only once armed, so each test runs the same step on a session in each state.
"""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun import HookTimeoutError, SessionRunContext, SessionRunHook
from hookrun.testing import ScriptedCreator

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("warm_var", default="unset")
WARM_STEPS = 40


class Boom(ValueError):
    pass


class Switch:
    """What every hook of a test does now: its warm-up behaviour, or its test behaviour."""

    def __init__(self, warmup: str) -> None:
        self.warmup = warmup
        self.armed = False

    async def quietly(self) -> bool:
        """Behave as the warm-up asks; True while not armed (the hook returns then)."""
        if self.armed:
            return False
        if self.warmup == "waiting":
            await anyio.lowlevel.checkpoint()
        return True


class Hook(SessionRunHook):
    def __init__(self, switch: Switch, behaviour: str, log: list[Any], name: str) -> None:
        self.switch, self.behaviour, self.log, self.name = switch, behaviour, log, name

    async def before_run(self, run_context: SessionRunContext) -> None:
        if await self.switch.quietly():
            return
        self.log.append(("var", VAR.get()))
        self.log.append(("started", self.name))
        task = anyio.get_current_task().id
        if self.behaviour == "sets_var":
            VAR.set(self.name)
            await anyio.lowlevel.checkpoint()
            self.log.append(("own var", VAR.get() == self.name))
        elif self.behaviour == "waits":
            try:
                with anyio.CancelScope():  # a scope of its own, opened before it suspends
                    await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                self.log.append(("cancelled", self.name))
                raise
        elif self.behaviour == "fails":
            await anyio.lowlevel.checkpoint()
            raise Boom(self.name)
        elif self.behaviour == "fails_plainly":
            raise Boom(self.name)
        elif self.behaviour == "hangs":
            await anyio.sleep_forever()
        self.log.append(("same task", anyio.get_current_task().id == task))


class PlainFailer(SessionRunHook):
    """A plain-function hook that fails once armed."""

    def __init__(self, switch: Switch) -> None:
        self.switch = switch

    def before_run(self, run_context: SessionRunContext) -> None:
        if self.switch.armed:
            raise Boom("plain")


@pytest.fixture(params=["fresh", "quiet", "waiting"])
def warmup(request: pytest.FixtureRequest) -> str:
    """The session's state when the tested step runs."""
    return str(request.param)


def session(hooks: list[SessionRunHook], **options: Any) -> hookrun.MonitoredSession:
    return hookrun.MonitoredSession(ScriptedCreator({"x": 1}), hooks, **options)


async def warm(sess: hookrun.MonitoredSession, switch: Switch) -> None:
    """Run the warm-up steps, then arm every hook."""
    if switch.warmup != "fresh":
        for _ in range(WARM_STEPS):
            assert await sess.run("x") == 1
    switch.armed = True


@pytest.mark.parametrize("failer", ["fails", "fails_plainly"])
async def test_a_failing_hook_cancels_every_waiting_sibling(warmup: str, failer: str) -> None:
    """Whatever the session did before, a failure cancels the hooks waiting beside it and
    run() raises it at once."""
    switch, log = Switch(warmup), list[Any]()
    hooks: list[SessionRunHook] = [Hook(switch, "waits", log, "w0"), Hook(switch, failer, log, "f"),
                                   Hook(switch, "waits", log, "w1")]
    async with session(hooks) as sess:
        await warm(sess, switch)
        with anyio.fail_after(5), pytest.raises(Boom, match=r"^f$"):
            await sess.run("x")
    started = {name for what, name in log if what == "started"}
    cancelled = {name for what, name in log if what == "cancelled"}
    assert "w0" in cancelled and cancelled == started & {"w0", "w1"}  # every waiter that started


async def test_a_failing_plain_hook_cancels_an_async_one_that_waits(warmup: str) -> None:
    """A plain hook after an async one that waits is called beside it; its error cancels it."""
    switch, log = Switch(warmup), list[Any]()
    async with session([Hook(switch, "waits", log, "w"), PlainFailer(switch)]) as sess:
        await warm(sess, switch)
        with anyio.fail_after(5), pytest.raises(Boom, match="plain"):
            await sess.run("x")
        assert ("cancelled", "w") in log

async def test_outside_cancellation_cancels_every_hook_and_the_session_goes_on(warmup: str) -> None:
    """Cancelling run() from outside cancels every waiting hook, leaves no task behind, and
    the next step runs."""
    switch, log = Switch(warmup), list[Any]()
    hooks: list[SessionRunHook] = [Hook(switch, "waits", log, f"w{i}") for i in range(3)]
    async with session(hooks) as sess:
        await warm(sess, switch)
        tasks = len(anyio.get_running_tasks())
        with anyio.fail_after(5):
            with anyio.move_on_after(0.05) as scope:
                await sess.run("x")
        assert scope.cancelled_caught
        assert sorted(name for what, name in log if what == "cancelled") == ["w0", "w1", "w2"]
        assert len(anyio.get_running_tasks()) <= tasks  # no hook left running
        switch.armed = False
        assert await sess.run("x") == 1

async def test_hook_timeout_names_the_hook_that_hangs(warmup: str) -> None:
    """A hook that hangs past hook_timeout fails the step with HookTimeoutError naming it,
    while a sibling that waits briefly finishes."""
    switch, log = Switch(warmup), list[Any]()
    hooks: list[SessionRunHook] = [Hook(switch, "sets_var", log, "quick"), Hook(switch, "hangs", log, "slow")]
    async with session(hooks, hook_timeout=0.05) as sess:
        await warm(sess, switch)
        with anyio.fail_after(5), pytest.raises(HookTimeoutError, match="hook slow took longer"):
            await sess.run("x")
        assert ("own var", True) in log  # the quick sibling finished


async def test_contexts_stay_isolated_and_tasks_kept(warmup: str) -> None:
    """Each hook starts in the caller's context, keeps its own changes across a suspension,
    never leaks them to a sibling or the caller, and keeps its task."""
    switch, log = Switch(warmup), list[Any]()
    hooks: list[SessionRunHook] = [Hook(switch, "sets_var", log, f"h{i}") for i in range(4)]
    async with session(hooks) as sess:
        await warm(sess, switch)
        VAR.set("caller")
        with anyio.fail_after(5):
            await sess.run("x")
        assert VAR.get() == "caller"
        assert [seen for what, seen in log if what == "var"] == ["caller"] * 4
        assert all(ok for what, ok in log if what in ("own var", "same task"))
        assert len([1 for what, _ in log if what == "same task"]) == 4
