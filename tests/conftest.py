"""Every async test runs on both asyncio and trio (explicitly: the plugin's default
would silently drop trio when it is missing). Hypothesis profiles are registered
here, where pytest loads them before ``--hypothesis-profile`` is read."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
#: ``ci`` (default, the README's test command): bounded; ``deep``: the deeper pass ``.ci/run`` adds;
#: ``long``: many more examples; ``dev``: quick iterations.
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=_SUPPRESS)
settings.register_profile("deep", max_examples=600, deadline=None, suppress_health_check=_SUPPRESS)
settings.register_profile("long", max_examples=5_000, deadline=None, suppress_health_check=_SUPPRESS)
settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=_SUPPRESS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
