"""Starting a test engine (Ray, Dask) on a machine that may be loaded.

An engine's start-up is given a bound scaled to the machine's load, and a start
that keeps failing within it is retried; when it still fails, the first test that
needs the engine fails with the engine's own reason in one line and the others
that need it are skipped with a pointer to that failure (no cascade of fixture
errors, each repeating a traceback).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pytest

T = TypeVar("T")

#: The most a load factor stretches a bound: a stuck machine still ends the wait.
MAX_STRETCH = 6.0


def load_factor() -> float:
    """The machine's 1-minute load per core, at least 1 (an idle machine gets the base bound)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform
        return 1.0
    return min(MAX_STRETCH, max(1.0, load / (os.cpu_count() or 1)))


def scaled(seconds: float) -> float:
    """``seconds`` (a bound for an idle machine) stretched by the machine's load."""
    return seconds * load_factor()


@dataclass
class EngineDown:
    """Why an engine did not start; ``reported`` once a test has failed with the reason."""

    engine: str
    reason: str
    reported: bool = False


def start_engine(engine: str, start: Callable[[], T], *, within: float, retry: Callable[[], None]) -> T | EngineDown:
    """``start()`` until it returns or ``within`` seconds have passed; then ``EngineDown``.

    ``retry()`` cleans up after a failed attempt (shut the half-started engine down).
    """
    deadline = time.monotonic() + within
    attempts = 0
    while True:
        attempts += 1
        try:
            return start()
        except Exception as exc:  # the engine's own error, whatever its type
            retry()
            first_line = (str(exc).strip().splitlines() or [""])[0]
            reason = f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__
            if time.monotonic() >= deadline:
                return EngineDown(
                    engine, f"{engine} did not start ({attempts} attempt(s) in {within:.0f} s): {reason}"
                )
            time.sleep(1.0)


def require(started: T | EngineDown) -> T:
    """The started engine, or fail (the first test) / skip (the others) with the reason."""
    if not isinstance(started, EngineDown):
        return started
    if not started.reported:
        started.reported = True
        pytest.fail(started.reason, pytrace=False)
    pytest.skip(f"{started.engine} did not start: see the first failure of its tests")
