"""Recovering a monitored session's one lane: ``Recovering``, a mixin of the session
(``_monitored.py``; the attributes it reads are declared in ``_state.py``). How often
and how patiently to retry is ``RetryPolicy`` (``_retry.py``); the lane's raw session
is created, replaced and closed by ``LaneSessions`` (``_lane_sessions.py``), at every
``max_in_flight``.

When a step fails with a recoverable error (its own, or one a background task recorded
in the coordinator), ``_fail_over`` marks the lane for renewal at once, before anything is
awaited; ``_recover`` waits as the retry policy says, closes the failed session (no
``end``) and creates a new one (``after_create_session`` again, with the same
coordinator). ``_with_recovery`` runs a whole call (a step, a step function) until it
succeeds, recovering before each attempt that needs it, or until the policy gives up.

Invariants: a recovery that is interrupted (cancelled) leaves the lane marked for
renewal, so the next call resumes it; a recoverable error the coordinator holds is
taken (cleared) by the recovery made for it; the lane's ``broken`` holds why it has no
session; the time spent recovering and waiting to retry is counted in the statistics.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._errors import SessionClosedError
from ._state import ALLOWS, OPENED, SessionAttributes, State

if TYPE_CHECKING:
    from ._retry import RetryBudget

__all__ = ["Recovering"]


T = TypeVar("T")


class Recovering(SessionAttributes):
    """Recovery of a monitored session's lane (a mixin of it)."""

    def _fail_over(self) -> None:
        """The lane's session failed with a recoverable error: replace it before the next step."""
        if self._state in OPENED:  # open (a stop requested or not)
            self._lane.renew = True

    async def _recover(self, budget: RetryBudget, cause: BaseException | None) -> bool:
        """Replace the lane's session: wait as ``budget`` says after ``cause`` (none: an
        interrupted recovery resumed, at once), then close it and create a new one. False
        when the policy gives up."""
        if "recover" not in ALLOWS[self._state]:  # closed by another task while the step waited to retry
            raise SessionClosedError(f"{type(self).__name__} was closed before it re-created its session")
        held = self._held_recoverable()
        if held is not None:  # recovered from now: the coordinator forgets it
            self._coord.clear_stop()  # type: ignore[union-attr]  # it holds an error: it exists
        return await self._setup.sessions.recover(self._lane, cause or held, budget, waited=cause is None)

    def _is_recoverable(self, exc: BaseException) -> bool:
        return isinstance(exc, self._setup.recoverable)

    def _held_recoverable(self) -> BaseException | None:
        """A recoverable error a background task recorded in the coordinator, if any."""
        coord = self._coord
        if coord is None or not coord.should_stop():
            return None
        held = coord.exception
        return held if held is not None and self._is_recoverable(held) else None

    def _recoverable_cause(self, exc: BaseException) -> BaseException | None:
        """The error to recover from: the step's, or a recoverable one the coordinator holds."""
        return exc if self._is_recoverable(exc) else self._held_recoverable()

    def _needs_recovery(self) -> bool:
        return self._lane.renew or self._held_recoverable() is not None

    async def _with_recovery(
        self, attempt: Callable[..., Awaitable[T]], *args: Any, failed: BaseException | None = None
    ) -> T:
        """Run ``attempt`` until it succeeds, recovering first whenever the session failed,
        per the retry policy. ``failed`` is the error of an attempt already made."""
        budget: RetryBudget | None = None
        while True:
            if failed is not None:
                cause = self._recoverable_cause(failed)
                if cause is None:
                    raise failed
                if self._state is State.CLOSED:  # closed by another task while the step ran
                    raise self._setup.sessions.closed_when_failed(self._lane) from failed
                self._fail_over()
                budget = budget or self._setup.retry.budget()
                if not await self._recover(budget, cause):
                    raise cause from (failed if cause is not failed else None)
                failed = None
            try:
                if self._needs_recovery():
                    held = self._held_recoverable()
                    if held is not None and not self._lane.renew:
                        raise held  # recorded by a background task: recover from it, per the policy
                    budget = budget or self._setup.retry.budget()
                    await self._recover(budget, None)
                return await attempt(*args)
            except Exception as exc:
                failed = exc
