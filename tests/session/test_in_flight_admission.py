"""Steps in flight at admission: a fatal error admits no later step and starts no phase of
the steps it cancels, numbers stay fixed when a step is given up, and a stop requested in
the re-run ``before_run`` of a recovered step admits no step past ``last_step``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hookrun import (
    AbortedError,
    MonitoredSession,
    OutOfRangeError,
    RetryPolicy,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from hookrun.hooks import StopAtStepHook
from tests.session._in_flight_support import GatedCreator, Gates, Recorder

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0, jitter=False)


class _Session:
    """Records the items it is asked to run; item 0 waits for item 1's run to start, then
    raises ``effect`` (if any)."""

    def __init__(self, effect: Exception | None = None) -> None:
        self.started: list[int] = []
        self.effect = effect
        self.second = anyio.Event()

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        item = feed_dict["item"]
        self.started.append(item)
        if item == 0:
            await self.second.wait()
            if self.effect is not None:
                raise self.effect
        else:
            self.second.set()
        return [f"{key}@{item}" for key in fetches]


class _Records(SessionRunHook):
    """Records (item, global step) of each before_run and after_run; the first before_run
    raises ValueError with ``fail_first``."""

    overlapping_steps = True

    def __init__(self, fail_first: bool = False) -> None:
        self.fail_first = fail_first
        self.before: list[tuple[int, int]] = []
        self.after: list[tuple[int, int]] = []

    def before_run(self, run_context: SessionRunContext) -> None:
        self.before.append((_item(run_context), run_context.global_step))
        if self.fail_first and len(self.before) == 1:
            raise ValueError("the first step fails")

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.after.append((_item(run_context), run_values.global_step))


def _item(run_context: SessionRunContext) -> int:
    feeds = run_context.original_args.feed_dict
    assert feeds is not None
    return int(feeds["item"])


def _creator(session: _Session) -> Any:
    async def create() -> _Session:
        return session

    return create


FEEDS = [{"item": 0}, {"item": 1}]


# -- a fatal error ------------------------------------------------------------------------


async def test_a_fatal_before_run_error_keeps_the_next_step_from_running() -> None:
    """Step 1's before_run raises ValueError with two lanes: the error propagates and the
    step admitted behind it is cancelled; its before_run is not called, its raw run never starts."""
    session, hook = _Session(), _Records(fail_first=True)
    with anyio.fail_after(5):
        async with MonitoredSession(_creator(session), [hook], max_in_flight=2) as sess:
            with pytest.raises(ValueError, match="the first step fails"):
                async for _ in sess.iterate("a", FEEDS):
                    pass
    assert [item for item, _ in hook.before] == [0]
    assert session.started == []


class _FailsWhenTold(SessionRunHook):
    """Its first call of ``phase`` waits until ``go`` is set, then raises ValueError."""

    overlapping_steps = True

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.go = anyio.Event()
        self.calls = 0

    async def _maybe_fail(self, phase: str) -> None:
        if phase == self.phase:
            self.calls += 1
            if self.calls == 1:
                await self.go.wait()
                raise ValueError(f"{phase} fails")

    async def before_run(self, run_context: SessionRunContext) -> None:
        await self._maybe_fail("before_run")


async def _run_both(sess: MonitoredSession, outcomes: dict[int, BaseException | object], fail: Any) -> None:
    """run() feeds 0 and 1 from two tasks, each admitted once the other is blocked, then ``fail()``."""

    async def one(i: int) -> None:
        try:
            outcomes[i] = await sess.run("y", {"i": i})
        except Exception as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        for i in range(2):
            tg.start_soon(one, i)
            await anyio.wait_all_tasks_blocked()
        await fail()


async def test_a_run_waiting_for_the_phase_lock_starts_no_before_run_after_a_fatal_error() -> None:
    """run() 1's before_run fails (ValueError) while run() 2 waits for the phase lock: run()
    2 raises a RuntimeError caused by it, its before_run never called, its raw run never started."""
    gates, failing, hook = Gates(), _FailsWhenTold("before_run"), Recorder()
    outcomes: dict[int, BaseException | object] = {}

    async def fail() -> None:
        failing.go.set()

    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), [failing, hook], max_in_flight=2) as sess:
            await _run_both(sess, outcomes, fail)
    assert isinstance(outcomes[0], ValueError)
    assert isinstance(outcomes[1], RuntimeError)
    assert outcomes[1].__cause__ is outcomes[0]
    assert failing.calls == 1 and hook.steps("before") == [0]  # run() 1's alone
    assert gates.started == []


class _BlocksSecondBeforeRun(SessionRunHook):
    """Records after_create_session; its second before_run waits for ``go``, then raises ValueError."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.created: list[int] = []
        self.befores = 0
        self.go = anyio.Event()

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.created.append(session.index)

    async def before_run(self, run_context: SessionRunContext) -> None:
        self.befores += 1
        if self.befores == 2:
            await self.go.wait()
            raise ValueError("step 2's before_run fails")


async def test_a_lane_being_re_created_calls_no_after_create_session_after_a_fatal_error() -> None:
    """Step 1's lane is lost and its new session waits for the phase lock (step 2's before_run
    holds it) when that before_run fails: the new session's after_create_session is not called."""
    gates, hook = Gates(), _BlocksSecondBeforeRun()
    creator = GatedCreator(gates, errors={0: {0: AbortedError("lane 0 lost")}})
    outcomes: dict[int, BaseException | object] = {}

    async def fail() -> None:
        gates.open(0)  # step 1's run fails: its lane is re-created and waits for the lock
        await anyio.wait_all_tasks_blocked()
        assert len(creator.sessions) == 3
        hook.go.set()

    with anyio.fail_after(10):
        async with MonitoredSession(creator, [hook], max_in_flight=2, retry=NO_WAIT) as sess:
            await _run_both(sess, outcomes, fail)
    assert isinstance(outcomes[1], ValueError)
    assert isinstance(outcomes[0], RuntimeError) and outcomes[0].__cause__ is outcomes[1]
    assert hook.created == [0, 1]
    assert [s.closed for s in creator.sessions] == [1, 1, 1]


# -- numbers ------------------------------------------------------------------------------


async def test_a_step_keeps_its_number_when_an_earlier_step_ends_the_input() -> None:
    """Step 1 raises OutOfRangeError after step 2 was admitted: step 2 still yields, and its
    after_run sees the number it was admitted with (2), one more than its before_run's."""
    session, hook = _Session(OutOfRangeError("input exhausted")), _Records()
    with anyio.fail_after(5):
        async with MonitoredSession(_creator(session), [hook], max_in_flight=2) as sess:
            assert [value async for value in sess.iterate("a", FEEDS)] == ["a@1"]
            assert await sess.global_step() == 2
    assert hook.before == [(0, 0), (1, 1)]
    assert hook.after == [(1, 2)]


async def test_a_number_given_up_with_nothing_else_in_flight_is_handed_out_again() -> None:
    """As with one lane: a step cancelled alone leaves the counter where it was, and the next
    step gets the same number."""
    gates, hook = Gates(), Recorder()
    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=2) as sess:
        scope = anyio.CancelScope()

        async def first() -> None:
            with scope:
                await sess.run("y", {"i": 0})

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                await anyio.wait_all_tasks_blocked()
                assert gates.started == [0]
                scope.cancel()  # in its raw run (gate 0 stays shut)
            gates.open(1)
            assert await sess.run("y", {"i": 1}) == 1
            assert await sess.global_step() == 1
    assert hook.steps("before") == [0, 0]
    assert hook.steps("after") == [1]


# -- stopping -----------------------------------------------------------------------------


class _AbortsThirdBeforeRun(SessionRunHook):
    overlapping_steps = True

    def __init__(self) -> None:
        self.calls = 0

    def before_run(self, run_context: SessionRunContext) -> None:
        self.calls += 1
        if self.calls == 3:
            raise AbortedError("lane lost")


class _Gated:
    """Each run waits for one gate shared by every lane, so all the steps are in flight."""

    def __init__(self, gate: anyio.Event) -> None:
        self.gate = gate
        self.items: list[int] = []

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.items.append(feed_dict["item"])
        await self.gate.wait()
        return [f"{key}@{feed_dict['item']}" for key in fetches]


async def test_stop_at_step_does_not_overshoot_while_a_step_is_recovered() -> None:
    """Four lanes, StopAtStepHook(last_step=3), four feeds; step 3's before_run raises
    AbortedError (its lane is re-created and it re-runs): exactly three steps run."""
    gate = anyio.Event()
    sessions: list[_Gated] = []

    async def create() -> _Gated:
        sessions.append(_Gated(gate))
        return sessions[-1]

    async def open_gates() -> None:
        await anyio.wait_all_tasks_blocked()
        gate.set()

    hooks = [_AbortsThirdBeforeRun(), StopAtStepHook(last_step=3)]
    with anyio.fail_after(5):
        async with MonitoredSession(create, hooks, max_in_flight=4, retry=NO_WAIT) as sess, anyio.create_task_group() as tg:
            tg.start_soon(open_gates)
            got = [value async for value in sess.iterate("a", [{"item": i} for i in range(4)])]
    assert got == ["a@0", "a@1", "a@2"]
    assert sorted(item for session in sessions for item in session.items) == [0, 1, 2]
