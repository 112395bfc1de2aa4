"""The whole exception tree of hookrun.

::

    HookrunError(Exception)
    ├── OutOfRangeError                       clean stop: input exhausted
    ├── AbortedError, UnavailableError        recoverable: re-create the session
    ├── DeadlineExceededError(TimeoutError)   RunOptions.timeout expired
    ├── HookTimeoutError(TimeoutError)        a hook call exceeded hook_timeout
    ├── FeedConflictError(RuntimeError)       a key fed twice
    ├── RunAfterStopError(RuntimeError)       run() after a hook requested stop
    ├── SessionClosedError(RuntimeError)      used after close / outside async with
    ├── NanLossDuringTrainingError(RuntimeError)  NanTensorHook saw a NaN loss
    │                                             (defined in hookrun.hooks)
    └── CorruptCheckpointError(ValueError)    a checkpoint file failed its checks

Each error is built from a message; the ones that name a culprit also carry it
as attributes so code can react without parsing the message.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import anyio

__all__ = [
    "CLEAN_STOP_TYPES",
    "RECOVERABLE_TYPES",
    "AbortedError",
    "DeadlineExceededError",
    "FeedConflictError",
    "HookTimeoutError",
    "HookrunError",
    "OutOfRangeError",
    "RunAfterStopError",
    "SessionClosedError",
    "UnavailableError",
]


class HookrunError(Exception):
    """Base class of every error hookrun raises on its own account."""


class OutOfRangeError(HookrunError):
    """The input is exhausted: a clean way to end a monitored session."""


class AbortedError(HookrunError):
    """The session was aborted (for example preempted); recovery re-creates it."""


class UnavailableError(HookrunError):
    """The session's backend is unavailable (for example a lost worker); recoverable."""


class DeadlineExceededError(HookrunError, TimeoutError):
    """The session's ``run`` took longer than ``RunOptions.timeout``."""


class HookTimeoutError(HookrunError, TimeoutError):
    """A hook call took longer than the monitored session's ``hook_timeout``.

    Attributes: ``hook`` (the hook object), ``phase`` (method name), ``limit``
    (seconds).
    """

    def __init__(
        self, message: str, *, hook: object = None, phase: str = "", limit: float = 0.0
    ) -> None:
        super().__init__(message)
        self.hook = hook
        self.phase = phase
        self.limit = limit


class FeedConflictError(HookrunError, RuntimeError):
    """A feed key was given by two parties (two hooks, or a hook and the caller).

    Attributes: ``parties`` (the names of the parties involved) and ``keys``
    (the conflicting keys, in the order they were found).
    """

    def __init__(
        self,
        message: str,
        *,
        parties: Sequence[str] = (),
        keys: Sequence[Hashable] = (),
    ) -> None:
        super().__init__(message)
        self.parties = tuple(parties)
        self.keys = tuple(keys)


class RunAfterStopError(HookrunError, RuntimeError):
    """``run()`` was called after a hook (or a step function) requested stop."""


class SessionClosedError(HookrunError, RuntimeError):
    """A monitored session was used after it closed or outside ``async with``."""


#: Exceptions that end a monitored session cleanly (``end`` runs, nothing propagates).
CLEAN_STOP_TYPES: tuple[type[BaseException], ...] = (
    OutOfRangeError,
    StopAsyncIteration,
    anyio.EndOfStream,
)

#: Exceptions that make a ``MonitoredSession`` re-create its session.
RECOVERABLE_TYPES: tuple[type[BaseException], ...] = (AbortedError, UnavailableError)
