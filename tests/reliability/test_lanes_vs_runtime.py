"""Generated scenarios of steps in flight (N = 1, 2 and 4 lanes) run on the real runtime
(asyncio and trio), the raw runs completing in the scenario's order, and checked against
every rule of steps in flight (``lanes_rules.py``)."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import event, given, settings

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
