"""hookrun on Ray: remote sessions, a shared global step, recovery from lost workers.

Install with ``pip install 'hookrun[ray]'``; ``import hookrun`` never imports Ray.

* ``RayActorSessionCreator``: one actor per session (restarts disabled, so a dead
  actor makes the monitored session re-create the session).
* ``RayStepSession``: each step is one Ray task returning a mapping.
* ``RayStepCounter``: a ``StepCounter`` shared by every worker, waiting without polling.
* ``RECOVERABLE_ERRORS`` / ``is_recoverable``: the Ray errors of a lost actor, worker,
  node or object. The adapters already raise them as ``hookrun.UnavailableError``
  (Ray's error chained as the cause); user errors propagate as they are.
"""

from __future__ import annotations

from ._actor import RayActorSession, RayActorSessionCreator
from ._counter import RayStepCounter
from ._errors import RECOVERABLE_ERRORS, is_recoverable
from ._step import RayStepSession

__all__ = [
    "RECOVERABLE_ERRORS",
    "RayActorSession",
    "RayActorSessionCreator",
    "RayStepCounter",
    "RayStepSession",
    "is_recoverable",
]
