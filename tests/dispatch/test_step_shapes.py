"""The two shapes of phase a step starts itself, without the dispatcher: plain functions
only, and one async call. Each kind of hook call, through a monitored session, on a
fresh session and after many quiet steps (past the statistics' first sampled steps,
which run the same shapes on timed plans): results, errors, timeouts, cancellation,
contexts and tasks hold as on every other path.
"""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun import (
    HookTimeoutError,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunValues,
)
from hookrun.testing import ScriptedCreator

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("shape_var", default="unset")
WARM_STEPS = 300
LONE_KINDS = ("returns", "fetches", "sets_var", "suspends", "fails_before", "fails_after", "hangs")
TIMEOUT = 0.05


class Boom(ValueError):
    pass


class LoneHook:
    """One async method, ``phase``; quiet until armed, then behaves as ``kind``."""

    def __init__(self, phase: str, kind: str) -> None:
        self.kind, self.armed = kind, False
        self.log: list[tuple[str, Any]] = []
        self.name = f"{kind}_hook"
        self.calls = 0
        setattr(self, phase, self._before_run if phase == "before_run" else self._after_run)
        if phase == "after_run" and kind == "fetches":  # what its after_run receives
            self.before_run = lambda run_context: SessionRunArgs("x")

    async def _before_run(self, run_context: SessionRunContext) -> Any:
        return await self._behave(run_context)

    async def _after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> Any:
        self.log.append(("results", run_values.results))
        return await self._behave(run_context)

    async def _behave(self, run_context: SessionRunContext) -> Any:
        self.calls += 1
        fetch = SessionRunArgs("x") if self.kind == "fetches" else None
        if not self.armed:
            return fetch
        self.log.append(("var", VAR.get()))
        task = anyio.get_current_task().id
        if self.kind == "sets_var":
            VAR.set("set by the hook")
            await anyio.lowlevel.checkpoint()
            self.log.append(("own var", VAR.get()))
        elif self.kind == "fails_before":
            raise Boom(self.kind)
        elif self.kind in ("suspends", "fails_after", "hangs"):
            with anyio.CancelScope():  # a scope of its own, opened before it suspends
                if self.kind == "hangs":
                    await anyio.sleep_forever()
                await anyio.lowlevel.checkpoint()
            if self.kind == "fails_after":
                raise Boom(self.kind)
        self.log.append(("same task", anyio.get_current_task().id == task))
        return fetch


async def warm_up(sess: hookrun.MonitoredSession, warm: bool) -> None:
    for _ in range(WARM_STEPS if warm else 0):
        assert await sess.run("x") == 1


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
@pytest.mark.parametrize("kind", LONE_KINDS)
@pytest.mark.parametrize("phase", ["before_run", "after_run"])
async def test_one_async_call(phase: str, kind: str, warm: bool) -> None:
    hook = LoneHook(phase, kind)
    timeout = TIMEOUT if kind == "hangs" else None
    VAR.set("caller")
    async with hookrun.MonitoredSession(ScriptedCreator({"x": 1}), [hook], hook_timeout=timeout) as sess:
        await warm_up(sess, warm)
        calls = hook.calls
        hook.armed = True
        with anyio.fail_after(5):
            if kind in ("fails_before", "fails_after"):
                with pytest.raises(Boom, match=kind):
                    await sess.run("x")
            elif kind == "hangs":
                with pytest.raises(HookTimeoutError, match="hangs_hook") as info:
                    await sess.run("x")
                assert info.value.phase == phase
            else:
                assert await sess.run("x") == 1
    assert hook.calls == calls + 1  # started once
    assert VAR.get() == "caller"
    assert [seen for what, seen in hook.log if what == "var"] == ["caller"]
    assert all(same for what, same in hook.log if what == "same task"), hook.log
    if kind == "sets_var":
        assert ("own var", "set by the hook") in hook.log
    if phase == "after_run":  # the values of its own fetches, or nothing
        assert {results for what, results in hook.log if what == "results"} == {1 if kind == "fetches" else None}


@pytest.mark.parametrize("phase", ["before_run", "after_run"])
async def test_one_async_call_cancelled_from_outside_while_it_waits(phase: str) -> None:
    hook = LoneHook(phase, "hangs")
    async with hookrun.MonitoredSession(ScriptedCreator({"x": 1}), [hook]) as sess:
        await warm_up(sess, True)
        hook.armed = True
        with anyio.move_on_after(0.05) as scope:
            await sess.run("x")
        assert scope.cancelled_caught
        hook.armed = False
        assert await sess.run("x") == 1  # the session goes on


class PlainHook:
    """Plain-function ``before_run`` and ``after_run``; quiet until armed, then behaves as ``kind``."""

    def __init__(self, kind: str, log: list[str], name: str) -> None:
        self.kind, self.log, self.name, self.armed = kind, log, name, False

    def before_run(self, run_context: SessionRunContext) -> Any:
        return self._behave("before_run")

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> Any:
        assert run_values.results is None and run_values.global_step == run_context.global_step + 1
        return self._behave("after_run")

    def _behave(self, phase: str) -> Any:
        if not self.armed:
            return None
        self.log.append(f"{self.name}.{phase}")
        if self.kind == "fails":
            raise Boom(self.name)
        if self.kind == "returns_awaitable" or (self.kind == "awaitable_after" and phase == "after_run"):
            return anyio.lowlevel.checkpoint()
        if self.kind == "sets_var":  # a plain function runs in the caller's own context
            VAR.set(self.name)
        return None


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("kind", ["quiet", "fails", "returns_awaitable", "awaitable_after", "sets_var"])
async def test_plain_functions_only(kind: str, position: int, warm: bool) -> None:
    log: list[str] = []
    hooks = [PlainHook(kind if i == position else "quiet", log, f"h{i}") for i in range(3)]
    VAR.set("caller")
    async with hookrun.MonitoredSession(ScriptedCreator({"x": 1}), hooks) as sess:
        await warm_up(sess, warm)
        for hook in hooks:
            hook.armed = True
        with anyio.fail_after(5):
            if kind == "fails":
                with pytest.raises(Boom, match=f"h{position}"):
                    await sess.run("x")
            elif kind == "returns_awaitable":
                with pytest.raises(TypeError, match=f"hook h{position}: before_run is a plain function"):
                    await sess.run("x")
            elif kind == "awaitable_after":
                with pytest.raises(TypeError, match=f"hook h{position}: after_run is a plain function"):
                    await sess.run("x")
            else:
                assert await sess.run("x") == 1
    if kind in ("fails", "returns_awaitable"):  # no later call was made, no after_run ran
        assert log == [f"h{i}.before_run" for i in range(position + 1)]
    elif kind == "awaitable_after":  # every before_run, and no after_run after the culprit's
        assert log == [f"h{i}.before_run" for i in range(3)] + [f"h{i}.after_run" for i in range(position + 1)]
    else:
        assert log == [f"h{i}.{phase}" for phase in ("before_run", "after_run") for i in range(3)]
    assert VAR.get() == (f"h{position}" if kind == "sets_var" else "caller")


class PlainAfter:
    name = "plain_after"

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        return None


async def test_a_traced_step_records_both_shapes() -> None:
    """A traced step goes through the dispatcher, which records every call's span."""
    lone = LoneHook("before_run", "suspends")  # before_run: one async call; after_run: plain only
    async with hookrun.MonitoredSession(ScriptedCreator({"x": 1}), [lone, PlainAfter()]) as sess:
        await warm_up(sess, True)
        lone.armed = True
        metadata = hookrun.RunMetadata()
        assert await sess.run("x", options=RunOptions(trace=True), run_metadata=metadata) == 1
    assert [(t.phase, t.name) for t in metadata.timings if t.phase != "run"] == [
        ("before_run", "suspends_hook"), ("after_run", "plain_after"),
    ]
