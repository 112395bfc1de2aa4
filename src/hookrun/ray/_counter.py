"""``RayStepCounter``: a global step shared by every worker of a job, in a named Ray actor.

The counter lives in a detached async actor (``num_cpus=0``) that every worker creates
or joins by name, placed on a node chosen by ``node`` (the head node by default: the
one whose loss ends the cluster anyway). ``wait_for`` is one actor call parked on the
actor's event loop until the value reaches the target: nothing polls, on either side,
and cancelling the caller cancels the parked call. Invariants: the value only changes
through ``increment``, ``set`` and ``lift``; a counter actor that died is re-created
(on its node if that node lives, else on the head node) at no less than the
highest value a client saw, never silently at its initial value.
``recent()`` answers, without a round trip, with a value this counter read or wrote
itself within ``max_staleness`` seconds (what a monitored session takes as a step's
``run_context.global_step``); ``get()`` always asks the actor.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, ClassVar, cast

import anyio
import ray
from ray.actor import ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .._log import logger
from ..remote._counter import RemoteStepCounter
from ..remote._shared_step import SharedStep
from ._errors import await_ref
from ._runtime import RayLease

__all__ = ["RayStepCounter"]

DEFAULT_NAMESPACE = "hookrun"

_GlobalStepActor = ray.remote(SharedStep)

#: The resource only the head node has.
_HEAD_RESOURCE = "node:__internal_head__"


class RayStepCounter(RemoteStepCounter["ActorHandle[Any]"]):
    """A ``StepCounter`` shared by every process of a Ray job, found by ``name``.

    The first counter to be used creates the actor with ``initial``; the others join
    it and ``initial`` is ignored. The actor is detached (it outlives the driver that
    created it), so call ``delete()`` once at the end of the job; a counter left from an
    earlier job is joined with its value. ``namespace`` defaults to ``"hookrun"`` so that
    separate driver processes find each other without configuring a Ray namespace.

    ``node`` says where the actor lives: ``"head"`` (the default) is the cluster's
    head node, whose loss ends the cluster anyway; ``"local"`` is the node of the
    process that creates it; any other string is the ID of a node
    (``ray.get_runtime_context().get_node_id()`` on it). If that node is dead when
    the actor is (re-)created, it goes to the head node.

    If the actor dies (its node, or its process), every counter joins it again:
    the first re-creates it from the highest value it saw, and each lifts it to the
    highest value it saw, so the shared step never goes back; calls wait for that
    up to ``reconnect_timeout`` seconds, then raise ``ConnectionError``.

    If Ray is not initialised, first use starts a local Ray on 127.0.0.1 (without a
    dashboard), which ``aclose()`` shuts down again.

    ``recent()`` is the value this counter last read or wrote (``get``,
    ``increment``, ``set``) if that call was sent at most ``max_staleness`` seconds
    ago, else ``None``. A monitored session uses it for each step's
    ``run_context.global_step``, so a worker's step makes one round trip to the
    counter (the increment), not two; steps that follow each other closely see the
    value their previous step's increment returned. ``max_staleness=0`` makes every
    step read the counter afresh.

    Args:
        name: The counter's name: every process using it shares the counter.
        namespace: The Ray namespace of its actor. ``None``: ``"hookrun"``.
        initial: The value of a counter this one creates.
        max_staleness: Seconds for which the value last read or written answers
            ``recent()``.
        node: Where the counter's actor lives: ``"head"``, ``"local"`` or a node's ID.
        reconnect_timeout: Seconds a call waits for a lost counter to come back before it
            raises ``ConnectionError``.
    """

    _kind: ClassVar[str] = "RayStepCounter"

    def __init__(
        self,
        name: str = "global_step",
        namespace: str | None = None,
        *,
        initial: int = 0,
        max_staleness: float = 0.05,
        node: str = "head",
        reconnect_timeout: float = 60.0,
    ) -> None:
        if namespace is not None and (not isinstance(namespace, str) or not namespace):
            raise ValueError(f"RayStepCounter: namespace must be a non-empty string, got {namespace!r}")
        if not isinstance(node, str) or not node:
            raise ValueError(f'RayStepCounter: node must be "head", "local" or a node ID, got {node!r}')
        super().__init__(name, initial=initial, max_staleness=max_staleness, reconnect_timeout=reconnect_timeout)
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.node = node
        self._lease = RayLease()

    def __repr__(self) -> str:
        return f"RayStepCounter({self.name!r}, namespace={self.namespace!r})"

    async def delete(self) -> None:
        """Kill the shared actor: the counter ends for every worker (once, at job end)."""
        actor = await self._join()
        self._drop()
        ray.kill(actor, no_restart=True)

    async def aclose(self) -> None:
        """Let go of the actor (it keeps running); shut down a Ray this counter started."""
        self._drop()
        await self._lease.release()

    async def _open(self, seed: int) -> ActorHandle[Any]:
        await self._lease.acquire()
        return await anyio.to_thread.run_sync(self._get_or_create, seed)

    def _invoke(
        self, handle: ActorHandle[Any], method: str, args: tuple[object, ...], token: int | None
    ) -> Awaitable[int]:
        # ray.cancel of a parked wait_until cancels it on the actor: no forget needed.
        return cast("Awaitable[int]", await_ref(getattr(handle, method).remote(*args), repr(self)))

    def _get_or_create(self, seed: int) -> ActorHandle[Any]:
        node = self._placement()
        options = _GlobalStepActor.options(
            name=self.name,
            namespace=self.namespace,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        )
        return cast("ActorHandle[Any]", options.remote(seed))

    def _placement(self) -> str:
        """The node for the actor, pinned there (a soft affinity of an actor that asks for
        no resource, as this one, lets Ray place it on any node)."""
        if self.node == "local":
            return str(ray.get_runtime_context().get_node_id())
        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        alive = [n for n in nodes if n.get("Alive")]
        heads = [str(n["NodeID"]) for n in alive if _HEAD_RESOURCE in n.get("Resources", {})]
        head = heads[0] if heads else str(ray.get_runtime_context().get_node_id())
        if self.node == "head":
            return head
        if any(n["NodeID"] == self.node for n in alive):
            return self.node
        if any(n["NodeID"] == self.node for n in nodes):
            logger().warning("%r: node %s is dead; the counter lives on the head node", self, self.node)
            return head
        raise ValueError(f'{self!r}: node={self.node!r} is not "head", "local" or the ID of a node of this cluster')
