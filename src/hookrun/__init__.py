"""hookrun: an async, event-driven hook runtime.

TensorFlow's ``MonitoredSession`` / ``SessionRunHook`` / ``Coordinator``
lifecycle, rebuilt for structured concurrency on anyio: the same code runs on
asyncio and trio.
"""

from __future__ import annotations

from ._compose import in_thread, sequential
from ._coordinator import Coordinator
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
from ._hooks import (
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    TimingRecord,
)
from ._recovery import RetryPolicy
from ._session import MonitoredSession, SingularMonitoredSession, StepContext
from ._sessions import Session, SessionCreator, StepSession, fetch
from ._step import LocalStepCounter, StepCounter

__version__ = "0.1.0"

__all__ = [
    "AbortedError",
    "Coordinator",
    "DeadlineExceededError",
    "FeedConflictError",
    "HookTimeoutError",
    "HookrunError",
    "LocalStepCounter",
    "MonitoredSession",
    "OutOfRangeError",
    "RetryPolicy",
    "RunAfterStopError",
    "RunMetadata",
    "RunOptions",
    "Session",
    "SessionClosedError",
    "SessionCreator",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "SingularMonitoredSession",
    "StepContext",
    "StepCounter",
    "StepSession",
    "TimingRecord",
    "UnavailableError",
    "fetch",
    "in_thread",
    "sequential",
]
