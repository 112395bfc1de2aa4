"""Ray's lifetime as hookrun sees it: use a running Ray, or start a local one and own it.

Creators and counters hold a lease while they are open: the first lease taken while
Ray is not running starts a local Ray bound to 127.0.0.1 without a dashboard, and the
last lease released shuts down only a Ray that hookrun started this way. A Ray the
program started itself is never shut down here. ``ensure_ray`` (for sessions, which
come and go with recovery) starts Ray if needed and leaves it running until the
process exits, when Ray shuts itself down.
"""

from __future__ import annotations

import threading

import anyio
import ray

__all__ = ["RayLease", "ensure_ray"]

_lock = threading.Lock()
_holders = 0
_owned = False  # hookrun started the running Ray and may shut it down


def _start_local() -> bool:
    """Start a local, loopback-only Ray unless one is running; True if this call started it."""
    with _lock:
        if ray.is_initialized():
            return False
        ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1")
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
