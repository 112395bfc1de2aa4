"""Recovery, written once for every ``max_in_flight``: ``Recovery``, which a monitored
session holds (``_setup.recovery``). How often and how patiently to retry is
``RetryPolicy`` (``_retry.py``); a lane's raw session is created, replaced and closed by
``LaneSessions`` (``_lane_sessions.py``).

What it decides at every N: whether an error is of a recoverable type
(``is_recoverable``), whether it re-creates a session (``recovers_from``: only a
``MonitoredSession``'s; a ``SingularMonitoredSession`` propagates every error), and the
recoverable error a background task recorded in the coordinator (``held``), which the
next step recovers from (``pending``; ``should_stop`` is false meanwhile) and the recovery
made for it takes (``take_held``: the coordinator forgets it). The steps in flight
(``InFlight.ready``, ``InFlight.recovers_from``, their ``run_step_fn``) and the one lane
ask it.

With one lane it also runs the retry loop. When a step fails with a recoverable error
(its own, or one the coordinator holds), ``fail_over`` marks the lane for renewal at
once, before anything is awaited; ``recover`` waits as the retry policy says, closes the
failed session (no ``end``) and creates a new one (``after_create_session`` again, with
the same coordinator). ``with_recovery`` runs a whole call (a step, a step function)
until it succeeds, recovering before each attempt that needs it, or until the policy
gives up.

Invariants: a recovery that is interrupted (cancelled) leaves the lane marked for
renewal, so the next call resumes it; a recoverable error the coordinator holds is
taken (cleared) by the recovery made for it; the lane's ``broken`` holds why it has no
session; the time spent recovering and waiting to retry is counted in the statistics.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import SessionClosedError
from .._log import log_warning
from ._state import ALLOWS, OPENED, State

if TYPE_CHECKING:
    from ._base import _MonitoredSessionBase
    from ._lane_sessions import LaneSessions
    from ._lanes import Lane
    from ._retry import RetryBudget, RetryPolicy

__all__ = ["Recovery"]


T = TypeVar("T")


class Recovery:
    """The recovery of a monitored session's lanes (see the module docstring)."""

    __slots__ = ("recovers", "retry", "s", "sessions", "types")

    def __init__(
        self, session: _MonitoredSessionBase, sessions: LaneSessions, *, recovers: bool,
        types: tuple[type[BaseException], ...], retry: RetryPolicy,
    ) -> None:
        self.s = session
        #: The lanes, their raw sessions and the one coordinator.
        self.sessions = sessions
        #: Whether recoverable errors re-create the session (``MonitoredSession``) or propagate.
        self.recovers = recovers
        #: The errors of a lost session (``recoverable=`` and the built-in ones).
        self.types = types
        self.retry = retry

    # -- the rule, at every max_in_flight -----------------------------------------------------

    def is_recoverable(self, exc: BaseException) -> bool:
        """Whether ``exc`` is of a recoverable type (a lost session)."""
        return isinstance(exc, self.types)

    def recovers_from(self, exc: BaseException) -> bool:
        """Whether ``exc`` re-creates a session: a recoverable error, and a session that recovers."""
        return self.recovers and isinstance(exc, self.types)

    def held(self) -> BaseException | None:
        """A recoverable error a background task recorded in the coordinator, if any."""
        coord = self.sessions.coord
        if coord is None or not coord.should_stop():
            return None
        held = coord.exception
        return held if held is not None and isinstance(held, self.types) else None

    def pending(self) -> bool:
        """Whether the next step recovers first from an error the coordinator holds (its
        stop is not the session's: a ``MonitoredSession``'s next step re-creates a lane)."""
        return self.recovers and self.held() is not None

    def take_held(self) -> BaseException | None:
        """``held()``, taken by the recovery made for it: the coordinator forgets it (no other
        step recovers for it)."""
        held = self.held()
        if held is not None:
            self.sessions.coord.clear_stop()  # type: ignore[union-attr]  # it holds an error: it exists
        return held

    def left_held(self, exc: Exception) -> bool:
        """A recoverable error a background task recorded is still held as the session
        closes: a session that recovers would have re-created its session at the next
        step, and none comes, so the work is done; it is logged, not raised."""
        if not self.recovers_from(exc):
            return False
        log_warning(
            "closing with a recoverable error a background task recorded (the next run() would "
            "have recovered from it): %r", exc, exc_info=exc, step=self.s._step_now(),
        )
        return True

    # -- the one lane's retry loop ----------------------------------------------------------

    def cause_of(self, exc: BaseException) -> BaseException | None:
        """The error to recover from: the step's, or a recoverable one the coordinator holds."""
        return exc if isinstance(exc, self.types) else self.held()

    def fail_over(self, lane: Lane, failed_on: object = None) -> None:
        """``lane``'s session (``failed_on``, when the step knows which) failed with a
        recoverable error: whichever step takes the lane next replaces it first, also when
        this step's own recovery is given up or cancelled. A lane whose session another
        step replaced meanwhile is left alone."""
        if self.s._state in OPENED and (failed_on is None or lane.raw is failed_on):
            lane.renew = True

    async def recover(self, budget: RetryBudget, cause: BaseException | None) -> bool:
        """Replace the lane's session: wait as ``budget`` says after ``cause`` (none: an
        interrupted recovery resumed, at once), then close it and create a new one. False
        when the policy gives up."""
        s = self.s
        if "recover" not in ALLOWS[s._state]:  # closed by another task while the step waited to retry
            raise SessionClosedError(f"{type(s).__name__} was closed before it re-created its session")
        held = self.take_held()  # recovered from now
        return await self.sessions.recover(s._lane, cause or held, budget, waited=cause is None)

    async def with_recovery(
        self, attempt: Callable[..., Awaitable[T]], *args: Any, failed: BaseException | None = None
    ) -> T:
        """Run ``attempt(*args)`` until it succeeds, recovering first whenever the session
        failed, per the retry policy. ``failed`` is the error of an attempt already made."""
        s = self.s
        budget: RetryBudget | None = None
        while True:
            if failed is not None:
                cause = self.cause_of(failed)
                if cause is None:
                    raise failed
                if s._state is State.CLOSED:  # closed by another task while the step ran
                    raise self.sessions.closed_when_failed(s._lane) from failed
                self.fail_over(s._lane)
                budget = budget or self.retry.budget()
                if not await self.recover(budget, cause):
                    raise cause from (failed if cause is not failed else None)
                failed = None
            try:
                if s._lane.renew or self.held() is not None:
                    held = self.held()
                    if held is not None and not s._lane.renew:
                        raise held  # recorded by a background task: recover from it, per the policy
                    budget = budget or self.retry.budget()
                    await self.recover(budget, None)
                return await attempt(*args)
            except Exception as exc:
                failed = exc
