"""The local Ray that hookrun starts listens on the loopback interface only."""

from __future__ import annotations

import os

import pytest

from hookrun.ray import init_local

from . import _remote
from .conftest import RayCluster, is_loopback, listening_sockets


def test_every_ray_server_listens_on_loopback_only(ray_cluster: RayCluster) -> None:
    """GCS, raylet, workers, agents and this driver: no socket on 0.0.0.0, :: or the host's address."""
    import ray

    host, _, _ = ray_cluster.address.rpartition(":")
    assert host == "127.0.0.1"
    answer = ray.get(ray.remote(_remote.square).remote({"x": 3}))  # a worker is up and serving
    assert answer["y"] == 9 and answer["pid"] != os.getpid()
    sockets = listening_sockets(os.getpid())
    names = {name for _, _, name in sockets}
    assert {"gcs_server", "raylet"} <= names, sockets
    exposed = [s for s in sockets if not is_loopback(s[0])]
    assert not exposed, f"Ray servers listening beyond loopback: {exposed}"


def test_the_address_checks_tell_loopback_from_the_rest() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "::1", "::ffff:127.0.0.1", "127.0.1.1"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "192.0.2.2", "::ffff:192.0.2.2"]))


def test_init_local_refuses_what_it_sets_itself() -> None:
    with pytest.raises(TypeError, match="address, include_dashboard"):
        init_local(address="auto", include_dashboard=True)
