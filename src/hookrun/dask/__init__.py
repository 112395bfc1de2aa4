"""hookrun on Dask: remote step sessions, actor sessions and a shared global step.

Install with ``pip install 'hookrun[dask]'``; ``import hookrun`` never imports Dask.
Dask's asynchronous client runs on asyncio only, so the adapters drive a synchronous
``distributed.Client`` (which has its own IO thread) through the engine-free bridge:
they work on asyncio and trio alike.

* ``DaskStepSession``: each step is one task ``fn(feed_dict)`` (``pure=False``).
* ``DaskActorSessionCreator``: one actor per session, called like ``method(fetches, feed_dict)``,
  each running its calls on a thread of its own (N lanes run N calls at once).
* ``DaskStepCounter``: a ``StepCounter`` shared across clients, held by the scheduler
  (no worker's loss touches it), waiting without polling.
* ``RECOVERABLE_ERRORS`` / ``is_recoverable`` / ``DaskActorLostError``: lost actors,
  closed comms and a lost scheduler connection; the adapters raise them as
  ``hookrun.UnavailableError`` (Dask's error chained). User errors propagate as they are.
"""

from __future__ import annotations

from .._public import publish
from . import _require  # noqa: F401 - before the engine modules: without the engine, names the extra
from ._actor import DaskActorSession, DaskActorSessionCreator
from ._counter import DaskStepCounter
from ._errors import RECOVERABLE_ERRORS, DaskActorLostError, is_recoverable
from ._step import DaskStepSession

__all__ = [
    "RECOVERABLE_ERRORS",
    "DaskActorLostError",
    "DaskActorSession",
    "DaskActorSessionCreator",
    "DaskStepCounter",
    "DaskStepSession",
    "is_recoverable",
]

publish(__name__, globals(), __all__)
