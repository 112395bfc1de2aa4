"""Fixtures of the hook tests: both session kinds (sync step function, remote async session)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["sync", "remote"])
def session_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)
