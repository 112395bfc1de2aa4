"""The engine fixtures' start-up: a load-scaled bound, retries, and one failure line, not a cascade."""

from __future__ import annotations

import pytest

from tests import _engine_start
from tests._engine_start import EngineDown, require, scaled, start_engine


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda seconds: None)


def test_a_start_that_fails_is_retried_and_cleaned_up_until_it_works() -> None:
    attempts: list[str] = []
    cleaned: list[int] = []

    def start() -> str:
        attempts.append("try")
        if len(attempts) < 3:
            raise TimeoutError("The current node timed out during startup.")
        return "cluster"

    assert start_engine("Ray", start, within=60.0, retry=lambda: cleaned.append(1)) == "cluster"
    assert len(attempts) == 3 and len(cleaned) == 2


def test_a_start_that_keeps_failing_gives_the_engines_reason_in_one_line() -> None:
    def start() -> str:
        raise RuntimeError("Timed out after 30 seconds while waiting for node to startup.\nmore\nlines")

    down = start_engine("Ray", start, within=0.0, retry=lambda: None)
    assert isinstance(down, EngineDown)
    assert down.reason == (
        "Ray did not start (1 attempt(s) in 0 s): RuntimeError: "
        "Timed out after 30 seconds while waiting for node to startup."
    )


def test_the_first_test_needing_a_down_engine_fails_and_the_others_skip() -> None:
    down = EngineDown("Dask", "Dask did not start (2 attempt(s) in 60 s): OSError: no ports")
    with pytest.raises(pytest.fail.Exception, match=r"^Dask did not start \(2 attempt\(s\) in 60 s\): OSError: no ports$"):
        require(down)
    for _ in range(3):
        with pytest.raises(pytest.skip.Exception, match="Dask did not start: see the first failure"):
            require(down)
    assert require("cluster") == "cluster"


def test_bounds_stretch_with_the_load_but_not_without_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("os.getloadavg", lambda: (0.5, 0.0, 0.0))
    assert scaled(60.0) == 60.0  # an idle machine: the base bound
    monkeypatch.setattr("os.getloadavg", lambda: (8.0, 0.0, 0.0))
    assert scaled(60.0) == 240.0  # four runnable tasks per core
    monkeypatch.setattr("os.getloadavg", lambda: (500.0, 0.0, 0.0))
    assert scaled(60.0) == 60.0 * _engine_start.MAX_STRETCH
