"""Steps in flight and hooks: per-step state in ``run_context.step_state``, the built-in
hooks made safe, the iterator's ``aclose`` and ``break``, a close from inside a step."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    MonitoredSession,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from hookrun.hooks import on_after_run
from tests.session._in_flight_support import GatedCreator, Gates, Recorder, feeds, release_in_order

pytestmark = pytest.mark.anyio


class EveryOther(SessionRunHook):
    """Fetches on even steps, deciding in before_run and carrying the decision in the step."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.seen: list[tuple[int, Any]] = []

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        due = run_context.global_step % 2 == 0
        run_context.step_state[self] = due
        return SessionRunArgs("y") if due else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_context.step_state[self]:
            self.seen.append((run_values.global_step, run_values.results))


async def test_per_step_state_in_the_run_context_survives_overlap() -> None:
    """step_state lives as long as its step: each after_run reads its own step's decision."""
    gates, hook = Gates(), EveryOther()
    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=3) as sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [1, 2, 0, 4, 3, 5], 3)
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate(None, feeds(6))] == [None] * 6
    assert hook.seen == [(1, 0), (3, 2), (5, 4)]


def test_step_state_is_one_dict_per_context() -> None:
    """run_context.step_state is made on first use and kept for that context."""
    first, second = SessionRunContext((None, None, None), None), SessionRunContext((None, None, None), None)
    first.step_state["k"] = 1
    assert first.step_state == {"k": 1}
    assert second.step_state == {}


async def test_a_fetching_function_hook_without_a_schedule_is_safe_under_overlap() -> None:
    """on_after_run(fetches=...) carries its request in the step: every step gets its own value."""
    gates = Gates()
    seen: list[tuple[int, Any]] = []

    @on_after_run(fetches="y")
    def record(run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        seen.append((run_values.global_step, run_values.results))

    async with MonitoredSession(GatedCreator(gates), [record], max_in_flight=3) as sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [2, 0, 1, 3], 3)
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate(None, feeds(4))] == [None] * 4
    assert seen == [(1, 0), (2, 1), (3, 2), (4, 3)]


def test_a_fetching_function_hook_with_a_schedule_is_refused() -> None:
    """on_after_run(fetches=..., every_n_steps=...) decides in before_run and marks in after_run: refused."""

    @on_after_run(fetches="y", every_n_steps=2)
    def record(run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        pass

    with pytest.raises(TypeError, match=r"hooks\[0\] \(record\) does not declare overlapping_steps"):
        MonitoredSession(GatedCreator(Gates()), [record], max_in_flight=2)


@pytest.mark.parametrize("n", [1, 4])
async def test_a_step_context_is_entered_around_every_step_at_every_n(n: int) -> None:
    """A hook's step_context is entered once per attempt of every step, before its
    before_run, and left after its after_run, in the task and context the step's hooks and
    raw run see (a context variable it sets is current for the whole step)."""
    from contextlib import contextmanager
    from contextvars import ContextVar

    current: ContextVar[int] = ContextVar("current", default=-1)
    log: list[tuple[str, int]] = []

    class Spanning(SessionRunHook):
        overlapping_steps = True

        @contextmanager
        def step_context(self, run_context: Any, run_metadata: Any) -> Any:
            step = run_context.global_step + 1
            token = current.set(step)
            log.append(("enter", step))
            try:
                yield
            finally:
                log.append(("leave", step))
                current.reset(token)

        async def before_run(self, run_context: SessionRunContext) -> None:
            assert current.get() == run_context.global_step + 1
            await anyio.lowlevel.checkpoint()

        async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            assert current.get() == run_values.global_step
            await anyio.lowlevel.checkpoint()

    gates = Gates()
    gates.open_all = True
    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), [Spanning()], max_in_flight=n) as sess:
            assert [y async for y in sess.iterate("y", feeds(12))] == list(range(12))
    assert sorted(step for what, step in log if what == "enter") == list(range(1, 13))
    assert sorted(step for what, step in log if what == "leave") == list(range(1, 13))
    for step in range(1, 13):
        assert log.index(("enter", step)) < log.index(("leave", step))


async def test_aclose_of_the_iterator_cancels_its_steps_in_flight() -> None:
    """iterator.aclose(): the steps in flight are cancelled (no after_run), their lanes free again."""
    gates, hook = Gates(), Recorder()
    creator = GatedCreator(gates)
    async with MonitoredSession(creator, [hook], max_in_flight=3) as sess:
        it = sess.iterate("y", feeds(10))
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_in_order, gates, [0], 3)
            with anyio.fail_after(10):
                assert await it.__anext__() == 0
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(10):
            await it.aclose()
        assert not sess._busy
        with pytest.raises(StopAsyncIteration):
            await it.__anext__()
        gates.open(9)
        with anyio.fail_after(10):
            assert await sess.run("y", {"i": 9}) == 9
    assert hook.steps("after") == [1, 2]
    assert hook.ends == 1


async def test_breaking_out_lets_the_steps_in_flight_finish_before_the_end() -> None:
    """A break leaves the steps in flight running; leaving the block waits for them, in order."""
    gates, hook = Gates(), Recorder()
    gates.open_all = True
    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=3) as sess:
        with anyio.fail_after(10):
            async for result in sess.iterate("y", feeds(10)):
                if result == 1:
                    break
    assert hook.steps("after") == sorted(hook.steps("after"))
    assert len(hook.steps("after")) == len(gates.started)  # every step admitted ended
    assert hook.ends == 1


async def test_aclose_from_inside_a_step_is_refused() -> None:
    """A hook closing its own session from inside a step with steps in flight: a RuntimeError, not a hang."""
    gates = Gates()
    gates.open_all = True
    holder: list[MonitoredSession] = []

    class Closer(SessionRunHook):
        overlapping_steps = True

        async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            await holder[0].aclose()

    sess = MonitoredSession(GatedCreator(gates), [Closer()], max_in_flight=2)
    holder.append(sess)
    async with sess:
        with anyio.fail_after(10), pytest.raises(RuntimeError, match="from inside one of its own steps"):
            await sess.run("y", {"i": 1})


async def test_monitored_training_session_with_lanes_checkpoints_and_resumes(tmp_path: Any) -> None:
    """MonitoredTrainingSession(max_in_flight=3): checkpoints at after_run; a new run resumes at the last one."""
    from hookrun import MonitoredTrainingSession, StepSession
    from hookrun.hooks import StopAtStepHook

    def make() -> StepSession:
        async def step(feed: Any) -> dict[str, int]:
            await anyio.lowlevel.checkpoint()
            return {"y": 1}

        return StepSession(step)

    for last in (6, 10):
        sess = MonitoredTrainingSession(
            make, checkpoint_dir=tmp_path, save_checkpoint_steps=2, log_step_count_steps=None,
            hooks=[StopAtStepHook(last_step=last)], max_in_flight=3,
        )
        async with sess:
            with anyio.fail_after(10):
                results = [r async for r in sess.iterate("y")]
            assert await sess.global_step() == last
        assert results == [1] * (last if last == 6 else 4)  # the second run resumed at step 6


async def test_a_coordinator_stop_admits_nothing_more_and_drains() -> None:
    """A stop requested on a lane's coordinator: the steps in flight finish, nothing more is admitted."""
    gates, hook = Gates(), Recorder()

    class StopViaCoordinator(SessionRunHook):
        overlapping_steps = True

        def __init__(self) -> None:
            self.coords: list[Any] = []

        def after_create_session(self, session: Any, coord: Any) -> None:
            self.coords.append(coord)

        def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            if run_values.global_step == 1:
                self.coords[-1].request_stop()

    sess = MonitoredSession(GatedCreator(gates), [StopViaCoordinator(), hook], max_in_flight=3)
    async with sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [0, 1, 2], 3)
        with anyio.fail_after(10):
            results = [r async for r in sess.iterate("y", feeds(10))]
        assert sess.should_stop()
    assert results == [0, 1, 2]
    assert hook.steps("after") == [1, 2, 3]
    assert hook.ends == 1
