"""The fixtures of the pytest plugin: ``anyio_backend``, ``mock_clock`` and ``drive``.

Made once per test run from the configured backends, into a plugin module
(pytest collects fixtures from any registered plugin).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from ._clock import MockClock
from ._harness import Drive
from ._harness import drive as drive_fn

__all__ = ["BACKENDS", "make_fixtures"]

#: Backend name -> (what ``anyio_backend`` gives anyio, the module it needs or None).
BACKENDS: dict[str, tuple[object, str | None]] = {
    "asyncio": ("asyncio", None),
    "trio": ("trio", "trio"),
    "asyncio+uvloop": (("asyncio", {"use_uvloop": True}), "uvloop"),
}


def make_fixtures(backends: list[str]) -> ModuleType:
    """A plugin module whose fixtures run async tests on each of ``backends``."""

    @pytest.fixture(scope="module", params=backends)
    def anyio_backend(request: pytest.FixtureRequest) -> object:
        """The anyio backend of the test: each of ``hookrun_backends`` in turn."""
        return BACKENDS[request.param][0]

    @pytest.fixture
    def mock_clock() -> MockClock:
        """A fresh ``MockClock`` at time 0."""
        return MockClock()

    @pytest.fixture
    def drive(anyio_backend: object, mock_clock: MockClock) -> Drive:
        """``hookrun.testing.drive`` with ``clock=mock_clock``; an async test using it
        runs on every backend."""
        bound: Callable[..., Any] = functools.partial(drive_fn, clock=mock_clock)
        return bound

    plugin = ModuleType("hookrun.testing.fixtures", "The fixtures of hookrun's test kit.")
    plugin.anyio_backend = anyio_backend  # type: ignore[attr-defined]
    plugin.mock_clock = mock_clock  # type: ignore[attr-defined]
    plugin.drive = drive  # type: ignore[attr-defined]
    return plugin
