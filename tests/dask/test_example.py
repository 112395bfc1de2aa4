"""examples/dask_pipeline.py: the pipeline survives a worker killed mid-step."""

from __future__ import annotations

import anyio
import distributed
import pytest
from examples import dask_pipeline

pytestmark = pytest.mark.anyio


@pytest.mark.usefixtures("restore_workers")
async def test_pipeline_processes_every_item_exactly_once(
    dask_cluster: distributed.LocalCluster, dask_client: distributed.Client
) -> None:
    """A worker killed in the middle of one item's transform: every item is written once."""
    before = set(dask_client.run(lambda: 0))  # the worker addresses now
    with anyio.fail_after(120):
        sink = await dask_pipeline.main(30, address=dask_cluster.scheduler_address, lose_at=7)
    assert sorted(sink.rows) == list(range(30))
    assert sink.writes == 30
    assert sink.rows == {i: i % 7 + 1 for i in range(30)}
    assert before - set(dask_client.run(lambda: 0)), "no worker was lost"
