"""The scheduler plugin that holds every ``DaskStepCounter`` of a Dask cluster.

A counter lives on the scheduler, not on a worker: the scheduler is the one process
whose loss ends the cluster anyway, so no worker's death can take a shared step with
it. The plugin keeps one ``SharedStep`` per counter name and answers one RPC,
``hookrun_step``, on the scheduler's event loop; a parked ``wait_until`` is a
coroutine there (nothing polls). Invariants: a counter is created on first use at the
seed its first caller sends, and removed only by ``delete``; the plugin is installed
once per scheduler (registering it again keeps the counters it holds).
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from ..remote._shared_step import SharedStep

__all__ = ["PLUGIN_NAME", "RPC", "StepCounters"]

PLUGIN_NAME = "hookrun-step-counters"
#: The scheduler handler the counters' clients call.
RPC = "hookrun_step"

_METHODS = frozenset({"get", "increment", "set", "lift", "wait_until", "forget"})


class StepCounters(SchedulerPlugin):
    """Every shared step of a cluster, by name, on the scheduler (see the module docstring)."""

    name = PLUGIN_NAME
    idempotent = True  # registered by each client: the first one installs it

    def __init__(self) -> None:
        self._steps: dict[str, SharedStep] = {}

    async def start(self, scheduler: Any) -> None:
        scheduler.handlers[RPC] = self.handle

    async def handle(self, name: str, method: str, args: list[Any], seed: int) -> Any:
        """Call ``method(*args)`` on the counter ``name`` (created at ``seed`` if missing)."""
        if method == "delete":
            return self._steps.pop(name, None) is not None
        if method not in _METHODS:
            raise ValueError(f"hookrun step counters have no method {method!r}")
        step = self._steps.get(name)
        if step is None:
            step = self._steps[name] = SharedStep(seed)
        return await getattr(step, method)(*args)
