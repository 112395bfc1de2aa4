"""Generated scenarios run on the real runtime (asyncio and trio) and compared with the
sequential reference model of ``model.py``, with every invariant checked after each."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings

from .model import check_scenario, run_scenario
from .strategies import Scenario, scenarios

#: Scenarios per backend: the ``ci`` profile's ``max_examples`` in the README's test command
#: (300: it must stay quick on two cores), twice any other profile's (1,200 in the deeper
#: pass CI adds, 10,000 in the long profile).
SCENARIOS_PER_BACKEND = settings().max_examples * (1 if settings.get_current_profile_name() == "ci" else 2)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=SCENARIOS_PER_BACKEND)
@given(scenario=scenarios())
def test_runtime_matches_reference_model(backend: str, scenario: Scenario) -> None:
    """The runtime's hook calls, caller outcomes, session runs, closes, step counter and
    task counts equal the sequential model's, for every generated scenario."""
    observed = anyio.run(run_scenario, scenario, backend=backend)
    check_scenario(scenario, observed)
