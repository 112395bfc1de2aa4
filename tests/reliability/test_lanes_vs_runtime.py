"""Generated scenarios of steps in flight (N = 1, 2 and 4 lanes) run on the real runtime
(asyncio and trio), the raw runs completing in the scenario's order, and checked against
every rule of steps in flight (``lanes_rules.py``)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import event, given, settings

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

from .lanes_plan import LaneScenario, lane_scenarios
from .lanes_rules import check_lanes, features
from .lanes_run import run_lanes

#: Scenarios per backend: the profile's ``max_examples``.
SCENARIOS_PER_BACKEND = settings().max_examples


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=SCENARIOS_PER_BACKEND)
@given(scenario=lane_scenarios())
def test_lanes_keep_every_rule(backend: str, scenario: LaneScenario) -> None:
    """Hook phases one at a time, numbers, before_run/after_run order, results, stops,
    per-lane recovery, fatal errors and cancellation, sessions and tasks: all as the rules say."""
    observed = anyio.run(run_lanes, scenario, backend=backend)
    for feature in features(check_lanes(scenario, observed)):
        event(feature)


# -- known deviations of the runtime from the rules (tolerated by the check while the
# -- flags in lanes_rules.py are True; these fail strictly once the runtime is fixed) ---------


class _Session:
    """Records the items it is asked to run; item 0 waits for item 1's run to start."""

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


@pytest.mark.anyio
@pytest.mark.xfail(strict=True, reason="LATE_CANCEL: a step waiting for the phase lock still runs after a fatal error")
async def test_a_fatal_before_run_error_keeps_the_next_step_from_running() -> None:
    """Step 1's before_run raises ValueError with two lanes: the error propagates and the
    step waiting behind it is cancelled; its before_run is not called, its raw run never starts."""
    session, hook = _Session(), _Records(fail_first=True)
    with anyio.fail_after(5):
        async with MonitoredSession(_creator(session), [hook], max_in_flight=2) as sess:
            with pytest.raises(ValueError, match="the first step fails"):
                async for _ in sess.iterate("a", FEEDS):
                    pass
    assert [item for item, _ in hook.before] == [0]
    assert session.started == []


@pytest.mark.anyio
@pytest.mark.xfail(strict=True, reason="NUMBER_GIVEN_BACK: a step given up gives its number back")
async def test_a_step_keeps_its_number_when_an_earlier_step_ends_the_input() -> None:
    """Step 1 raises OutOfRangeError after step 2 was admitted: step 2 still yields, and its
    after_run sees the number it was admitted with (2), one more than its before_run's."""
    session, hook = _Session(OutOfRangeError("input exhausted")), _Records()
    with anyio.fail_after(5):
        async with MonitoredSession(_creator(session), [hook], max_in_flight=2) as sess:
            assert [value async for value in sess.iterate("a", FEEDS)] == ["a@1"]
    assert hook.before == [(0, 0), (1, 1)]
    assert hook.after == [(1, 2)]


class _AbortsThirdBeforeRun(SessionRunHook):
    overlapping_steps = True

    def __init__(self) -> None:
        self.calls = 0

    def before_run(self, run_context: SessionRunContext) -> None:
        self.calls += 1
        if self.calls == 3:
            raise AbortedError("lane lost")


@pytest.mark.anyio
@pytest.mark.xfail(strict=True, reason="STOP_OVERSHOOT_ON_RECOVERY: a step recovered in its before_run lets StopAtStepHook overshoot")
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
    retry = RetryPolicy(initial_delay=0, jitter=False)
    with anyio.fail_after(5):
        async with MonitoredSession(create, hooks, max_in_flight=4, retry=retry) as sess, anyio.create_task_group() as tg:
            tg.start_soon(open_gates)
            got = [value async for value in sess.iterate("a", [{"item": i} for i in range(4)])]
    assert got == ["a@0", "a@1", "a@2"]
    assert sorted(item for session in sessions for item in session.items) == [0, 1, 2]


class _Gated:
    """Each run waits for one gate shared by every lane, so all the steps are in flight."""

    def __init__(self, gate: anyio.Event) -> None:
        self.gate = gate
        self.items: list[int] = []

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.items.append(feed_dict["item"])
        await self.gate.wait()
        return [f"{key}@{feed_dict['item']}" for key in fetches]
