"""examples/ray_workers.py: a chief and two worker processes share one global step."""

from __future__ import annotations

import anyio
import pytest
from examples import ray_workers

from .conftest import RayCluster

pytestmark = pytest.mark.anyio


async def test_chief_and_workers_share_the_step_and_survive_a_lost_actor(ray_cluster: RayCluster) -> None:
    """Every process stops at the last step; worker 1 re-creates its session once; no step is lost."""
    with anyio.fail_after(180):
        reports = await ray_workers.main(last_step=20, address=ray_cluster.address)
    by_role = {report["role"]: report for report in reports}
    assert sorted(by_role) == ["chief", "worker-1", "worker-2"]
    assert [by_role[role]["sessions"] for role in sorted(by_role)] == [1, 2, 1]
    assert all(report["last_step"] >= 20 for report in reports)
    # Each successful run advanced the shared step exactly once:
    assert sum(report["steps"] for report in reports) == max(report["last_step"] for report in reports)
