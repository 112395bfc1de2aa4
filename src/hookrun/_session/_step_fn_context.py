"""``StepContext``: what ``run_step_fn`` gives its step function."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._hook_protocol import RunMetadata, RunOptions, check_feed_dict

if TYPE_CHECKING:
    from ._base import _MonitoredSessionBase

__all__ = ["StepContext"]


class StepContext:
    """What ``run_step_fn`` gives the step function: the raw ``session`` (runs on it
    bypass hooks), ``run_with_hooks(...)`` (a full hooked run) and ``request_stop()``."""

    __slots__ = ("_owner", "session")

    def __init__(self, owner: _MonitoredSessionBase, session: Any) -> None:
        #: The session with one lane, or with lanes the lane's owner (``_in_flight_step_fn.py``):
        #: each admits a hooked run as its own rule says (``_run_with_hooks``).
        self._owner = owner
        self.session = session

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
        return await self._owner._run_with_hooks(fetches, feed_dict, options, run_metadata)

    def request_stop(self) -> None:
        """Stop after this step function: ``should_stop()`` becomes True."""
        self._owner._set_hook_stop()
