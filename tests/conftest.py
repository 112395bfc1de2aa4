"""Every async test runs on both asyncio and trio (explicitly: the plugin's default
would silently drop trio when it is missing)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
