"""Where a creator's new session actors must not go: nodes that just lost an actor and
no longer answer.

When a node dies, Ray's control store still lists it as alive until its health
checks fail (seconds; tens of seconds with Ray's defaults), and an actor created
meanwhile may be placed on it and fail only then. A creator tells its ``NodeWatch``
the node of every session actor it loses; before creating an actor, it asks which of
those nodes to avoid. A suspect node is avoided while Ray still lists it as alive and
its raylet does not accept a connection; it is forgotten as soon as Ray lists it as
dead (Ray then avoids it itself) or its raylet answers (only the actor's process was
lost). Invariants: never avoids every live node (then Ray chooses); a node's raylet
is probed at most once per ``RECHECK`` seconds; probing runs in a worker thread.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import anyio
import ray

__all__ = ["NODE_LABEL", "RECHECK", "NodeWatch", "node_of_actor"]

#: The label every Ray node carries with its ID (for ``label_selector``).
NODE_LABEL = "ray.io/node-id"
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

    def lost(self, node: str | None) -> None:
        """An actor on ``node`` was lost: suspect the node until it answers or Ray lists it dead."""
        if node is not None:
            self._suspects.setdefault(node, None)

    async def avoid(self) -> list[str]:
        """The IDs of the nodes a new actor must not be placed on (often none)."""
        if not self._suspects:
            return []
        return await anyio.to_thread.run_sync(self._avoid_sync)

    def _avoid_sync(self) -> list[str]:
        nodes: dict[str, dict[str, Any]] = {
            n["NodeID"]: n for n in ray.nodes() if n.get("Alive")  # type: ignore[no-untyped-call]
        }
        now = time.monotonic()
        for node, checked in list(self._suspects.items()):
            if node not in nodes:
                del self._suspects[node]  # Ray lists it dead: it avoids it itself
            elif checked is None or now - checked > RECHECK:
                if _answers(nodes[node]):
                    del self._suspects[node]
                else:
                    self._suspects[node] = now
        avoided = sorted(self._suspects)
        return avoided if len(avoided) < len(nodes) else []


def _answers(node: dict[str, Any]) -> bool:
    """Whether the node's raylet accepts a TCP connection."""
    try:
        with socket.create_connection((node["NodeManagerAddress"], node["NodeManagerPort"]), _PROBE_TIMEOUT):
            return True
    except OSError:
        return False
