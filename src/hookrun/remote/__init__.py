"""Remote work, engine-free: await an engine's future from anyio code, on asyncio and trio.

The public name is ``await_future`` (with ``FutureLike``, what it accepts). The private
modules beside it hold the logic that the Ray and Dask adapters (``hookrun.ray``,
``hookrun.dask``) share, so that each adapter only speaks its engine:

* ``_future``: ``await_future``, the one bridge from an engine's future to anyio;
* ``_waiting``: a task parked until remote work is done, woken from any thread in
  batches (one hand-off to the event loop for the calls done together), and the
  calls waiting on one place (a node, a worker), to end together;
* ``_shared_step``: the shared step counter's actor (its value, the waiters parked on
  it, waking them in order of their target, withdrawing one);
* ``_counter``: the client of a shared counter (validation, joining the actor once,
  forgetting a lost one, ``recent()`` and its staleness);
* ``_actor_session``: a session backed by one actor, and the creator making them;
* ``_lost``: the ``UnavailableError`` that reports an engine's "it is gone" error;
* ``_closeable``: ``async with`` for objects closed by ``aclose()``.

This package imports anyio and hookrun's own core (errors, hooks, the step), never
an engine: ``import hookrun.remote`` leaves Ray and Dask unimported.
"""

from __future__ import annotations

from .._public import publish
from ._future import FutureLike, await_future

__all__ = ["FutureLike", "await_future"]

publish(__name__, globals(), __all__)
