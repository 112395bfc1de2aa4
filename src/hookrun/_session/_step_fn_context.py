"""``StepContext``: what ``run_step_fn`` gives its step function."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._hook_protocol import RunMetadata, RunOptions, check_feed_dict
from ._state import State, refuse_step

if TYPE_CHECKING:
    from ._monitored import _MonitoredSessionBase

__all__ = ["StepContext"]


class StepContext:
    """What ``run_step_fn`` gives the step function: the raw ``session`` (runs on it
    bypass hooks), ``run_with_hooks(...)`` (a full hooked run) and ``request_stop()``."""

    __slots__ = ("_owner", "_serial", "session")

    def __init__(self, owner: _MonitoredSessionBase, session: Any, serial: bool = False) -> None:
        self._owner = owner
        self.session = session
        #: One lane (``serial``): the context's hooked runs are the session's steps, one at a
        #: time, admitted as ``run()`` is (the lanes' owner admits each of them itself).
        self._serial = serial

    async def run_with_hooks(
        self,
        fetches: object = None,
        feed_dict: Mapping[Any, Any] | None = None,
        options: RunOptions | None = None,
        run_metadata: RunMetadata | None = None,
    ) -> Any:
        """One step with every hook, on the current session (no recovery of its own)."""
        if feed_dict is not None and type(feed_dict) is not dict:
            check_feed_dict(feed_dict, "the caller")
        owner = self._owner
        if not self._serial:
            return await owner._step(fetches, feed_dict, options, run_metadata)
        if owner._state is not State.OPEN:  # a stop was requested, or a close came
            refuse_step(owner, owner._state, "run_with_hooks()")
        lane = owner._lane
        if lane.hooked_run:
            raise RuntimeError(
                f"{type(owner).__name__}.run_with_hooks() called while another run_with_hooks() of this "
                "step function is in progress (from another task); with max_in_flight=1 a monitored "
                "session runs one step at a time"
            )
        lane.hooked_run = True
        try:
            return await owner._step(fetches, feed_dict, options, run_metadata)
        finally:
            lane.hooked_run = False

    def request_stop(self) -> None:
        """Stop after this step function: ``should_stop()`` becomes True."""
        self._owner._set_hook_stop()
