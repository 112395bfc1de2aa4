"""Generated scenarios of steps in flight (N = 1, 2 and 4 lanes) run on the real runtime
(asyncio and trio), the raw runs completing in the scenario's order, and checked against
every rule of steps in flight (``lanes_rules.py``)."""

from __future__ import annotations

import inspect

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookrun import MonitoredSession

from .lanes_plan import LaneScenario, lane_scenarios
from .lanes_rules import check_lanes
from .lanes_run import run_lanes

#: Whether the runtime has steps in flight yet (N = 1 scenarios run either way).
LANES = "max_in_flight" in inspect.signature(MonitoredSession).parameters
#: Scenarios per backend: the profile's ``max_examples``.
SCENARIOS_PER_BACKEND = settings().max_examples


def _scenarios() -> st.SearchStrategy[LaneScenario]:
    if LANES:
        return lane_scenarios()
    return lane_scenarios(lanes=(1,)).filter(lambda sc: sc.mode == "iterate")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=SCENARIOS_PER_BACKEND)
@given(scenario=_scenarios())
def test_lanes_keep_every_rule(backend: str, scenario: LaneScenario) -> None:
    """Hook phases one at a time, numbers, before_run/after_run order, results, stops,
    per-lane recovery, fatal errors and cancellation, sessions and tasks: all as the rules say."""
    observed = anyio.run(run_lanes, scenario, backend=backend)
    check_lanes(scenario, observed)
