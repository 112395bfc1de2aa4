"""Where a creator's new session actors go while a node is lost and Ray does not know yet.

When a node dies, Ray's control store still lists it as alive until its health
checks fail (15 s and more with Ray's defaults), and an actor created meanwhile may
be placed on it, or wait, and fail only then. A creator tells its ``NodeWatch`` the
node of every session actor it loses; before creating an actor, it asks where to put
it (``place``): while a suspect node is still listed as alive and its raylet does not
accept a connection, each new actor is pinned to one of the other live nodes, in
turn; otherwise Ray places it as the creator's options say. A suspect node is
forgotten as soon as Ray lists it as dead (Ray then avoids it itself) or its raylet
answers (only the actor's process was lost). The sessions' calls in flight are registered by node: when a lost actor's node
turns out not to answer, the calls still waiting on actors of that node are ended at
once (their sessions raise ``UnavailableError``) instead of each waiting for Ray to
declare the node dead. Invariants: never avoids every live node (then Ray chooses); a
node's raylet is probed at most once per ``RECHECK`` seconds; probing runs in a
worker thread; only calls on a node whose raylet refused a connection are ended.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import anyio
import ray

from .._log import logger
from ..remote._waiting import PlacedWaits, Waiting

__all__ = ["RECHECK", "NodeWatch", "node_of_actor"]
#: Seconds a probe of a suspect node's raylet stands for.
RECHECK = 1.0
#: Seconds to wait for a suspect raylet to accept a connection.
_PROBE_TIMEOUT = 1.0


def node_of_actor(actor: object) -> str:
    """Run inside an actor (``__ray_call__``): the ID of the node it lives on."""
    return str(ray.get_runtime_context().get_node_id())


class NodeWatch:
    """The nodes a creator lost actors on, and which of them to avoid (see the module docstring)."""

    def __init__(self) -> None:
        self._suspects: dict[str, float | None] = {}  # node ID -> when found unreachable (None: not yet probed)
        self._waits = PlacedWaits()  # by node ID
        self._gone: set[str] = set()  # nodes found not answering (reported once)
        self._turn = 0

    def calls(self, node: str) -> set[Waiting]:
        """The calls waiting on actors of ``node`` (each call is in it while it waits,
        see ``hookrun.remote._future.wait_future``); ended if the node is gone."""
        return self._waits.calls(node)

    async def lost(self, node: str | None) -> None:
        """An actor on ``node`` was lost: suspect the node; if its raylet does not answer,
        end the calls still waiting on it."""
        if node is None:
            return
        self._suspects.setdefault(node, None)
        address = await anyio.to_thread.run_sync(_raylet_of, node)
        if address is not None and not await anyio.to_thread.run_sync(_answers, address):
            self._suspects[node] = time.monotonic()
            ended = self._waits.end(node)
            if node not in self._gone:
                self._gone.add(node)
                logger().warning(
                    "Ray node %s (raylet %s:%d) no longer answers: new session actors avoid it, and "
                    "%d calls waiting on it end", node, *address, ended,
                )

    async def place(self) -> str | None:
        """The ID of the node to pin a new actor to (``None``: no node to avoid, Ray places it)."""
        if not self._suspects:
            return None
        return await anyio.to_thread.run_sync(self._place_sync)

    def _place_sync(self) -> str | None:
        nodes: dict[str, dict[str, Any]] = {
            n["NodeID"]: n for n in ray.nodes() if n.get("Alive")  # type: ignore[no-untyped-call]
        }
        now = time.monotonic()
        for node, checked in list(self._suspects.items()):
            if node not in nodes:
                del self._suspects[node]  # Ray lists it dead: it avoids it itself
            elif checked is None or now - checked > RECHECK:
                if _answers(_address(nodes[node])):
                    del self._suspects[node]
                else:
                    self._suspects[node] = now
        others = sorted(set(nodes) - set(self._suspects))
        if not self._suspects or not others:
            return None
        self._turn += 1
        return others[self._turn % len(others)]


def _address(node: dict[str, Any]) -> tuple[str, int]:
    return str(node["NodeManagerAddress"]), int(node["NodeManagerPort"])


def _raylet_of(node_id: str) -> tuple[str, int] | None:
    """The raylet address of the node ``node_id`` if Ray lists it as alive."""
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node["NodeID"] == node_id and node.get("Alive"):
            return _address(node)
    return None


def _answers(address: tuple[str, int]) -> bool:
    """Whether the raylet at ``address`` accepts a TCP connection."""
    try:
        with socket.create_connection(address, _PROBE_TIMEOUT):
            return True
    except OSError:
        return False
