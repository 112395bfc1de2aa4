"""``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` raised by a hook, by the raw
run or by the feeds come out of ``iterate()`` and ``run()`` as themselves at every
``max_in_flight``: never in an exception group, never as the cancellation of the
iterating task, never out of the event loop past the block; ``on_exception`` receives
that very exception, and the other steps in flight end first."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    MonitoredSession,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepSession,
)

pytestmark = pytest.mark.anyio

LIMIT = 20.0  # a guard against a hang, not a measure
BASE_EXCEPTIONS = [KeyboardInterrupt, SystemExit, GeneratorExit]


class Raising(SessionRunHook):
    """Raises ``error`` once, at step 2 in ``where`` (before_run or after_run); records
    the calls, and what ``on_exception`` received."""

    overlapping_steps = True

    def __init__(self, where: str, error: type[BaseException]) -> None:
        self.where, self.error = where, error
        self.calls: list[tuple[str, Any]] = []
        self.received: list[BaseException] = []
        self.fired = False
        self.raised = anyio.Event()
        self.at = 2

    def _fire(self, where: str, step: int) -> None:
        if self.where == where and step == self.at and not self.fired:
            self.fired = True
            self.raised.set()
            raise self.error(f"from {where}")

    async def before_run(self, run_context: SessionRunContext) -> None:
        self.calls.append(("before_run", run_context.global_step))
        self._fire("before_run", run_context.global_step)

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await anyio.lowlevel.checkpoint()
        self.calls.append(("after_run", run_values.global_step))
        self._fire("after_run", run_context.global_step)

    def on_exception(self, session: Any, exception: BaseException) -> None:
        self.calls.append(("on_exception", type(exception).__name__))
        self.received.append(exception)


def _session(where: str, error: type[BaseException], max_in_flight: int) -> tuple[MonitoredSession, Raising]:
    async def step(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        await anyio.sleep(0.001 * (3 - feeds["k"] % 3))  # later steps may end first
        if where == "run" and feeds["k"] == 2:
            raise error("from the run")
        return {"y": feeds["k"]}

    hook = Raising(where, error)
    return MonitoredSession(lambda: StepSession(step), [hook], max_in_flight=max_in_flight), hook


async def _feeds(error: type[BaseException] | None) -> AsyncIterator[dict[str, int]]:
    for k in range(6):
        if error is not None and k == 2:
            raise error("from the feeds")
        yield {"k": k}


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("where", ["before_run", "after_run", "run", "feeds"])
@pytest.mark.parametrize("error", BASE_EXCEPTIONS, ids=lambda e: e.__name__)
async def test_iterate_raises_the_exception_itself(
    error: type[BaseException], where: str, max_in_flight: int
) -> None:
    sess, hook = _session(where, error, max_in_flight)
    results: list[Any] = []
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with sess:
                feeds = _feeds(error if where == "feeds" else None)
                async for value in sess.iterate("y", feeds):
                    results.append(value)
    assert type(raised.value) is error
    assert [type(exc) for exc in hook.received] == [error]
    assert hook.received[0] is raised.value
    assert hook.calls[-1] == ("on_exception", error.__name__)  # no hook call after it
    assert set(results) <= {0, 1} and 2 not in results
    if where == "feeds":  # the feeds before it are stepped, and yielded first
        assert results == [0, 1]


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("where", ["before_run", "after_run", "run"])
@pytest.mark.parametrize("error", BASE_EXCEPTIONS, ids=lambda e: e.__name__)
async def test_run_raises_the_exception_itself(error: type[BaseException], where: str, max_in_flight: int) -> None:
    sess, hook = _session(where, error, max_in_flight)
    results: list[Any] = []
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with sess:
                for k in range(6):
                    results.append(await sess.run("y", {"k": k}))
    assert results == [0, 1]
    assert [type(exc) for exc in hook.received] == [error] and hook.received[0] is raised.value
    assert hook.calls[-1] == ("on_exception", error.__name__)


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("where", ["before_run", "after_run", "run"])
async def test_concurrent_runs_raise_it_in_the_callers_task(where: str, max_in_flight: int) -> None:
    """Callers of ``run()`` in tasks of their own: the one whose step raised gets the
    exception itself; with lanes, the steps of the others are cancelled by it.
    (``GeneratorExit`` only: asyncio lets ``KeyboardInterrupt`` and ``SystemExit`` raised
    in a task other than the main one out of the event loop, whoever raised them.)"""
    error = GeneratorExit
    sess, hook = _session(where, error, max_in_flight)
    outcomes: dict[int, Any] = {}

    async def caller(k: int) -> None:
        try:
            outcomes[k] = await sess.run("y", {"k": k})
        except BaseException as exc:
            outcomes[k] = exc
            if not isinstance(exc, Exception):
                raise

    with anyio.fail_after(LIMIT):
        with pytest.raises(BaseException) as raised:
            async with sess:
                await sess.run("y", {"k": 0})
                await sess.run("y", {"k": 1})
                async with anyio.create_task_group() as tg:
                    for k in range(2, 2 + max_in_flight):
                        tg.start_soon(caller, k)
    found = raised.value
    while isinstance(found, BaseExceptionGroup):  # the caller's own task group wraps what its tasks raise
        assert len(found.exceptions) == 1
        found = found.exceptions[0]
    assert type(found) is error
    # What left the block (the caller's own task group's group) is what on_exception got.
    assert hook.received == [raised.value]
    if max_in_flight > 1:  # every caller's step ended: one got the exception, the others a result or its cancellation
        assert len(outcomes) == max_in_flight


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
@pytest.mark.parametrize("error", BASE_EXCEPTIONS, ids=lambda e: e.__name__)
async def test_one_raised_by_a_step_as_the_loop_is_cancelled_is_not_lost(
    error: type[BaseException], max_in_flight: int
) -> None:
    """The iterating task is cancelled while a step runs, and the step answers its
    cancellation with the exception: it comes out, not the cancellation."""

    async def step(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise error("raised while being cancelled") from None
        return {}  # pragma: no cover

    sess = MonitoredSession(lambda: StepSession(step), max_in_flight=max_in_flight)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error, match="while being cancelled"):
            async with sess:
                with anyio.move_on_after(0.05):
                    async for _ in sess.iterate("y", [{"k": 0}]):
                        pass  # pragma: no cover


@pytest.mark.parametrize("max_in_flight", [2, 4])
@pytest.mark.parametrize("error", [SystemExit, GeneratorExit, ValueError], ids=lambda e: e.__name__)
async def test_a_step_function_raising_it_ends_the_other_steps_in_flight(
    error: type[BaseException], max_in_flight: int
) -> None:
    """As an error does: the loop of another task learns that a step in flight failed."""
    started = anyio.Event()

    async def slow(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        started.set()
        await anyio.sleep(0.05)
        return {"y": feeds["k"]}

    async def step_fn(step_context: Any) -> None:
        await started.wait()
        raise error("from the step function")

    outcome: dict[str, BaseException] = {}

    async def loop(sess: MonitoredSession) -> None:
        try:
            async for _ in sess.iterate("y", ({"k": k} for k in range(1000))):
                pass
        except RuntimeError as exc:
            outcome["loop"] = exc

    async def call(sess: MonitoredSession) -> None:
        try:
            await sess.run_step_fn(step_fn)
        except BaseException as exc:  # recorded, not raised: asyncio lets some leave the loop
            outcome["step_fn"] = exc

    with anyio.fail_after(LIMIT):
        with pytest.raises(error):  # the block ends with the step function's error
            async with MonitoredSession(lambda: StepSession(slow), max_in_flight=max_in_flight) as sess:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(loop, sess)
                    tg.start_soon(call, sess)
                raise outcome["step_fn"]
    assert type(outcome["step_fn"]) is error
    assert "another step in flight failed with" in str(outcome["loop"])
    assert outcome["loop"].__cause__ is outcome["step_fn"]


@pytest.mark.parametrize("max_in_flight", [2, 4])
@pytest.mark.parametrize("error", BASE_EXCEPTIONS, ids=lambda e: e.__name__)
async def test_one_raised_while_the_loop_body_runs_comes_out_of_aclose(
    error: type[BaseException], max_in_flight: int
) -> None:
    """A later step raises it while the loop body of an earlier one runs, and the loop then
    breaks (``aclosing`` closes the iterator): the close raises it, never drops it."""
    async def instant(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        return {"y": feeds["k"]}

    hook = Raising("before_run", error)
    hook.at = 1  # the step admitted while the loop body of the first one runs
    sess = MonitoredSession(lambda: StepSession(instant), [hook], max_in_flight=max_in_flight)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error):
            async with sess, contextlib.aclosing(sess.iterate("y", ({"k": k} for k in range(6)))) as steps:
                async for _ in steps:
                    await hook.raised.wait()  # the next steps are admitted meanwhile
                    await anyio.sleep(0.01)  # the step that raised it has ended
                    break
    assert [type(exc) for exc in hook.received] == [error]


@pytest.mark.parametrize("ordered", [True, False])
async def test_it_wins_over_an_ordinary_error_of_another_step(ordered: bool) -> None:
    """Two steps in flight fail at once, one with ``ValueError``, one with ``SystemExit``:
    ``SystemExit`` comes out (when its run got to raise it before being cancelled)."""
    raised: list[str] = []

    async def step(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        await anyio.sleep(0.01)
        failure = (ValueError, SystemExit)[feeds["k"]]
        raised.append(failure.__name__)
        raise failure(f"step {feeds['k']}")

    with anyio.fail_after(LIMIT):
        with pytest.raises((ValueError, SystemExit)) as caught:
            async with MonitoredSession(lambda: StepSession(step), max_in_flight=2) as sess:
                async for _ in sess.iterate("y", [{"k": 0}, {"k": 1}], ordered=ordered):
                    pass  # pragma: no cover
    assert type(caught.value) is (SystemExit if "SystemExit" in raised else ValueError)
