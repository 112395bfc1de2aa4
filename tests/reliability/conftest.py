"""Hypothesis profiles for the reliability suite.

The profiles are registered in ``tests/conftest.py``. ``ci`` (the default) is bounded so the whole folder runs in a few minutes on two
cores while still running thousands of generated scenarios across both
backends; ``deep`` (``HYPOTHESIS_PROFILE=deep``, the pass ``.ci/run`` adds after the README's
command) runs four times as many scenarios, and ``long`` (``--hypothesis-profile=long``, or
``HYPOTHESIS_PROFILE=long``) runs many more. Every profile has ``deadline=None``: a scenario's wall time
depends on the event loop and on the tiny sleeps it draws.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings


def pytest_configure(config: pytest.Config) -> None:
    """Honour ``--hypothesis-profile`` even when this conftest loads after the plugin did."""
    name = config.getoption("--hypothesis-profile", None) or os.environ.get("HYPOTHESIS_PROFILE", "ci")
    settings.load_profile(str(name))
