"""A Dask scheduler and two workers started with the ``dask`` command line (loopback
only, in a network namespace of the test's own), and jobs that lose a worker mid-run,
with actor lanes and with task lanes: every item comes back, the global step is exact,
checkpoints only go up."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tests.remote._netns import namespace_problem, run_isolated

from . import _cluster_run as scenario

_PROBLEM = namespace_problem()
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=f"needs a network namespace: {_PROBLEM}")

RUNS = [f"{kind}-{backend}" for kind in ("actors", "tasks") for backend in ("asyncio", "trio")]


@pytest.fixture(scope="module")
def cluster_run() -> Iterator[dict[str, Any]]:
    """The scenario's result (one cluster for every test here); nothing of it is left after."""
    result = run_isolated("tests.dask._cluster_run", [], timeout=600)
    yield result
    temp_dir = result["temp_dir"]
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if temp_dir in " ".join(p.info["cmdline"] or [])]
    assert not left, f"processes of the cluster left: {left}"
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.parametrize("run", RUNS)
def test_every_item_comes_back_after_a_worker_is_lost(cluster_run: dict[str, Any], run: str) -> None:
    """Worker B killed after some items: every item came back, in order, once; the
    steps ran on both workers before, on the live one after."""
    done = cluster_run[run]
    assert done["items"] == list(range(scenario.ITEMS))
    assert [w.split(":")[1] for w in done["workers_before"]] == ["//127.0.0.2", "//127.0.0.3"]
    assert [w.split(":")[1] for w in done["workers_after"]] == ["//127.0.0.2"]


@pytest.mark.parametrize("run", RUNS)
def test_the_global_step_is_exact(cluster_run: dict[str, Any], run: str) -> None:
    """The shared counter (on the scheduler) ends at one step per item."""
    assert cluster_run[run]["final_step"] == scenario.ITEMS


@pytest.mark.parametrize("run", RUNS)
def test_checkpoint_steps_only_go_up(cluster_run: dict[str, Any], run: str) -> None:
    """Every checkpoint saved has a higher step than the one saved before it, up to the end."""
    steps = cluster_run[run]["checkpoint_steps"]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == scenario.ITEMS


def test_only_the_lost_lanes_were_re_created(cluster_run: dict[str, Any]) -> None:
    """Actor lanes: the lanes whose actor worker B held were re-created, no others."""
    for backend in ("asyncio", "trio"):
        assert scenario.LANES < cluster_run[f"actors-{backend}"]["created"] < 2 * scenario.LANES


def test_no_process_of_the_cluster_is_left(cluster_run: dict[str, Any]) -> None:
    """The processes started were stopped by their PIDs; none was left in the namespace."""
    assert cluster_run["left"] == []
    assert cluster_run["workers"] == ["a"]
