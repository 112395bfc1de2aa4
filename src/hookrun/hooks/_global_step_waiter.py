"""``GlobalStepWaiterHook``: hold the first step until the global step reaches a target."""

from __future__ import annotations

from typing import Any

from .._hook_protocol import SessionRunContext, SessionRunHook
from .._validate import check_int
from ._common import fields, logger, step_counter_of

__all__ = ["GlobalStepWaiterHook"]

_LOG_EVERY = 1000


class GlobalStepWaiterHook(SessionRunHook):
    """Delays this worker's steps until the global step reaches ``wait_until_step``.

    Used to start workers gradually in a distributed job whose step counter
    is shared. Waiting awaits the step counter's ``wait_for`` (given to the
    hook through the coordinator in ``after_create_session``): it never polls.
    Progress is logged every 1000 steps. A target <= 0 never waits; once
    released the hook never waits again. Note that a counter only this worker
    advances would wait forever: give it a shared counter.

    Args:
        wait_until_step: The global step to wait for before this worker's first step (<= 0:
            none).
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(self, wait_until_step: int) -> None:
        check_int("GlobalStepWaiterHook: wait_until_step", wait_until_step, minimum=None)
        self._wait_until_step = wait_until_step
        self._started = False
        self._counter: Any = None

    def __repr__(self) -> str:
        return f"GlobalStepWaiterHook({self._wait_until_step})"

    async def begin(self) -> None:
        """Arm the hook: the first step waits (unless the target is <= 0)."""
        self._started = self._wait_until_step <= 0

    async def after_create_session(self, session: object, coord: object) -> None:
        """Take the step counter from the coordinator."""
        self._counter = step_counter_of(coord)

    async def before_run(self, run_context: SessionRunContext) -> None:
        """Wait (without polling) until the global step reaches the target."""
        if self._started:
            return
        target = self._wait_until_step
        if run_context.global_step < target:
            if self._counter is None:
                raise RuntimeError(
                    "GlobalStepWaiterHook needs the step counter of the coordinator "
                    "(coord.step_counter) to wait; none was given in after_create_session"
                )
            logger.info(
                "Waiting for global step %d before starting training.", target,
                extra=fields(None, "GlobalStepWaiterHook", "before_run"),
            )
            await self._wait(target, run_context.global_step)
        self._started = True

    async def _wait(self, target: int, current: int) -> None:
        while current < target:
            milestone = min(target, current + _LOG_EVERY)
            current = await self._counter.wait_for(milestone)
            if current < target:
                logger.info(
                    "Waiting for global step %d before starting training. Current step is %d.",
                    target,
                    current,
                )
