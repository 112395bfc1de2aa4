"""``Coordinator``: the background tasks of TensorFlow's ``tf.train.Coordinator``,
hosted in a task group of the coordinator's own, and the public API over its stop
flag and first-error slot (a ``StopSignal``, ``_signal.py``; the looping task of
``loop`` is ``_looper.py``).

Invariants:

* The recorded exception is the **first real** exception given to
  ``request_stop`` (clean-stop types count as none), even after a plain stop
  request; it is only replaced after ``clear_stop()``.
* Every background task runs in the coordinator's own task group; an
  ``Exception`` it raises becomes a stop request, never a task-group crash, and
  being cancelled is not an error. Nothing outlives the coordinator.
* Nothing polls: waiters park on an ``anyio.Event`` woken by every state change
  (a stop request or the last task finishing).
* Teardown (grace period, cancelling stragglers, waiting for them to unwind) runs
  shielded and bounded, so it works from inside a cancelled scope.
* A join or a close called from one of the coordinator's own tasks (or a task it
  started) waits for the others, never for that task: it would wait for itself. That
  task is neither a straggler nor cancelled by the close; it ends on its own, or when
  the task group hosting the coordinator ends.

The coordinator is not thread-safe: use it from tasks of one event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVarTuple

import anyio

if TYPE_CHECKING:
    from anyio.abc import TaskGroup, TaskStatus

from .._global_step import LocalStepCounter, StepCounter
from .._inside import forget_steps
from .._log import logger
from .._validate import check_number
from ._looper import run_loop
from ._signal import StopSignal, _StopOnException, clean_types

if TYPE_CHECKING:
    from .._timer import Clock

__all__ = ["Coordinator", "close_hosted", "open_hosted", "watch_stops"]


PosArgsT = TypeVarTuple("PosArgsT")

#: How long cancelled stragglers get to unwind before teardown gives up on them.
UNWIND_PERIOD = 5.0

#: The coordinator task the running code belongs to (its cancel scope), set in each
#: task's own context: inherited by the tasks it starts, seen by no other task.
_TASK: ContextVar[anyio.CancelScope | None] = ContextVar("hookrun_coordinator_task", default=None)


class Coordinator:
    """Coordinates the stop of a group of background tasks.

    Use as ``async with Coordinator() as coord:``. ``clean_stop_exception_types``
    (default: ``OutOfRangeError``, ``StopAsyncIteration`` and
    ``anyio.EndOfStream``, subclasses included) are exceptions that only
    request stop: a task ending its input with one is a clean end, not an
    error. Leaving the block requests
    stop, gives the tasks ``stop_grace_period`` seconds, cancels stragglers and
    raises the recorded exception, if any; else, if there were stragglers and
    the block exited normally, ``RuntimeError`` naming them. When the block
    raised, its exception propagates: a recorded exception is logged and added
    to it as a note, stragglers are only logged.

    Args:
        clean_stop_exception_types: Exception types that only request stop when a task ends
            with one. ``None``: ``OutOfRangeError``, ``StopAsyncIteration`` and
            ``anyio.EndOfStream``.
        step_counter: A global step counter handed to hooks as ``coord.step_counter``.
            ``None``: none.
        stop_grace_period: Seconds the tasks get to finish after the stop request when the
            block ends, before they are cancelled.
    """

    def __init__(
        self,
        *,
        clean_stop_exception_types: Iterable[type[BaseException]] | None = None,
        step_counter: StepCounter | None = None,
        stop_grace_period: float = 120.0,
    ) -> None:
        self._clean_types = clean_types(clean_stop_exception_types)
        if step_counter is not None and not isinstance(step_counter, StepCounter):
            raise TypeError(
                f"Coordinator(step_counter=...) must implement StepCounter, got {step_counter!r}"
            )
        self._step_counter: StepCounter = step_counter or LocalStepCounter()
        self._grace = _check_seconds("Coordinator(stop_grace_period=...)", stop_grace_period)
        self._signal = StopSignal()
        self._joined = False
        self._tasks: dict[anyio.CancelScope, str] = {}
        self._tg: TaskGroup | None = None
        self._host_exit: anyio.Event | None = None
        self._host_done: anyio.Event | None = None
        #: The task of ours a hosted close runs in (``_mine``), left to end on its own.
        self._closer: anyio.CancelScope | None = None

    def __repr__(self) -> str:
        state = "open" if self._tg is not None else "closed"
        return (
            f"<Coordinator {state} stop_requested={self._signal.stopped} joined={self._joined} "
            f"tasks={list(self._tasks.values())!r} exception={self._signal.exception!r}>"
        )

    @property
    def joined(self) -> bool:
        """True once ``join`` (or leaving ``async with``) has finished, every task ended (a
        ``join`` from one of the coordinator's own tasks leaves it False)."""
        return self._joined

    @property
    def exception(self) -> BaseException | None:
        """The recorded exception (the first real one given since ``clear_stop``), or None."""
        return self._signal.exception

    @property
    def step_counter(self) -> StepCounter:
        """The global step shared by the hooks of the monitored session."""
        return self._step_counter

    # -- stop requests ----------------------------------------------------------

    def request_stop(self, ex: BaseException | None = None) -> None:
        """Request stop, recording ``ex`` if it is the first real exception.

        After ``join``, a real ``ex`` is raised at once instead.
        """
        if ex is not None and not isinstance(ex, BaseException):
            raise TypeError(f"request_stop(ex=...) must be None or an exception, got {ex!r}")
        real = None if isinstance(ex, self._clean_types) else ex
        if real is not None and self._joined:
            raise real
        self._signal.record(real)

    def should_stop(self) -> bool:
        """True iff stop was requested."""
        return self._signal.stopped

    # ASYNC109: `timeout` is TensorFlow's parameter.
    async def wait_for_stop(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait up to ``timeout`` seconds (``None``: forever) for a stop request.

        Returns True iff stop was requested. Always a checkpoint.
        """
        if timeout is None:
            await self._signal.wait_until(self.should_stop)
            return True
        with anyio.move_on_after(max(timeout, 0.0)):
            await self._signal.wait_until(self.should_stop)
        return self._signal.stopped

    def stop_on_exception(self) -> _StopOnException:
        """A context manager (``with`` or ``async with``) that records an ``Exception``
        escaping its body as a stop request and suppresses it.

        ``BaseException`` s (cancellation, ``KeyboardInterrupt``) propagate.
        """
        return _StopOnException(self.request_stop)

    def raise_requested_exception(self) -> None:
        """Raise the recorded exception, with its original traceback, if any."""
        self._signal.raise_recorded()

    def clear_stop(self) -> None:
        """Forget the stop request, the recorded exception and ``joined``."""
        self._signal.clear()
        self._joined = False

    # -- background tasks -------------------------------------------------------

    def start_soon(
        self,
        fn: Callable[[*PosArgsT], Awaitable[object]],
        *args: *PosArgsT,
        name: str | None = None,
    ) -> None:
        """Run ``await fn(*args)`` in the coordinator's task group.

        An ``Exception`` it raises is recorded as a stop request. ``name``
        (default: the function's qualified name) identifies it as a straggler.
        """
        if not callable(fn):
            raise TypeError(f"start_soon() needs an async function, got {fn!r}")
        task_name = name if name is not None else _name_of(fn)
        if self._tg is None:
            raise RuntimeError(
                f"cannot start task {task_name!r}: the Coordinator is not open "
                "(use it inside `async with`)"
            )
        scope = anyio.CancelScope()
        self._tasks[scope] = task_name
        try:
            self._tg.start_soon(self._run_task, scope, fn, args, name=task_name)
        except BaseException:
            self._task_done(scope)
            raise

    def loop(
        self,
        interval: float | None,
        fn: Callable[[*PosArgsT], object],
        *args: *PosArgsT,
        name: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Start a task calling ``fn(*args)`` (sync or async) every ``interval`` seconds
        until stop; ``None`` or 0 means back to back.

        Calls happen at fixed boundaries (start, start + interval, ...), like
        TensorFlow's ``LooperThread``. An exception from ``fn`` is recorded and
        ends the loop. ``clock`` (default :func:`anyio.current_time`) measures
        the interval; a clock with an async ``sleep_until(deadline)`` (such as
        ``hookrun.testing.MockClock``) is waited on, never polled.
        """
        if interval is not None and (isinstance(interval, bool) or not interval >= 0):
            raise ValueError(
                f"loop(interval=...) must be None or a number of seconds >= 0, got {interval!r}"
            )
        if not callable(fn):
            raise TypeError(f"loop() needs a callable, got {fn!r}")
        if clock is not None and not callable(clock):
            raise TypeError(f"loop(clock=...) must be a callable returning seconds, got {clock!r}")
        task_name = name if name is not None else _name_of(fn)
        self.start_soon(run_loop, self, interval or 0.0, fn, args, clock, name=task_name)

    async def _run_task(
        self,
        scope: anyio.CancelScope,
        fn: Callable[..., Awaitable[object]],
        args: tuple[object, ...],
    ) -> None:
        forget_steps()  # started from a hook maybe, it runs beside the steps, not inside one
        _TASK.set(scope)  # this task's own context: a join or close from it does not wait for it
        try:
            with scope:
                await fn(*args)
        except Exception as exc:  # recorded even after join: it must not crash the group
            self._signal.record(None if isinstance(exc, self._clean_types) else exc)
        finally:
            self._task_done(scope)

    def _task_done(self, scope: anyio.CancelScope) -> None:
        del self._tasks[scope]
        self._signal.notify()

    def _mine(self) -> anyio.CancelScope | None:
        """The task of this coordinator the calling code runs in, if any (a join or a close
        from there must not wait for it)."""
        scope = _TASK.get()
        return scope if scope is not None and scope in self._tasks else None

    def _others_done(self, mine: anyio.CancelScope | None) -> bool:
        """Whether every task but ``mine`` ended."""
        return not self._tasks or (mine is not None and len(self._tasks) == 1 and mine in self._tasks)

    # -- join and teardown ------------------------------------------------------

    async def join(self, stop_grace_period: float = 120.0, ignore_live_tasks: bool = False) -> None:
        """Wait for the tasks to finish or for a stop request (join never requests
        stop), then give them ``stop_grace_period`` seconds and cancel stragglers.

        Raises the recorded exception if any; else ``RuntimeError`` naming the
        stragglers, unless ``ignore_live_tasks`` (then they are only logged). Called
        from one of the coordinator's own tasks, it waits for the others, not for that one,
        and leaves ``joined`` False: a task of the coordinator, the caller's, still runs.
        """
        grace = _check_seconds("join(stop_grace_period=...)", stop_grace_period)
        mine = self._mine()
        await self._signal.wait_until(lambda: self._signal.stopped or self._others_done(mine))
        with anyio.CancelScope(shield=True):
            stragglers = await self._reap(grace, mine)
        if mine is None:
            self._joined = True
        self._raise_outcome(stragglers, ignore_live_tasks)

    async def _reap(self, grace: float, mine: anyio.CancelScope | None) -> list[str]:
        """Give the tasks ``grace`` seconds, then cancel the stragglers; return their names
        (``mine``, the task this runs in if it is one of ours, is none of them)."""
        with anyio.move_on_after(grace):
            await self._signal.wait_until(lambda: self._others_done(mine))
        stragglers = [name for scope, name in self._tasks.items() if scope is not mine]
        if not stragglers:
            return stragglers
        logger().warning(
            "Coordinator grace period of %gs expired; cancelling tasks still running: %s",
            grace,
            " ".join(stragglers),
        )
        for scope in list(self._tasks):
            if scope is not mine:
                scope.cancel()
        with anyio.move_on_after(UNWIND_PERIOD):
            await self._signal.wait_until(lambda: self._others_done(mine))
        if not self._others_done(mine):
            logger().warning(
                "Coordinator tasks ignored cancellation for %gs: %s",
                UNWIND_PERIOD,
                " ".join(name for scope, name in self._tasks.items() if scope is not mine),
            )
        return stragglers

    def _raise_outcome(self, stragglers: list[str], ignore_live_tasks: bool) -> None:
        self.raise_requested_exception()
        if stragglers and not ignore_live_tasks:
            raise RuntimeError(
                f"Coordinator stopped with tasks still running: {' '.join(stragglers)}"
            )

    def __enter__(self) -> None:
        raise TypeError("Coordinator is an async context manager: use 'async with', not 'with'")

    def __exit__(self, *exc_info: object) -> None:  # never reached: __enter__ refuses
        raise TypeError("Coordinator is an async context manager: use 'async with', not 'with'")

    async def __aenter__(self) -> Coordinator:
        self._check_closed()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        tg = self._tg
        if tg is None or self._host_done is not None:
            raise RuntimeError("Coordinator.__aexit__ without a matching __aenter__")
        self._tg = None
        self.request_stop()
        with anyio.CancelScope(shield=True):
            stragglers = await self._reap(self._grace, self._mine())
        self._joined = True
        if self._tasks:
            tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
        if exc is None:
            self._raise_outcome(stragglers, ignore_live_tasks=False)
        else:
            self._annotate(exc)

    def _annotate(self, exc: BaseException) -> None:
        recorded = self._signal.exception
        if recorded is None or recorded is exc:
            return
        logger().error("Coordinator had recorded an exception", exc_info=recorded)
        if not isinstance(exc, anyio.get_cancelled_exc_class()):
            exc.add_note(f"while the coordinator had recorded {recorded!r}")

    # -- hosted mode (used by the monitored session) ----------------------------

    async def _open_in(self, task_group: TaskGroup) -> None:
        """Open the coordinator's task group in a host task of ``task_group``, so it
        can be closed from another nesting level with ``_close_hosted``."""
        self._check_closed()
        self._host_exit = anyio.Event()
        self._host_done = anyio.Event()
        await task_group.start(self._host, name=f"hookrun Coordinator host {id(self):#x}")

    async def _host(self, *, task_status: TaskStatus[None]) -> None:
        assert self._host_exit is not None and self._host_done is not None
        exit_requested, done = self._host_exit, self._host_done
        tg = anyio.create_task_group()
        try:
            async with tg:
                self._tg = tg
                task_status.started()
                await exit_requested.wait()
                if any(scope is not self._closer for scope in self._tasks):
                    tg.cancel_scope.cancel()
        finally:
            if self._tg is tg:
                self._tg = None
            done.set()

    async def _close_hosted(self, stop_grace_period: float, ignore_live_tasks: bool = True) -> None:
        """Request stop, join with ``stop_grace_period`` and close the host task.

        Shielded and bounded: safe inside a cancelled scope. Re-raises the
        recorded exception like ``join``.
        """
        grace = _check_seconds("_close_hosted(stop_grace_period=...)", stop_grace_period)
        if self._tg is not None and self._host_done is None:
            raise RuntimeError("Coordinator was opened by `async with`, not by _open_in()")
        exit_requested, done = self._host_exit, self._host_done
        self._tg = self._host_exit = self._host_done = None
        self.request_stop()
        self._closer = mine = self._mine()
        with anyio.CancelScope(shield=True):
            stragglers = await self._reap(grace, mine)
            self._joined = True
            if exit_requested is not None and done is not None:
                exit_requested.set()
                if mine is None:  # else the host ends with this very task, after it
                    await self._wait_host(done)
        self._raise_outcome(stragglers, ignore_live_tasks)

    async def _wait_host(self, done: anyio.Event) -> None:
        with anyio.move_on_after(UNWIND_PERIOD):
            await done.wait()
        if not done.is_set():
            logger().warning("Coordinator host task still running after %gs", UNWIND_PERIOD)

    # -- internals --------------------------------------------------------------

    def _check_closed(self) -> None:
        if self._tg is not None or self._host_done is not None:
            raise RuntimeError("Coordinator is already open")


def _check_seconds(what: str, value: float) -> float:
    check_number(what, value, unit="seconds")
    return float(value)


def _name_of(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


# -- the monitored session's interface ----------------------------------------------------
# A monitored session opens each coordinator it creates in a host task of its own task
# group, closes it from another nesting level, and hears of its stop requests as they are
# made; these three functions are the whole of what it uses beyond the public API.


async def open_hosted(coord: Coordinator, task_group: TaskGroup) -> None:
    """Open ``coord`` in a host task of ``task_group`` (close it with ``close_hosted``)."""
    await coord._open_in(task_group)


async def close_hosted(coord: Coordinator, stop_grace_period: float) -> None:
    """Request stop, join within ``stop_grace_period`` (stragglers are logged and
    cancelled, as when a monitored session closes) and close the host task; shielded.
    Raises the recorded exception, if any."""
    await coord._close_hosted(stop_grace_period, ignore_live_tasks=True)


def watch_stops(coord: Coordinator, watcher: Callable[[], None]) -> None:
    """Call ``watcher()`` whenever a stop is requested of ``coord`` (from any task), at once."""
    coord._signal.watcher = watcher
