"""Creating the session and recovering from a failed one: ``Recovering``, a mixin of the
session (``_monitored.py``; the attributes it reads are declared below, set by the
constructor). How often and how patiently to retry is ``RetryPolicy`` (``_retry.py``).

``_create`` makes a raw session and its coordinator and runs every hook's
``after_create_session``; a ``MonitoredSession`` retries its recoverable errors per the
retry budget. When a step fails with a recoverable error (its own, or one a background
task recorded in the coordinator), ``_fail_over`` moves OPEN → RECOVERING at once, before
anything is awaited; ``_recover`` closes the failed session and its coordinator (no
``end``: RECOVERING → BROKEN) and creates new ones (BROKEN → OPEN, the only way back).
``_with_recovery`` runs a whole call (a step, a step function) until it succeeds,
recovering before each attempt that needs it, or until the policy gives up.

Invariants: a recovery that is interrupted (cancelled) leaves RECOVERING or BROKEN, so
the next call resumes it; a session created after another task closed the monitored
session is closed at once (``SessionClosedError``), never left open, and a close cuts a
wait to retry short (``SessionClosedError``, from the error it waited after);
``_broken`` holds why there is no session; the time spent recovering and waiting to
retry is counted in the statistics.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from .._coordinator._tasks import Coordinator, open_hosted
from .._errors import SessionClosedError
from .._log import log_warning
from ._checks import check_session
from ._lifecycle import _aclose_logged
from ._state import State, move

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .._dispatch._dispatcher import Dispatcher
    from .._dispatch._plan import PhasePlan
    from .._global_step import StepCounter
    from .._observe._statistics import Collector
    from ._retry import RetryBudget, RetryPolicy

__all__ = ["Recovering"]


T = TypeVar("T")


class Recovering:
    """Creation and recovery of a monitored session (a mixin: the attributes below are its)."""

    _recovers: bool
    _create_session: Callable[[], Awaitable[Any]]
    _counter: StepCounter
    _retry: RetryPolicy
    _recoverable: tuple[type[BaseException], ...]
    _state: State
    _tg: TaskGroup | None
    _dispatcher: Dispatcher
    _after_create: PhasePlan
    _stats: Collector
    _raw: Any
    _coord: Coordinator | None
    _broken: BaseException | None
    #: The scope of a wait to retry under way (set only while waiting): a close cancels it.
    _backoff: anyio.CancelScope | None

    _close_current: Callable[..., Coroutine[Any, Any, list[BaseException]]]  # Lifecycle's (_lifecycle.py)
    _step_now: Callable[[], int | None]  # the session's (_monitored.py)

    async def _create(self, budget: RetryBudget) -> None:
        """Create a session and its coordinator, retrying recoverable errors per ``budget``."""
        while True:
            try:
                await self._create_once()
                return
            except Exception as exc:
                if not (self._recovers and self._is_recoverable(exc)):
                    raise
                if not await self._wait_to_retry(budget, exc, "creating the session failed; retrying"):
                    raise

    async def _wait_to_retry(
        self, budget: RetryBudget, cause: BaseException, action: str, *, recovery: bool = False
    ) -> bool:
        """``budget.wait_to_retry``, its time counted in the statistics (with ``recovery``,
        a wait before ``_recover``, as recovery time too; waits inside it are already)."""
        stats = self._stats
        started = stats.now()
        try:
            with anyio.CancelScope() as self._backoff:  # a close from another task cuts it short
                return await budget.wait_to_retry(cause, action=action, step=self._step_now())
        finally:
            self._backoff = None
            waited = stats.now() - started
            stats.retry_wait_seconds += waited
            if recovery:
                stats.recovery_seconds += waited
        raise SessionClosedError(f"{type(self).__name__} was closed while it waited to retry") from cause

    async def _create_once(self) -> None:
        raw = await self._create_session()
        try:
            check_session(raw)
            # Default clean-stop types: a background task ending its input with
            # OutOfRangeError / StopAsyncIteration / EndOfStream ends the session cleanly.
            coord = Coordinator(step_counter=self._counter)
            assert self._tg is not None
            await open_hosted(coord, self._tg)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _aclose_logged(raw)
            raise
        self._raw, self._coord = raw, coord
        try:
            await self._dispatcher.run(self._after_create, [(raw, coord)] * len(self._after_create.calls))
        except BaseException:
            await self._close_current(raise_errors=False)
            raise
        self._stats.sessions_created += 1

    def _fail_over(self) -> None:
        """The current session failed with a recoverable error: replace it before the next step."""
        if self._state is State.OPEN:
            self._state = move(self._state, State.RECOVERING)

    async def _recover(self, budget: RetryBudget) -> None:
        """The one way from RECOVERING or BROKEN back to OPEN: close the failed session and
        its coordinator (no ``end``), create new ones (``after_create_session`` again)."""
        stats = self._stats
        started = stats.now()
        try:
            await self._replace_session(budget)
        finally:
            stats.recovery_seconds += stats.now() - started
        stats.recoveries += 1

    async def _replace_session(self, budget: RetryBudget) -> None:
        if self._state is State.CLOSED:  # closed by another task while the step waited to retry
            raise SessionClosedError(f"{type(self).__name__} was closed before it re-created its session")
        if self._state is State.RECOVERING:
            self._state = move(self._state, State.BROKEN)
            coord_error = self._coord.exception if self._coord is not None else None
            for exc in await self._close_current(raise_errors=True, log_session_errors=True):
                if self._is_recoverable(exc):  # the coordinator's own (or the cause itself)
                    if exc is not coord_error:
                        log_warning("error while closing a failed session: %r", exc, step=self._step_now())
                    continue
                self._broken = exc
                raise exc
        try:
            await self._create(budget)
        except BaseException as exc:
            self._broken = exc
            raise
        if self._state is State.CLOSED:  # closed by another task while the session was created
            await self._close_current(raise_errors=False)
            raise SessionClosedError(f"{type(self).__name__} was closed while it re-created its session")
        self._broken = None
        self._state = move(self._state, State.OPEN)

    def _is_recoverable(self, exc: BaseException) -> bool:
        return isinstance(exc, self._recoverable)

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
        return self._state is not State.OPEN or self._held_recoverable() is not None

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
                    raise SessionClosedError(
                        f"{type(self).__name__} was closed while its step failed; the session is not re-created"
                    ) from failed
                self._fail_over()
                budget = budget or self._retry.budget()
                if not await self._wait_to_retry(budget, cause, "recovering: re-creating the session", recovery=True):
                    raise cause from (failed if cause is not failed else None)
                failed = None
            try:
                if self._needs_recovery():
                    held = self._held_recoverable()
                    if held is not None and self._state is State.OPEN:
                        raise held  # recorded by a background task: recover from it, per the policy
                    budget = budget or self._retry.budget()
                    await self._recover(budget)
                return await attempt(*args)
            except Exception as exc:
                failed = exc

