"""Closing a raw session, whichever way it closes.

A session may close the async way (``async def aclose()``, awaited) or the
TensorFlow way (a ``close()`` method: an ``async def`` one is awaited, a plain
one, which may block, runs in a worker thread). A session with neither needs no
closing. The monitored session calls :func:`close_session` for every session it
created, exactly once; :func:`check_closable` runs when a session is created,
so a session that could not be closed properly fails there, naming it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import anyio

from .._dispatch._plan import is_async_callable

__all__ = ["check_closable", "close_session"]


def check_closable(raw: object) -> None:
    """Refuse, at creation, a session whose ``aclose`` is not an async function."""
    aclose = getattr(raw, "aclose", None)
    if aclose is None:
        return
    if not callable(aclose) or not is_async_callable(aclose):
        kind = type(aclose).__name__ if not callable(aclose) else "plain function"
        raise TypeError(
            f"the session {type(raw).__name__} has an 'aclose' that is a {kind}, not "
            "'async def aclose()'; declare it async, or name a blocking close 'close()' "
            "(the monitored session runs a plain close() in a worker thread)"
        )


async def close_session(raw: object) -> None:
    """Close ``raw``: await ``aclose()``; else await an async ``close()`` or run a plain one
    in a worker thread; else do nothing. Errors propagate.

    A plain close in a worker thread is abandoned (left to finish on its own) if the
    caller is cancelled, so a bounded wait around this call stays bounded.
    """
    aclose = getattr(raw, "aclose", None)
    if aclose is not None:
        if is_async_callable(aclose):
            await aclose()
        else:  # refused at creation; still closed if it gets here (a failed creation)
            await _close_in_thread(aclose)
        return
    close = getattr(raw, "close", None)
    if close is None or not callable(close):
        return
    if is_async_callable(close):
        await close()
    else:
        await _close_in_thread(close)


async def _close_in_thread(close: Callable[[], object]) -> None:
    result = await anyio.to_thread.run_sync(close, abandon_on_cancel=True)
    if inspect.isawaitable(result):  # a plain function handing back an awaitable
        await result
