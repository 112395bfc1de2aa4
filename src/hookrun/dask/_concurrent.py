"""Dask session actors that run their calls side by side, each on a thread of its own.

A Dask worker runs every synchronous actor method on one thread shared by all its
actors, so N session actors (lanes) on W workers would run at most W calls at once.
A coroutine method runs on the worker's event loop instead, side by side. So the
class a session actor is built from is a subclass made here on the worker, whose step
method is a coroutine that runs the user's synchronous step method on a thread owned
by that actor, the way Dask runs an actor method (the worker known to
``get_worker()``, the actor's thread state). Invariants: an actor's own calls still
run one at a time, in order (one thread per actor, like a Ray actor's process); a
class whose step method is already a coroutine is used as it is; the subclass has
the user's name and every other method and attribute of the user's class.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from distributed import get_worker
from distributed.worker import _run_actor

__all__ = ["concurrent_class", "construct"]

_made: dict[tuple[type, str], type] = {}


def construct(cls: type, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Build the session actor on the worker (keeps the actor's keywords apart from submit's)."""
    return concurrent_class(cls, method)(*args, **kwargs)


def concurrent_class(cls: type, method: str) -> type:
    """``cls``, or its subclass whose ``method`` runs on the actor's own thread."""
    step = getattr(cls, method)
    if inspect.iscoroutinefunction(step):
        return cls
    made = _made.get((cls, method))
    if made is None:
        namespace = {method: _on_own_thread(step, method), "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        made = _made[(cls, method)] = type(cls.__name__, (cls,), namespace)
    return made


def _on_own_thread(step: Callable[..., Any], method: str) -> Callable[..., Any]:
    @functools.wraps(step)
    async def on_own_thread(self: Any, *args: Any, **kwargs: Any) -> Any:
        thread = self.__dict__.get("_hookrun_thread")
        if thread is None:  # made on first call: the worker's loop is running
            thread = self.__dict__["_hookrun_thread"] = ThreadPoolExecutor(1, thread_name_prefix="hookrun-actor")
        worker = get_worker()
        run = functools.partial(
            _run_actor, functools.partial(step, self), args, kwargs, worker.execution_state,
            f"{type(self).__name__}.{method}", worker.active_threads, worker.active_threads_lock,
        )
        return await asyncio.get_running_loop().run_in_executor(thread, run)

    return on_own_thread
