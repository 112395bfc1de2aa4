"""``FinalOpsHook``: fetch values from the session once, when the monitored session ends."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from .._errors import CLEAN_STOP_TYPES
from .._hook_protocol import SessionRunHook
from .._session._raw import fetch
from ._common import fields, logger

__all__ = ["FinalOpsHook"]

_INPUT_WARNING = (
    "An end-of-input exception (%s) was raised while FinalOpsHook fetched its final ops. "
    "This typically means the final ops have a dependency back to some input source, "
    "which should not happen: final values should read state only, not another batch "
    "from the input. Please fix that."
)


class FinalOpsHook(SessionRunHook):
    """At ``end``, fetches ``final_ops`` (any nested fetch structure) with ``final_ops_feed_dict``.

    The values are stored in :attr:`final_ops_values` (``None`` before).
    An end-of-input exception there (``OutOfRangeError``, ``StopAsyncIteration``,
    ``anyio.EndOfStream``) is logged with a warning and re-raised, as in TensorFlow.

    Args:
        final_ops: The fetches run at ``end``: a key, or a nested structure of keys.
        final_ops_feed_dict: The feeds of that run. ``None``: none.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self, final_ops: object, final_ops_feed_dict: Mapping[Hashable, object] | None = None
    ) -> None:
        if final_ops_feed_dict is not None and not isinstance(final_ops_feed_dict, Mapping):
            raise TypeError(
                "FinalOpsHook: final_ops_feed_dict must be a mapping, "
                f"got {type(final_ops_feed_dict).__name__}"
            )
        self._final_ops = final_ops
        self._feed_dict = final_ops_feed_dict
        self._values: Any = None

    def __repr__(self) -> str:
        return f"FinalOpsHook({self._final_ops!r})"

    @property
    def final_ops_values(self) -> Any:
        """The fetched final values, packed like ``final_ops`` (``None`` until ``end``)."""
        return self._values

    async def end(self, session: Any) -> None:
        """Fetch the final ops on the raw session."""
        if self._final_ops is None:
            return
        try:
            self._values = await fetch(session, self._final_ops, self._feed_dict)
        except CLEAN_STOP_TYPES as exc:
            logger.warning(_INPUT_WARNING, type(exc).__name__, extra=fields(None, "FinalOpsHook", "end"))
            raise
