"""``FeedFnHook``: feed the values a sync or async function returns, every step."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook
from .._validate import check_callable
from ._common import call_maybe_async

__all__ = ["FeedFnHook"]


class FeedFnHook(SessionRunHook):
    """Calls ``feed_fn()`` before every step and feeds the mapping it returns.

    ``feed_fn`` takes no arguments and may be a plain or an ``async`` function
    (a plain one runs on the event loop, so it must not block). It must
    return a mapping of feed key → value; anything else is a ``TypeError``.

    Args:
        feed_fn: A function of no arguments (``async def`` or plain) returning the feeds of
            each step.
    """

    overlapping_steps = True

    def __init__(self, feed_fn: Callable[[], Any]) -> None:
        check_callable("FeedFnHook: feed_fn", feed_fn)
        self.feed_fn = feed_fn

    def __repr__(self) -> str:
        return f"FeedFnHook({getattr(self.feed_fn, '__qualname__', self.feed_fn)!r})"

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Ask the runtime to feed ``feed_fn()``'s mapping."""
        feeds = await call_maybe_async(self.feed_fn)
        if not isinstance(feeds, Mapping):
            raise TypeError(
                f"FeedFnHook: feed_fn must return a mapping of feeds, got {type(feeds).__name__}"
            )
        feed_dict: Mapping[Hashable, object] = feeds
        return SessionRunArgs(fetches=None, feed_dict=feed_dict)
