"""hookrun: an async, event-driven hook runtime.

TensorFlow's ``MonitoredSession`` / ``SessionRunHook`` / ``Coordinator``
lifecycle, rebuilt for structured concurrency on anyio: the same code runs on
asyncio and trio.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._coordinator._tasks import Coordinator
from ._dispatch._compose import in_thread, sequential
from ._errors import (
    AbortedError,
    DeadlineExceededError,
    FeedConflictError,
    HookrunError,
    HookTimeoutError,
    OutOfRangeError,
    RunAfterStopError,
    SessionClosedError,
    UnavailableError,
)
from ._global_step import LocalStepCounter, StepCounter
from ._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    TimingRecord,
)
from ._observe._report import HookStatistics, Latency, SessionStatistics
from ._observe._statistics import StatisticsOptions
from ._public import LAZY as _LAZY
from ._public import OF_HOOKS as _OF_HOOKS
from ._public import publish
from ._public import publish_loaded as _publish_loaded
from ._session._borrowed import borrowed
from ._session._iterate import StepIterator
from ._session._monitored import MonitoredSession, SingularMonitoredSession, StepContext
from ._session._raw import (
    Session,
    SessionCreator,
    SessionCreatorLike,
    SessionFactory,
    StepSession,
    fetch,
)
from ._session._retry import RetryPolicy

if TYPE_CHECKING:
    from . import hooks
    from ._checkpoint._checkpointable import Checkpointable
    from ._checkpoint._checkpointer import Checkpointer, RestoredCheckpoint, latest_checkpoint
    from ._checkpoint._codec import Codec, MsgpackCodec, PickleCodec, UnsafeCodecWarning
    from ._checkpoint._file import CorruptCheckpointError
    from ._checkpoint._index import CheckpointCorruptionWarning, CheckpointInfo
    from ._timer import NeverTriggerTimer, SecondOrStepTimer
    from ._training._creators import ChiefSessionCreator, WorkerSessionCreator
    from ._training._monitored_training import MonitoredTrainingSession
    from .hooks import (
        Trigger,
        at_step,
        every,
        on_after_create_session,
        on_after_run,
        on_before_run,
        on_begin,
        on_end,
        when,
    )

# The built-in hooks (``hookrun.hooks``), function hooks, triggers, timers and
# checkpoints are re-exported here but imported on first use (the table is
# ``_public.LAZY``), so that `import hookrun` stays light: `hookrun.hooks.X` works
# right after `import hookrun`.


def __getattr__(name: str) -> object:
    if name == "hooks":
        return importlib.import_module(".hooks", __name__)  # binds hookrun.hooks too
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hookrun' has no attribute {name!r}")
    if name in _OF_HOOKS:
        importlib.import_module(".hooks", __name__)  # publishes it as hookrun.hooks.<name>
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    _publish_loaded()
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "hooks"})


__version__ = "0.1.0"

__all__ = [
    "AbortedError",
    "CheckpointCorruptionWarning",
    "CheckpointInfo",
    "Checkpointable",
    "Checkpointer",
    "ChiefSessionCreator",
    "Codec",
    "Coordinator",
    "CorruptCheckpointError",
    "DeadlineExceededError",
    "FeedConflictError",
    "HookStatistics",
    "HookTimeoutError",
    "HookrunError",
    "Latency",
    "LocalStepCounter",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "MsgpackCodec",
    "NeverTriggerTimer",
    "OutOfRangeError",
    "PickleCodec",
    "RestoredCheckpoint",
    "RetryPolicy",
    "RunAfterStopError",
    "RunMetadata",
    "RunOptions",
    "SecondOrStepTimer",
    "Session",
    "SessionClosedError",
    "SessionCreator",
    "SessionCreatorLike",
    "SessionFactory",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "SessionStatistics",
    "SingularMonitoredSession",
    "StatisticsOptions",
    "StepContext",
    "StepCounter",
    "StepIterator",
    "StepSession",
    "TimingRecord",
    "Trigger",
    "UnavailableError",
    "UnsafeCodecWarning",
    "WorkerSessionCreator",
    "at_step",
    "borrowed",
    "every",
    "fetch",
    "hooks",
    "in_thread",
    "latest_checkpoint",
    "on_after_create_session",
    "on_after_run",
    "on_before_run",
    "on_begin",
    "on_end",
    "sequential",
    "when",
]

publish(__name__, globals(), __all__)
