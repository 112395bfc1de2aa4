"""One local Ray cluster for all the Ray tests (loopback only, no dashboard).

Every test here is marked ``engine``. The cluster is package-scoped: started once,
shut down when the last Ray test has run (so it never runs alongside the rest of
the suite), and the fixture checks that no process of it is left behind. Its
start is bounded by a wait scaled to the machine's load; if Ray cannot start, the
first test that needs it fails with Ray's reason and the others are skipped.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._engine_start import EngineDown, require, scaled, start_engine

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token file in $HOME (and its warning)
# Processes the tests start join the loopback-only cluster (the variable is read at Ray's import).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

ray = pytest.importorskip("ray")


@dataclass(frozen=True)
class RayCluster:
    """The session's cluster: where to connect other processes, and its temp dir."""

    address: str
    temp_dir: str


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.engine)


def processes_using(path: str) -> list[int]:
    """Pids of live processes whose command line mentions ``path``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if path.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def listening_sockets(root_pid: int) -> list[tuple[str, int, str]]:
    """``(address, port, process)`` of every TCP socket listening in ``root_pid``'s process tree."""
    import psutil

    root = psutil.Process(root_pid)
    tree = {root.pid: root.name()}
    for child in root.children(recursive=True):
        try:
            tree[child.pid] = child.name()
        except psutil.NoSuchProcess:  # it exited while the tree was listed: it listens on nothing
            continue
    return [
        (conn.laddr.ip, conn.laddr.port, tree[conn.pid])
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.pid in tree
    ]


def is_loopback(address: str) -> bool:
    """127.0.0.0/8 or ::1, also as an IPv4-mapped IPv6 address (``::ffff:127.0.0.1``)."""
    import ipaddress

    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def wait_until_gone(path: str, within: float = 30.0) -> list[int]:
    """Wait (bounded) for the processes of ``path`` to exit; return the ones still alive."""
    import time

    deadline = time.monotonic() + within
    while (left := processes_using(path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="package")
def _ray_started() -> Iterator[RayCluster | EngineDown]:
    temp_dir = tempfile.mkdtemp(prefix="hkr-ray-", dir="/tmp")  # short: Ray puts sockets there
    from hookrun.ray import init_local

    def start() -> RayCluster:
        init_local(num_cpus=2, log_to_driver=False, configure_logging=False, _temp_dir=temp_dir)
        return RayCluster(ray.get_runtime_context().gcs_address, temp_dir)

    started = start_engine("Ray", start, within=scaled(60.0), retry=ray.shutdown)
    if isinstance(started, EngineDown):
        wait_until_gone(temp_dir)
        yield started
        return
    try:
        yield started
    finally:
        ray.shutdown()
    left = wait_until_gone(temp_dir, within=scaled(30.0))
    assert not left, f"Ray processes left after shutdown: {left}"


@pytest.fixture
def ray_cluster(_ray_started: RayCluster | EngineDown) -> RayCluster:
    """The package's Ray cluster (fails, or skips after the first failure, if Ray did not start)."""
    return require(_ray_started)
