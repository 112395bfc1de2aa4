"""Ray's lifetime as hookrun sees it: use a running Ray, or start a local one and own it.

Creators and counters hold a lease while they are open: the first lease taken while
Ray is not running starts a local Ray (``init_local``: every server on the loopback
interface, no dashboard), and the last lease released shuts down only a Ray that
hookrun started this way. A Ray the program started itself is never shut down here.
``ensure_ray`` (for sessions, which come and go with recovery) starts Ray if needed
and leaves it running until the process exits, when Ray shuts itself down.

Loopback: on Linux, Ray rewrites a node address of 127.0.0.1 to the machine's
network address, and its servers then listen on every interface. Ray's
single-machine mode (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, the default on
Windows and macOS) keeps 127.0.0.1, and its servers then listen on loopback only.
``init_local`` turns that mode on while Ray starts (the Ray processes it spawns
inherit it) and restores the setting afterwards; other processes joining that Ray
need ``LOOPBACK_ENV`` in their environment.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import ray

__all__ = ["LOOPBACK_ENV", "RayLease", "ensure_ray", "init_local"]

#: The environment a process needs to join a Ray started by ``init_local`` (Ray
#: reads it when it is first imported): without it, Ray resolves 127.0.0.1 to the
#: machine's network address, where a loopback-only Ray does not listen. It turns on
#: Ray's single-machine mode: never set it for a cluster of several nodes (``ray start
#: --address`` refuses to run with it).
LOOPBACK_ENV: dict[str, str] = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

#: ``ray.init`` options that would undo a loopback-only, dashboard-free Ray.
_FIXED = ("address", "include_dashboard", "_node_ip_address", "dashboard_host")

_lock = threading.Lock()
_holders = 0
_owned = False  # hookrun started the running Ray and may shut it down


def init_local(**options: Any) -> None:
    """Start a single-machine Ray whose servers listen on 127.0.0.1 only, without a dashboard.

    Blocking, like ``ray.init`` (from async code, call it through
    ``anyio.to_thread.run_sync``). ``options`` go to ``ray.init`` (``num_cpus``,
    ``_temp_dir``, ``log_to_driver``, ...); ``address``, ``include_dashboard``,
    ``_node_ip_address`` and ``dashboard_host`` are set here and refused. Other
    processes of this machine join it with ``ray.init(address=...)`` and
    ``LOOPBACK_ENV`` in their environment. The creators and counters of
    ``hookrun.ray`` call it when Ray is not initialised.

    Args:
        **options: Options of ``ray.init`` (``num_cpus``, ``_temp_dir``,
            ``log_to_driver``...).
    """
    given = sorted(set(options) & set(_FIXED))
    if given:
        raise TypeError(f"init_local() sets {', '.join(given)} itself (loopback only, no dashboard)")
    with _single_machine():
        ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", **options)


@contextmanager
def _single_machine() -> Iterator[None]:
    """Ray's single-machine mode while a local Ray starts: node address 127.0.0.1, kept as it is."""
    from ray._private import ray_constants  # read by Ray when it resolves 127.0.0.1

    saved_env = {key: os.environ.get(key) for key in LOOPBACK_ENV}
    saved_flag = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    os.environ.update(LOOPBACK_ENV)  # inherited by the Ray processes started now
    if saved_flag is not None:
        ray_constants.ENABLE_RAY_CLUSTER = False  # this process imported Ray before the variable was set
    try:
        yield
    finally:
        if saved_flag is not None:
            ray_constants.ENABLE_RAY_CLUSTER = saved_flag
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _start_local() -> bool:
    """Start a local, loopback-only Ray unless one is running; True if this call started it."""
    with _lock:
        if ray.is_initialized():
            return False
        init_local()
        return True


async def ensure_ray() -> None:
    """Make sure Ray is initialised in this process (a local one is left running)."""
    if not ray.is_initialized():
        await anyio.to_thread.run_sync(_start_local)


class RayLease:
    """One holder's claim on Ray: ``acquire`` once, ``release`` once (both idempotent)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = False

    async def acquire(self) -> None:
        global _holders, _owned
        if self._held:
            return
        started = False
        if not ray.is_initialized():
            started = await anyio.to_thread.run_sync(_start_local)
        with _lock:
            _holders += 1
            self._held = True
            _owned = _owned or started

    async def release(self) -> None:
        global _holders, _owned
        with _lock:
            if not self._held:
                return
            self._held = False
            _holders -= 1
            last = _holders == 0 and _owned
            if last:
                _owned = False
        if last and ray.is_initialized():
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(ray.shutdown)
