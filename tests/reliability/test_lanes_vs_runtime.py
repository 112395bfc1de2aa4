"""Generated scenarios of steps in flight (N = 1, 2 and 4 lanes) run on the real runtime
(asyncio and trio), the raw runs completing in the scenario's order, and checked against
every rule of steps in flight (``lanes_rules.py``)."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import event, given, settings

from .lanes_plan import LaneHook, LaneScenario, lane_scenarios
from .lanes_rules import check_lanes, features
from .lanes_run import run_lanes
from .strategies import Action

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


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_lane_whose_retries_ran_out_ends_its_step_and_a_later_caller_goes_on(backend: str) -> None:
    """Three run() callers, two lanes: the first step admitted fails its before_run, its
    lane's re-creation fails and its budget is spent, so its caller gets that error and the
    step held behind it is cancelled; the caller not yet in flight then gets a lane with a
    new session and succeeds (the model once read that creation as the failed one retried)."""
    hook = LaneHook("h0", {"before_run": "sync"}, {"before_run": (Action(effect="aborted"),)})
    scenario = LaneScenario(
        lanes=2, mode="tasks", items=3, hooks=(hook,), run_effects={}, creator_errors={2: "aborted"},
        max_attempts=2, last_step=None, releases=(), cancel_at=None, exit="normal",
    )
    observed = anyio.run(run_lanes, scenario, backend=backend)
    check_lanes(scenario, observed)
    outcomes = sorted(outcome[:2] for outcome in observed.task_outcomes.values())  # which caller: the backend's order
    assert outcomes == [("ok", outcomes[0][1]), ("raise", "AbortedError"), ("raise", "RuntimeError")]
    assert ("raise", "AbortedError", "create#2") in observed.task_outcomes.values()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_one_lane_a_run_whose_retries_ran_out_leaves_the_next_caller_a_new_session(backend: str) -> None:
    """One lane, two run() callers, StopAtStepHook(last_step=1): the before_run of the first step admitted
    fails with a recoverable error and the budget allows no retry, so its caller gets it
    and its step is given up (no number used); the next caller closes the failed session,
    creates one and runs the last step (the model once read that close and creation as the
    failed step's recovery, and so expected one step admitted, not two)."""
    hook = LaneHook("h0", {"before_run": "sync"}, {"before_run": (Action(effect="aborted"),)})
    scenario = LaneScenario(
        lanes=1, mode="tasks", items=2, hooks=(hook,), run_effects={}, creator_errors={},
        max_attempts=1, last_step=1, releases=(), cancel_at=None, exit="normal",
    )
    observed = anyio.run(run_lanes, scenario, backend=backend)
    check_lanes(scenario, observed)
    outcomes = sorted(outcome[:2] for outcome in observed.task_outcomes.values())  # which caller: the backend's order
    assert outcomes == [("ok", outcomes[0][1]), ("raise", "AbortedError")]
    assert [session.name for session in observed.sessions] == ["s0", "s1"]
    assert observed.counter == 1
