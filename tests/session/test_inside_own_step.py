"""A close, ``run()`` or ``iterate()`` of a monitored session from inside one of its own
steps (its raw run, a hook, a step function) is refused with an error at every
``max_in_flight`` and for every kind of hook, never a hang; and a task a hook starts on
the coordinator is not inside the step that started it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepContext,
)

pytestmark = pytest.mark.anyio

LIMIT = 10

Call = Callable[[MonitoredSession], Awaitable[object]]


async def _close(sess: MonitoredSession) -> object:
    await sess.aclose()
    return None


async def _run(sess: MonitoredSession) -> object:
    return await sess.run()


async def _iterate(sess: MonitoredSession) -> object:
    return [x async for x in sess.iterate(None, [None])]


CALLS: dict[str, Call] = {"aclose()": _close, "run()": _run, "iterate()": _iterate}


class _Raw:
    """A raw session whose run calls ``call`` on the monitored session once, when armed."""

    def __init__(self, box: _Box) -> None:
        self.box = box

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any], options: RunOptions, run_metadata: RunMetadata
    ) -> list[object]:
        await self.box.maybe_call()
        return [1 for _ in fetches]


class _Box:
    def __init__(self, call: Call | None) -> None:
        self.call = call
        self.sess: MonitoredSession | None = None
        self.errors: list[BaseException] = []

    async def maybe_call(self) -> None:
        call, self.call = self.call, None
        if call is None:
            return
        assert self.sess is not None
        try:
            await call(self.sess)
        except Exception as exc:
            self.errors.append(exc)


class _Plain(SessionRunHook):
    overlapping_steps = True

    def __init__(self, box: _Box | None = None) -> None:
        self.box = box

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        return None


class _Async(SessionRunHook):
    """An async hook that calls the box's call in ``phase``, when it has one."""

    overlapping_steps = True

    def __init__(self, box: _Box | None = None, phase: str = "") -> None:
        self.box, self.phase = box, phase

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        if self.box is not None and self.phase == "before_run":
            await self.box.maybe_call()
        await anyio.lowlevel.checkpoint()
        return None

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self.box is not None and self.phase == "after_run":
            await self.box.maybe_call()


def _hooks(kind: str) -> list[SessionRunHook]:
    hooks: dict[str, list[SessionRunHook]] = {"none": [], "plain": [_Plain()], "async": [_Async()]}
    return hooks[kind]


async def _step_once(sess: MonitoredSession, entry: str) -> None:
    if entry == "run()":
        await sess.run(["x"])
    elif entry == "iterate()":
        assert [r async for r in sess.iterate(["x"], [None, None])] == [[1], [1]]
    else:

        async def step_fn(step_context: StepContext) -> object:
            return await step_context.run_with_hooks(["x"])

        await sess.run_step_fn(step_fn)


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("kind", ["none", "plain", "async"])
@pytest.mark.parametrize("entry", ["run()", "iterate()", "run_step_fn()"])
@pytest.mark.parametrize("what", list(CALLS))
async def test_a_call_from_the_raw_run_is_refused(n: int, kind: str, entry: str, what: str) -> None:
    """The raw run of a step calling aclose(), run() or iterate() of its session gets a RuntimeError."""
    if entry == "run_step_fn()" and n > 1:
        pytest.skip("run_step_fn() runs one step at a time at any max_in_flight")
    box = _Box(CALLS[what])
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: _Raw(box), _hooks(kind), max_in_flight=n) as sess:
            box.sess = sess
            await _step_once(sess, entry)
            assert len(box.errors) == 1, box.errors
            assert isinstance(box.errors[0], RuntimeError)
            assert "from inside one of its own steps" in str(box.errors[0])
            assert not sess.should_stop()
            await sess.run(["x"])  # still usable


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("phase", ["before_run", "after_run"])
@pytest.mark.parametrize("what", list(CALLS))
async def test_a_call_from_a_hook_is_refused(n: int, phase: str, what: str) -> None:
    """A hook calling aclose(), run() or iterate() of its own session gets a RuntimeError."""
    box = _Box(CALLS[what])
    hooks = [_Async(), _Async(box, phase)]  # the second: started by a worker once the first waits
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: _Raw(_Box(None)), hooks, max_in_flight=n) as sess:
            box.sess = sess
            assert [r async for r in sess.iterate(["x"], [None, None])] == [[1], [1]]
            assert len(box.errors) == 1 and "from inside one of its own steps" in str(box.errors[0])


async def test_a_task_a_hook_starts_is_not_inside_the_step() -> None:
    """A coordinator task started from a hook's after_run runs steps of the session once
    that step is over: it is not taken for a call from inside the step that started it."""
    go, ran = anyio.Event(), anyio.Event()
    results: list[object] = []

    class StartsAStepper(SessionRunHook):
        def __init__(self) -> None:
            self.sess: MonitoredSession | None = None
            self.coord: Any = None

        async def after_create_session(self, session: object, coord: object) -> None:
            self.coord = coord

        async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            if self.coord is None:
                return

            async def step_later() -> None:
                await go.wait()
                assert self.sess is not None
                results.append(await self.sess.run(["x"]))
                ran.set()

            self.coord.start_soon(step_later)
            self.coord = None  # once

    hook = StartsAStepper()
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: _Raw(_Box(None)), [hook]) as sess:
            hook.sess = sess
            await sess.run(["x"])
            go.set()
            await ran.wait()
    assert results == [[1]]
