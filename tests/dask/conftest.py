"""One Dask LocalCluster (two worker processes, 127.0.0.1 only) for all the Dask tests.

The cluster is package-scoped: started once and closed when the last Dask test has
run, so it never runs alongside the rest of the suite.

Every test here is marked ``engine``. Tests that kill a worker wait for the nanny to
bring it back (``restore_workers``). At the end the cluster is closed and the fixture
checks that none of its worker processes is left.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")
import distributed
import psutil

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


@pytest.fixture(scope="package")
def dask_cluster() -> Iterator[distributed.LocalCluster]:
    cluster = distributed.LocalCluster(
        n_workers=N_WORKERS,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
    )
    try:
        yield cluster
    finally:
        cluster.close()
    _, alive = psutil.wait_procs(_worker_processes(), timeout=30)
    assert not alive, f"Dask worker processes left after closing the cluster: {alive}"


@pytest.fixture(scope="package")
def dask_client(dask_cluster: distributed.LocalCluster) -> Iterator[distributed.Client]:
    """The user's own synchronous client (not the default client: hookrun must not need that)."""
    client = distributed.Client(dask_cluster.scheduler_address, set_as_default=False)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def restore_workers(dask_client: distributed.Client) -> Iterator[None]:
    """After a test that kills a worker: wait until the nanny has restarted it."""
    yield
    dask_client.wait_for_workers(N_WORKERS, timeout=60)
