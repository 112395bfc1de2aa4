"""hookrun on Ray: remote sessions, a shared global step, recovery from lost workers.

Install with ``pip install 'hookrun[ray]'``; ``import hookrun`` never imports Ray.

* ``RayActorSessionCreator``: one actor per session (restarts disabled, so a dead
  actor makes the monitored session re-create the session).
* ``RayStepSession``: each step is one Ray task returning a mapping.
* ``RayStepCounter``: a ``StepCounter`` shared by every worker, waiting without polling,
  on the node it names (the head node by default), never going back when its actor is lost.
* ``init_local``: start a single-machine Ray listening on 127.0.0.1 only (what the
  creators do when Ray is not initialised); ``LOOPBACK_ENV`` lets other processes of
  the machine join it. Neither is for a cluster of several nodes: join one with
  ``ray.init(address=...)`` and never set ``LOOPBACK_ENV`` in its processes.
* ``RECOVERABLE_ERRORS`` / ``is_recoverable``: the Ray errors of a lost actor, worker,
  node or object. The adapters already raise them as ``hookrun.UnavailableError``
  (Ray's error chained as the cause); user errors propagate as they are.
"""

from __future__ import annotations

from .._public import publish
from . import _require  # noqa: F401 - before the engine modules: without the engine, names the extra
from ._actor import RayActorSession, RayActorSessionCreator
from ._counter import RayStepCounter
from ._errors import RECOVERABLE_ERRORS, is_recoverable
from ._runtime import LOOPBACK_ENV, init_local
from ._step import RayStepSession

__all__ = [
    "LOOPBACK_ENV",
    "RECOVERABLE_ERRORS",
    "RayActorSession",
    "RayActorSessionCreator",
    "RayStepCounter",
    "RayStepSession",
    "init_local",
    "is_recoverable",
]

publish(__name__, globals(), __all__)
