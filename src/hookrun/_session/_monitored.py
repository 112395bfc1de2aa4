"""``MonitoredSession`` and ``SingularMonitoredSession``: the public classes, on
``_MonitoredSessionBase`` (``_base.py``: the constructor, the accessors and every entry
point, each a method of the class's own).

A monitored session inherits no part: it composes them, each an object it holds or
functions that take it.

* ``LaneSessions`` (``_lane_sessions.py``, ``_setup.sessions``): its lanes, each owning
  one raw session from creation to close, and its one coordinator, at every
  ``max_in_flight``; ``_lane`` is the first lane, the one of a step at a time.
* ``Recovery`` (``_recovering.py``, ``_setup.recovery``): whether an error re-creates a
  session, the recoverable error the coordinator holds, and the one lane's retry loop;
  the steps in flight ask it the same questions.
* ``Turns`` (``_turns.py``, ``_turns``): with one lane, the callers from other tasks
  waiting for the step in progress, in arrival order.
* ``InFlight`` (``_in_flight*.py``, ``_in_flight``): with ``max_in_flight > 1``, the
  engine the entry points go to.
* the one-lane step bodies (``_stepping.py``): functions taking the session; the
  constructor picks one into ``_step``, and ``run`` steps plain hook calls itself
  (``_run.py`` says why).
* entering and closing (``_lifecycle.py``): functions taking the session, called from its
  ``__aenter__``, ``__aexit__`` and ``aclose``; they keep ``Lifetime`` (``_lifetime``).

The states (NEW, ENTERING, OPEN, STOPPED, CLOSED), what each allows and which changes
exist are tabled in ``_state.py``, whose ``move`` makes every change; ``_lifecycle.py``
makes them all but a hook's stop request, OPEN → STOPPED (``_set_hook_stop``). What a
session carries is declared once, in ``_state.py`` (``SessionAttributes``).

Orthogonal to the state: ``_busy`` (a step is running; with one lane, a caller from another
task, or a clean close, waits for it in ``Turns``; with steps in flight a clean close
waits on ``_lifetime.step_done``). ``_admit`` is the one check of ``run``, ``iterate`` and
``run_step_fn``.

Invariants: begin runs once; every created session and coordinator is closed
exactly once; after_run runs only after a successful session run; a hook stop
request is sticky at once; the session task group outlives every task it holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._base import _MonitoredSessionBase
from ._step_fn_context import StepContext

if TYPE_CHECKING:
    from .._global_step import StepCounter
    from .._observe._statistics import StatisticsOptions
    from ._raw import SessionCreatorLike
    from ._retry import RetryPolicy

__all__ = ["MonitoredSession", "SingularMonitoredSession", "StepContext"]


class MonitoredSession(_MonitoredSessionBase):
    """Drives a session step by step with hooks, a coordinator and recovery.

    A creator or hook with ``bind_session(hooks, step_counter)`` (a
    ``ChiefSessionCreator``, a ``CheckpointSaverHook``) is told this session's hooks and
    step counter here. Errors of the recoverable types re-create the session and re-run
    the whole call, following ``retry``. With ``max_in_flight=N > 1`` every hook must
    declare ``overlapping_steps = True`` (see "Steps in flight" in the docs).

    Args:
        session_creator: Makes each raw session: at entry, on every recovery, once per lane.
        hooks: The hooks, their results merged in this order (``SessionRunHook``s or alike).
        stop_grace_period: Seconds the coordinator's tasks get to finish when the session closes.
        retry: How recovery waits and gives up. ``None``: ``RetryPolicy()``, retrying for ever.
        recoverable: More types of a lost session, besides ``AbortedError``, ``UnavailableError``.
        retry_on: Errors of the session's run (a transient one, an HTTP 503 say) retried on
            the same session, following ``retry``: no new session, and the hooks see the
            step once.
        step_counter: The global step counter. ``None``: a new ``LocalStepCounter`` at 0.
        hook_timeout: Seconds an async hook call may take, then ``HookTimeoutError``.
        statistics: Keep statistics (``True``), none (``False``), or as ``StatisticsOptions`` say.
        max_in_flight: How many steps may run at once, each on a lane of its own.
    """

    _RECOVERS = True

    def __init__(
        self,
        session_creator: SessionCreatorLike,
        hooks: Iterable[object] | None = (),
        *,
        stop_grace_period: float = 120.0,
        retry: RetryPolicy | None = None,
        recoverable: Iterable[type[BaseException]] = (),
        retry_on: Iterable[type[BaseException]] = (),
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
        statistics: bool | StatisticsOptions = True,
        max_in_flight: int = 1,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            stop_grace_period=stop_grace_period,
            step_counter=step_counter,
            hook_timeout=hook_timeout,
            retry=retry,
            recoverable=recoverable,
            retry_on=retry_on,
            statistics=statistics,
            max_in_flight=max_in_flight,
        )

    async def __aenter__(self) -> MonitoredSession:
        await super().__aenter__()
        return self


class SingularMonitoredSession(_MonitoredSessionBase):
    """A monitored session that never recovers: every error propagates.

    Args:
        session_creator: Makes each raw session: at entry, and once per lane.
        hooks: The hooks, their results merged in this order (``SessionRunHook``s or alike).
        stop_grace_period: Seconds the coordinator's tasks get to finish when the session closes.
        step_counter: The global step counter. ``None``: a new ``LocalStepCounter`` at 0.
        hook_timeout: Seconds an async hook call may take, then ``HookTimeoutError``.
        statistics: Keep statistics (``True``), none (``False``), or as ``StatisticsOptions`` say.
        max_in_flight: How many steps may run at once, each on a lane of its own.
    """

    def __init__(
        self,
        session_creator: SessionCreatorLike,
        hooks: Iterable[object] | None = (),
        *,
        stop_grace_period: float = 120.0,
        step_counter: StepCounter | None = None,
        hook_timeout: float | None = None,
        statistics: bool | StatisticsOptions = True,
        max_in_flight: int = 1,
    ) -> None:
        super().__init__(
            session_creator,
            hooks,
            stop_grace_period=stop_grace_period,
            step_counter=step_counter,
            hook_timeout=hook_timeout,
            statistics=statistics,
            max_in_flight=max_in_flight,
        )

    async def __aenter__(self) -> SingularMonitoredSession:
        await super().__aenter__()
        return self
