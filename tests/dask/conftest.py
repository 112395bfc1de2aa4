"""One Dask LocalCluster (two worker processes, 127.0.0.1 only) for all the Dask tests.

The cluster is package-scoped: started once and closed when the last Dask test has
run, so it never runs alongside the rest of the suite.

Every test here is marked ``engine``. Tests that kill a worker wait for the nanny to
bring it back (``restore_workers``). A worker the nanny is slow to restart on a loaded
machine is not given up on: the cluster waits far longer than Dask's 15 s before it
closes a lost worker's nanny, and if it closed one anyway, ``restore_workers`` starts
the missing worker again. At the end the cluster is closed and the fixture
checks that none of its worker processes is left. Start-up waits (the cluster's
connections, the workers' arrival) are scaled to the machine's load; if Dask cannot
start, the first test that needs it fails with Dask's reason and the others are skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")
import dask
import distributed
import psutil

from tests._engine_start import EngineDown, require, scaled, start_engine

N_WORKERS = 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.engine)


def _worker_processes() -> list[psutil.Process]:
    """Dask's spawned worker processes among this process's descendants."""
    found = []
    for child in psutil.Process(os.getpid()).children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "spawn_main" in cmdline:
            found.append(child)
    return found


def _config(bound: float) -> dict[str, str]:
    return {
        "distributed.comm.timeouts.connect": f"{bound:.0f}s",
        # Dask closes the nanny of a worker that has not come back within this time,
        # which a restart on a loaded 2-core machine can exceed at the default 15 s.
        "distributed.deploy.lost-worker-timeout": f"{3 * bound:.0f}s",
    }


@pytest.fixture(scope="package")
def _dask_started() -> Iterator[distributed.LocalCluster | EngineDown]:
    bound = scaled(60.0)
    made: list[distributed.LocalCluster] = []

    def start() -> distributed.LocalCluster:
        cluster = distributed.LocalCluster(
            n_workers=N_WORKERS,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            host="127.0.0.1",
        )
        made.append(cluster)
        with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
            client.wait_for_workers(N_WORKERS, timeout=bound)
        return cluster

    def retry() -> None:
        while made:
            with contextlib.suppress(Exception):  # a half-started cluster: close what there is
                made.pop().close()

    # For the whole package: the cluster reads the lost-worker timeout each time a worker
    # is removed, not only when it starts.
    with dask.config.set(_config(bound)):
        started = start_engine("Dask", start, within=bound, retry=retry)
        if isinstance(started, EngineDown):
            yield started
            return
        try:
            yield started
        finally:
            started.close()
    _, alive = psutil.wait_procs(_worker_processes(), timeout=scaled(30.0))
    assert not alive, f"Dask worker processes left after closing the cluster: {alive}"


@pytest.fixture(scope="package")
def _dask_client_started(
    _dask_started: distributed.LocalCluster | EngineDown,
) -> Iterator[distributed.Client | EngineDown]:
    if isinstance(_dask_started, EngineDown):
        yield _dask_started
        return
    client = distributed.Client(_dask_started.scheduler_address, set_as_default=False)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def dask_cluster(_dask_started: distributed.LocalCluster | EngineDown) -> distributed.LocalCluster:
    """The package's cluster (fails, or skips after the first failure, if Dask did not start)."""
    return require(_dask_started)


@pytest.fixture
def dask_client(_dask_client_started: distributed.Client | EngineDown) -> distributed.Client:
    """The user's own synchronous client (not the default client: hookrun must not need that)."""
    return require(_dask_client_started)


@pytest.fixture
def restore_workers(
    dask_cluster: distributed.LocalCluster, dask_client: distributed.Client
) -> Iterator[None]:
    """After a test that kills a worker: wait until the nanny has restarted it.

    If the worker has not come back (its nanny closed), the cluster starts it again.
    """
    yield
    try:
        dask_client.wait_for_workers(N_WORKERS, timeout=scaled(60.0))
    except distributed.exceptions.WorkerStartTimeoutError:
        dask_cluster.scale(N_WORKERS)
        dask_client.wait_for_workers(N_WORKERS, timeout=scaled(60.0))
