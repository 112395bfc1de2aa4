"""examples/dask_pipeline.py: the pipeline survives a worker killed mid-step."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import distributed
import pytest
from examples import dask_pipeline, dask_steps

import hookrun

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("in_flight", [1, 4])
@pytest.mark.usefixtures("restore_workers")
async def test_pipeline_processes_every_item_exactly_once(
    dask_cluster: distributed.LocalCluster, dask_client: distributed.Client, in_flight: int
) -> None:
    """A worker killed in the middle of one item's transform (with up to ``in_flight`` items
    in flight, some of them on that worker): every item is written once, in order."""
    # The worker processes now: a worker its nanny restarted may come back on the same
    # address (a port freed by the kill can be handed out again), never with the same pid.
    before = set(dask_client.run(os.getpid).values())
    with anyio.fail_after(120):
        sink = await dask_pipeline.main(
            30, address=dask_cluster.scheduler_address, lose_at=7, in_flight=in_flight, work_s=0.01
        )
    assert list(sink.rows) == list(range(30))  # written in the source's order
    assert sorted(sink.rows) == list(range(30))
    assert sink.writes == 30
    assert sink.rows == {i: i % 7 + 1 for i in range(30)}
    assert before - set(dask_client.run(os.getpid).values()), "no worker was lost"


async def test_a_pipeline_started_again_resumes_from_its_last_checkpoint(
    dask_cluster: distributed.LocalCluster, tmp_path: Path
) -> None:
    """The checkpoint saver keeps the source's cursor: a pipeline stopped after 15 items and
    started again with the same directory reads only the rest, and the sink holds every item
    once (the second run with 4 items in flight)."""
    with anyio.fail_after(120):
        first = await dask_pipeline.main(15, address=dask_cluster.scheduler_address, lose_at=None, checkpoint_dir=tmp_path)
        assert hookrun.latest_checkpoint(tmp_path) is not None
        second = await dask_pipeline.run_pipeline(dask_cluster.scheduler_address, 30, None, tmp_path, in_flight=4)
    assert sorted(first.rows) == list(range(15)) and sorted(second.rows) == list(range(15, 30))
    assert second.writes == 15
    restored = await hookrun.Checkpointer(tmp_path).restore()
    assert restored is not None and restored.state["hooks"]["source"] == {"next": 30}


async def test_the_smallest_dask_program_runs_its_steps_in_feed_order(dask_cluster: distributed.LocalCluster) -> None:
    """examples/dask_steps.py, shown whole on the distributed page: five squares, in order."""
    with anyio.fail_after(120):
        assert await dask_steps.run_steps(dask_cluster.scheduler_address) == [0.0, 1.0, 4.0, 9.0, 16.0]
