"""A hook's ``step_context`` that raises, entering or leaving a step, at every
``max_in_flight``: the step's caller gets the error, the statistics count a failed entry
as a step failed in its ``before_run`` phase and a failed leave as a step that ran, and the
session goes on (the step is over: nothing waits for it). ``run_with_hooks`` of a step
function too."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    RunMetadata,
    SessionRunContext,
    SessionRunHook,
    StepContext,
    StepSession,
    UnavailableError,
)

pytestmark = pytest.mark.anyio

LIMIT = 20.0  # a guard against a hang, not a measure: the steps take about a millisecond


class Refused(Exception):
    pass


async def _echo(feeds: Mapping[Any, Any]) -> dict[str, Any]:
    await anyio.sleep(0.001)
    return {"y": feeds["k"]}


class FailingContext(SessionRunHook):
    """A ``step_context`` that raises once, at step ``at`` (its ``global_step``), on entry or
    on leaving; it records what it entered and left."""

    overlapping_steps = True

    def __init__(self, where: str, at: int = 2) -> None:
        self.where, self.at = where, at
        self.fired = False
        self.entered: list[int] = []
        self.left: list[int] = []

    @contextlib.contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: RunMetadata) -> Iterator[None]:
        step = run_context.global_step
        if self.where == "enter" and step == self.at and not self.fired:
            self.fired = True
            raise Refused("enter")
        self.entered.append(step)
        try:
            yield
        finally:
            self.left.append(step)
        if self.where == "exit" and step == self.at and not self.fired:
            self.fired = True
            raise Refused("exit")


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("where", ["enter", "exit"])
async def test_run_gets_the_error_and_the_session_goes_on(where: str, max_in_flight: int) -> None:
    hook = FailingContext(where)
    outcomes: list[Any] = []
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(_echo), [hook], max_in_flight=max_in_flight) as sess:
            for k in range(6):
                try:
                    outcomes.append(await sess.run("y", {"k": k}))
                except Refused as exc:
                    outcomes.append(f"refused on {exc}")
            stats = sess.statistics()
            step = await sess.global_step()
    assert outcomes == [0, 1, f"refused on {where}", 3, 4, 5]
    assert sorted(hook.entered) == sorted(hook.left)  # every context entered was left
    if where == "enter":  # a step failed in its before_run phase: its number is handed out again
        assert (stats.steps, stats.failed_steps, step) == (5, 1, 5)
    else:  # the step ran (the counter moved), then its context raised leaving it
        assert (stats.steps, stats.failed_steps, step) == (6, 0, 6)


@pytest.mark.parametrize("max_in_flight", [1, 4])
async def test_iterate_raises_a_leave_error_after_the_results_before_it(max_in_flight: int) -> None:
    hook = FailingContext("exit")
    results: list[Any] = []
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(_echo), [hook], max_in_flight=max_in_flight) as sess:
            with pytest.raises(Refused, match="exit"):
                async for value in sess.iterate("y", ({"k": k} for k in range(8))):
                    results.append(value)
            # The session is usable: the step that raised leaving is over.
            assert await sess.run("y", {"k": 99}) == 99
    assert results == [0, 1]
    assert sorted(hook.entered) == sorted(hook.left)


@pytest.mark.parametrize("max_in_flight", [1, 4])
async def test_iterate_raises_an_entry_error_and_counts_its_step_failed(max_in_flight: int) -> None:
    hook = FailingContext("enter")
    results: list[Any] = []
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(_echo), [hook], max_in_flight=max_in_flight) as sess:
            with pytest.raises(Refused, match="enter"):
                async for value in sess.iterate("y", ({"k": k} for k in range(8))):
                    results.append(value)
            stats = sess.statistics()
            # The one refused and every one entered: each ran or failed (cancelled, with lanes).
            assert stats.steps >= 0 and stats.failed_steps >= 1
            assert stats.steps + stats.failed_steps == len(hook.left) + 1
    # With lanes, the steps in flight when it failed are cancelled (their results are not yielded).
    assert results == [0, 1] if max_in_flight == 1 else results in ([], [0], [0, 1])
    assert sorted(hook.entered) == sorted(hook.left)


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("where", ["enter", "exit"])
async def test_run_with_hooks_of_a_step_function(where: str, max_in_flight: int) -> None:
    hook = FailingContext(where, at=0)

    async def step_fn(step_context: StepContext) -> list[Any]:
        out: list[Any] = []
        for k in range(3):
            try:
                out.append(await step_context.run_with_hooks("y", {"k": k}))
            except Refused as exc:
                out.append(f"refused on {exc}")
        return out

    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(_echo), [hook], max_in_flight=max_in_flight) as sess:
            assert await sess.run_step_fn(step_fn) == [f"refused on {where}", 1, 2]
            assert await sess.run("y", {"k": 7}) == 7  # nothing waits for the step that raised
    assert sorted(hook.entered) == sorted(hook.left)


class LeavesLost(FailingContext):
    """Raises ``UnavailableError`` (a recoverable error) as it leaves step 2, once."""

    def __init__(self) -> None:
        super().__init__("exit")
        self.after: list[int] = []

    @contextlib.contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: RunMetadata) -> Iterator[None]:
        step = run_context.global_step
        self.entered.append(step)
        yield
        self.left.append(step)
        if step == 2 and not self.fired:
            self.fired = True
            raise UnavailableError("lost as the step was left")

    def after_run(self, run_context: SessionRunContext, run_values: Any) -> None:
        self.after.append(run_values.global_step)


@pytest.mark.parametrize("max_in_flight", [1, 4])
async def test_a_recoverable_error_leaving_a_step_that_ran_does_not_re_run_it(max_in_flight: int) -> None:
    """The step ran (its after_run was called, the counter moved): the caller gets the error,
    and the step is not re-run on a new session, at every N."""
    hook = LeavesLost()
    outcomes: list[Any] = []
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(_echo), [hook], max_in_flight=max_in_flight) as sess:
            for k in range(4):
                try:
                    outcomes.append(await sess.run("y", {"k": k}))
                except UnavailableError:
                    outcomes.append("lost")
            stats = sess.statistics()
            step = await sess.global_step()
    assert outcomes == [0, 1, "lost", 3]
    assert hook.after == [1, 2, 3, 4] and step == 4  # every step's after_run once
    assert (stats.steps, stats.failed_steps, stats.recoveries) == (4, 0, 0)


class Swallowing(SessionRunHook):
    """A ``step_context`` whose ``__exit__`` returns True: it tries to swallow the step's error."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.seen: list[str] = []

    def step_context(self, run_context: SessionRunContext, run_metadata: RunMetadata) -> contextlib.AbstractContextManager[None]:
        seen = self.seen

        class _Swallow:
            def __enter__(self) -> None:
                return None

            def __exit__(self, kind: object, error: BaseException | None, tb: object) -> bool:
                seen.append(type(error).__name__ if error is not None else "ok")
                return True

        return _Swallow()


async def _fails_on_two(feeds: Mapping[Any, Any]) -> dict[str, Any]:
    await anyio.sleep(0.001)
    if feeds["k"] == 2:
        raise Refused("run")
    return {"y": feeds["k"]}


@pytest.mark.parametrize("max_in_flight", [1, 4])
async def test_a_step_context_cannot_swallow_the_steps_error(max_in_flight: int) -> None:
    """A step_context whose __exit__ returns True still sees the error, and the caller gets it."""
    hook = Swallowing()
    outcomes: list[Any] = []
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(_fails_on_two), [hook], max_in_flight=max_in_flight) as sess:
            for k in range(4):
                try:
                    outcomes.append(await sess.run("y", {"k": k}))
                except Refused as exc:
                    outcomes.append(f"raised {exc}")
    assert outcomes == [0, 1, "raised run", 3]
    assert hook.seen == ["ok", "ok", "Refused", "ok"]
