"""A two-node Ray cluster started with ``ray start`` (head and a second node, loopback
only, in a network namespace of the test's own) and a job that loses the second node
mid-run: every item comes back, the global step is exact, checkpoints only go up."""

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


@pytest.fixture(scope="module")
def cluster_run() -> Iterator[dict[str, Any]]:
    """The scenario's result (one run of the cluster for every test here); nothing of it is left after."""
    result = run_isolated("tests.ray._cluster_run", [], timeout=600)
    yield result
    temp_dir = result["temp_dir"]
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if temp_dir in " ".join(p.info["cmdline"] or [])]
    assert not left, f"processes of the cluster left: {left}"
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_every_item_comes_back_after_a_node_is_lost(cluster_run: dict[str, Any], backend: str) -> None:
    """The second node killed after some items: every item came back, in order, once."""
    run = cluster_run[backend]
    assert run["items"] == list(range(scenario.ITEMS))
    assert run["nodes_before"] == sorted([cluster_run["head"], run["node_b"]])  # lanes were on both nodes
    assert run["nodes_after"] == [cluster_run["head"]]  # and then on the live one only
    assert run["created"] > scenario.LANES  # the lost lanes were re-created


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_global_step_is_exact_though_the_counters_node_was_lost(cluster_run: dict[str, Any], backend: str) -> None:
    """The counter lived on the killed node: it came back at the step it had, and ends exact."""
    run = cluster_run[backend]
    assert run["counter_node"] == run["node_b"]
    assert run["final_step"] == scenario.ITEMS


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_checkpoint_steps_only_go_up(cluster_run: dict[str, Any], backend: str) -> None:
    """Every checkpoint saved has a higher step than the one saved before it, up to the end."""
    steps = cluster_run[backend]["checkpoint_steps"]
    assert steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == scenario.ITEMS


def test_no_process_of_the_cluster_is_left(cluster_run: dict[str, Any]) -> None:
    """The processes started were stopped by their PIDs; none was left in the namespace."""
    assert cluster_run["left"] == []
