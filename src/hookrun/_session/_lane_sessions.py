"""The raw sessions of a monitored session's lanes: creating every lane's at entry,
re-creating one lane's after it failed (per the retry policy), and closing them all once.

Every monitored session has ``LaneSessions``, at every ``max_in_flight``: N lanes
(``_lanes.py``), each owning its raw session's whole life, one coordinator, and the
phase lock that keeps hook phases one at a time. The coordinator is opened with the
first lane's session and closed (first) with the monitored session, so the tasks hooks
start on it (a checkpoint being written, a poller) outlive any lane's recovery, which
re-creates that lane's raw session only. Every hook's ``after_create_session`` hears of
each raw session with that coordinator, under the phase lock. The first lane that has a
session lends it to the monitored session: ``raw_session()`` and the session ``end``
and ``on_exception`` receive.

Restoring creators: the first lane's session comes from ``create_session()`` (which may
restore the step counter and the hooks), and so does every re-creation of a single lane
(as TensorFlow's recovery restores them); with several lanes every other one, at entry
and on re-creation, from the creator's ``create_lane_session()`` when it has one
(``ChiefSessionCreator``: the raw session's own state only), so re-creating a lane never
rolls the shared step counter or the hooks back while the other lanes run ahead.

Invariants: every raw session and coordinator created is closed exactly once (a raw
session shared by several lanes, once); a session created after the monitored session
closed is closed at once; a close cuts every wait to retry short.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from .._coordinator._tasks import Coordinator, close_hosted, open_hosted
from .._dispatch._wake import Wakers
from .._errors import SessionClosedError
from .._log import log_warning
from ._checks import check_session
from ._factories import call_factory, creator_function
from ._lanes import Lane, PhaseLock
from ._state import State

if TYPE_CHECKING:
    from ._retry import RetryBudget

__all__ = ["Backoffs", "LaneSessions", "aclose_logged"]


class Backoffs:
    """The waits to retry under way on every lane; a close cancels them all at once."""

    __slots__ = ("scopes",)

    def __init__(self) -> None:
        self.scopes: set[anyio.CancelScope] = set()

    def cancel(self) -> None:
        for scope in self.scopes:
            scope.cancel()


class LaneSessions:
    """Creating, re-creating and closing the lanes' raw sessions (see the module docstring)."""

    def __init__(self, session: Any, creator: object, n: int) -> None:
        self.s = session
        self.lanes = [Lane(i) for i in range(n)]
        #: One hook phase at a time: ``after_create_session`` here, every step's phases.
        self.lock = PhaseLock(Wakers())
        #: The monitored session's one coordinator: opened with the first lane's session,
        #: closed with the session; a lane's recovery leaves it (and its tasks) running.
        self.coord: Coordinator | None = None
        more = getattr(creator, "create_lane_session", None)
        self._create_more: Callable[[], Awaitable[Any]] = (
            creator_function(more) if more is not None else session._setup.create_session
        )
        #: ``create_lane_session(lane)``, told which lane (a restoring creator restores that
        #: lane's own session state); ``None``: it takes no argument, or there is none.
        self._create_lane = more if more is not None and _takes_lane(more) else None
        self.backoffs = Backoffs()
        self._entering = False  # ``create_all`` (entering) is under way

    # -- creating --------------------------------------------------------------------------

    async def create_all(self, budget: RetryBudget) -> None:
        """Every lane's session at entry, one after another (lane 0 first)."""
        self._entering = True
        try:
            for lane in self.lanes:
                await self.create(lane, budget)
        finally:
            self._entering = False

    async def create(self, lane: Lane, budget: RetryBudget) -> None:
        """A session for ``lane``, retrying recoverable errors per ``budget``."""
        s = self.s
        while True:
            try:
                await self._create_once(lane)
                return
            except Exception as exc:
                if not s._setup.recovery.recovers_from(exc):
                    raise
                if not await self.wait_to_retry(budget, exc, f"creating the session{self._of(lane)} failed; retrying"):
                    raise

    async def _create_once(self, lane: Lane) -> None:
        s = self.s
        # One lane: every session is the whole session's (a restoring creator restores the
        # step counter and the hooks too, as TensorFlow's recovery does); several: only the first.
        if len(self.lanes) == 1 or (s._stats.sessions_created == 0 and lane.index == 0):
            raw = await s._setup.create_session()
        elif self._create_lane is not None:
            raw = await call_factory(functools.partial(self._create_lane, lane.index))
        else:
            raw = await self._create_more()
        try:
            check_session(raw)
            if s._state is State.CLOSED:  # closed by another task meanwhile: no hook sees it
                raise self._closed_while(lane)
            if self.coord is None:
                coord = Coordinator(step_counter=s._setup.counter)
                await open_hosted(coord, s._task_group())
                self.coord = coord
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._close_raw(raw, lane)
            raise
        coord = self.coord
        lane.raw = raw
        lane.renew = False
        self._publish()
        try:
            plan = s._setup.after_create
            if plan.calls:
                async with self.lock:
                    # A step's fatal error cancels a re-creation: its lock may be handed over
                    # just before, and no hook phase starts once the cancellation is known.
                    await anyio.lowlevel.checkpoint_if_cancelled()
                    if s._state is State.CLOSED:
                        raise self._closed_while(lane)
                    await s._dispatcher.run(plan, [(raw, coord)] * len(plan.calls))
        except BaseException:
            await self.close_lane(lane, log=True)
            raise
        s._stats.sessions_created += 1
        if s._state is State.CLOSED:  # closed by another task meanwhile: never left open
            await self.close_lane(lane, log=True)
            raise self._closed_while(lane)

    def _closed_while(self, lane: Lane) -> SessionClosedError:
        """The error of a session made for ``lane`` while another task closed the monitored one."""
        what = "was being entered" if self._entering else (
            "re-created its session" if len(self.lanes) == 1 else f"re-created the session of lane {lane.index}"
        )
        return SessionClosedError(f"{type(self.s).__name__} was closed while it {what}")

    def closed_when_failed(self, lane: Lane) -> SessionClosedError:
        """The error of a step whose session was lost after another task closed the monitored
        session: ``lane``'s session is not re-created (raise it from the loss)."""
        return SessionClosedError(
            f"{type(self.s).__name__} was closed while its step failed; the session{self._of(lane)} is not re-created"
        )

    # -- recovering ------------------------------------------------------------------------

    async def recover(
        self, lane: Lane, cause: BaseException | None, budget: RetryBudget, *, waited: bool = False
    ) -> bool:
        """Replace ``lane``'s failed session (no ``end``): wait the backoff after ``cause``
        (unless ``waited``), close it, create a new one. False when the retry policy gives
        up. An error creating it is kept as the lane's ``broken`` (it has no session)."""
        s = self.s
        stats = s._stats
        started = stats.now()
        try:
            action = f"recovering: re-creating the session{self._of(lane)}"
            if not waited and cause is not None and not await self.wait_to_retry(budget, cause, action):
                return False
            await self.close_lane(lane, log=True)
            if s._state is State.CLOSED:
                raise SessionClosedError(f"{type(s).__name__} was closed before it re-created a session") from cause
            try:
                await self.create(lane, budget)
            except BaseException as exc:
                lane.broken = exc
                if isinstance(exc, SessionClosedError) and exc.__cause__ is None:
                    exc.__cause__ = cause  # closed meanwhile: the loss it was re-created for
                raise
            lane.broken = None
        finally:
            stats.recovery_seconds += stats.now() - started
        stats.recoveries += 1
        return True

    def broken(self) -> BaseException | None:
        """Why the first lane without a session has none (re-creating it failed), if any."""
        return next((lane.broken for lane in self.lanes if lane.raw is None and lane.broken is not None), None)

    async def wait_to_retry(self, budget: RetryBudget, cause: BaseException, action: str) -> bool:
        """``budget.wait_to_retry``, timed for the statistics and cut short by a close."""
        s = self.s
        stats = s._stats
        started = stats.now()
        scope = anyio.CancelScope()
        self.backoffs.scopes.add(scope)
        try:
            with scope:
                return await budget.wait_to_retry(cause, action=action, step=s._step_now())
        finally:
            self.backoffs.scopes.discard(scope)
            stats.retry_wait_seconds += stats.now() - started
        raise SessionClosedError(f"{type(s).__name__} was closed while it waited to retry") from cause

    # -- closing ---------------------------------------------------------------------------

    async def close_lane(self, lane: Lane, *, log: bool) -> list[BaseException]:
        """Close ``lane``'s raw session (shielded, bounded by the grace period); its error is
        returned, or logged with ``log``."""
        s = self.s
        raw, lane.raw = lane.raw, None
        lane.renew = True  # no session: the next step on it creates one
        self._publish()
        shared = raw is not None and any(other.raw is raw for other in self.lanes)  # another lane's too
        failures = [] if raw is None or shared else await self._close_bounded(lane, raw)
        if log:
            for failure in failures:
                log_warning("error while closing the session%s (recovery goes on): %r", self._of(lane),
                            failure, exc_info=failure, step=s._step_now())
            return []
        return failures

    async def _close_bounded(self, lane: Lane, raw: object) -> list[BaseException]:
        """Close ``raw``, ``lane``'s session (shielded, bounded by the grace period): its error."""
        s = self.s
        failures: list[BaseException] = []
        with anyio.move_on_after(2 * s._setup.grace + 1.0, shield=True) as scope:
            try:
                await _aclose(raw)
            except Exception as exc:
                failures.append(exc)
        if scope.cancelled_caught:
            log_warning("closing the session%s took longer than stop_grace_period=%ss; gave up waiting",
                        self._of(lane), s._setup.grace, step=s._step_now())
        return failures

    async def close_all(self, *, raise_errors: bool, log_session_errors: bool = False) -> list[BaseException]:
        """Close the coordinator, then every lane's session once (as the monitored session
        closes, ``_lifecycle.py``)."""
        s = self.s
        failures: list[BaseException] = []
        coord, self.coord = self.coord, None
        if coord is not None:
            with anyio.move_on_after(2 * s._setup.grace + 1.0, shield=True) as scope:
                try:
                    await close_hosted(coord, s._setup.grace)
                except Exception as exc:
                    if not s._setup.recovery.left_held(exc):
                        failures.append(exc)
            if scope.cancelled_caught:
                log_warning("closing the coordinator took longer than stop_grace_period=%ss; gave up waiting",
                            s._setup.grace, step=s._step_now())
        # Every lane lets go of its session first, then each session is closed once (lanes
        # may share one), in lane order: linear in the number of lanes.
        closing: dict[int, tuple[Lane, object]] = {}
        for lane in self.lanes:
            raw, lane.raw = lane.raw, None
            lane.renew = True
            if raw is not None:
                closing.setdefault(id(raw), (lane, raw))
        self._publish()
        for lane, raw in closing.values():
            failures += await self._close_bounded(lane, raw)
        if not raise_errors:
            for failure in failures:
                log_warning("error while closing a session: %r", failure, exc_info=failure, step=self.s._step_now())
            return []
        return failures

    def _publish(self) -> None:
        """The monitored session's coordinator."""
        self.s._coord = self.coord

    async def _close_raw(self, raw: object, lane: Lane) -> None:
        if not any(other.raw is raw for other in self.lanes):
            await aclose_logged(raw)

    def _of(self, lane: Lane) -> str:
        """`` of lane i`` in messages, when there are several lanes."""
        return "" if len(self.lanes) == 1 else f" of lane {lane.index}"


def _takes_lane(method: Callable[..., object]) -> bool:
    """Whether ``create_lane_session`` takes the lane's index (a parameter besides ``self``)."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters.values())


async def _aclose(raw: object) -> None:
    # ``aclose()``, or a TensorFlow-style ``close()`` (a plain one in a worker thread).
    from ._closing import close_session  # on first use: keeps `import hookrun` light

    await close_session(raw)


async def aclose_logged(raw: object) -> None:
    """Close ``raw``, logging an error instead of raising it."""
    try:
        await _aclose(raw)
    except Exception as exc:
        log_warning("error while closing a session: %r", exc, exc_info=exc)
