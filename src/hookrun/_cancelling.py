"""Whether the running task is being cancelled, whatever cancelled it.

An object let go of in a task that is being cancelled (an iterator dropped as the
cancellation leaves a loop body) must act on it where no ``await`` can be made: the check
reads the backend's state rather than waiting for a ``Cancelled`` that will not come.
"""

from __future__ import annotations

import sys

import anyio

__all__ = ["task_cancelled"]


def task_cancelled() -> bool:
    """Whether the running task is being cancelled: by an anyio (or trio) cancel scope,
    its deadline passed, or on asyncio by ``Task.cancel()`` or ``asyncio.timeout()``, which
    no cancel scope shows. False where no event loop runs (collected after it ended)."""
    try:
        if anyio.current_effective_deadline() <= anyio.current_time():
            return True
    except Exception:
        return False
    asyncio = sys.modules.get("asyncio")  # not imported: no asyncio task runs
    try:
        task = None if asyncio is None else asyncio.current_task()
    except RuntimeError:  # no asyncio event loop runs here
        return False
    return task is not None and task.cancelling() > 0
