"""A phase in which a hook waits: the calling task drives that hook, pooled workers
start the calls after it, and the first failure cancels everything still running.

``PhaseRun`` holds one such run: the results, the errors, the cursor of the next
call to start (whichever task is running takes it, in list order) and the workers
engaged. Workers are long-lived tasks parked on the session's task group: handing
one a job costs a wake-up on a ``Waker``, where a new anyio task costs 15-20 us.
When a hook suspends, as many workers are woken as hooks waited in the phase's
previous run, so hooks that wait all start within one event-loop pass.

Cancellation, the invariant of this module: every call still running when one
fails is cancelled at once.

* A worker runs its share under its own long-lived cancel scope, which only a
  failing phase cancels; the worker then retires (a new one replaces it on demand).
* The calling task drives its hook under ``scope``, a cancel scope the caller
  entered before the phase started any call (the dispatcher insists). It is
  cancelled only while the calling task is driving, so the cancellation lands in
  that hook; once a failure is recorded the calling task waits for the workers to
  unwind shielded, then raises the earliest error.
* Cancellation from outside (of ``run()``) stops the phase the same way and
  propagates.
* A worker cancelled from outside (a cancel scope around the session's task group)
  *interrupts* the phase: the other workers stop, and the calling task's hook is
  left to that same cancellation, which reaches it too when the caller is inside
  that scope. An interrupted phase never returns: it raises the caller's
  cancellation, or a ``RuntimeError`` if the caller is not being cancelled.
* A phase that cannot wake a worker (their task group has closed: the session's
  block was left while a step ran in another task) fails with that error: the
  calls after the cursor never start and the call being driven is cancelled, so
  no started call is ever dropped half-way.

Errors: a hook's error, whatever its type (``KeyboardInterrupt``, ``SystemExit``
and ``GeneratorExit`` included), is recorded in the phase by whichever task ran
it, and the calling task raises it; nothing but cancellation leaves a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import Context
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ._failures import raise_first
from ._plan import PhasePlan
from ._start import Args, Failed, Suspended, drive, start_calls
from ._wake import Waker, waker_factory

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ["PhaseRun", "WorkerPool"]


class PhaseRun:
    """One run of a phase in which a hook suspended: results, errors, workers engaged."""

    __slots__ = (
        "active", "args", "context", "done", "driving", "errors", "interrupted", "next", "plan", "pool",
        "ready", "results", "scope", "stopping", "suspensions",
    )

    def __init__(
        self, pool: WorkerPool, plan: PhasePlan, args: Args, results: list[Any], scope: anyio.CancelScope,
        context: Context, next_position: int,
    ) -> None:
        self.pool = pool
        self.plan = plan
        self.args = args
        self.results = results
        #: The cancel scope around the calling task's share (entered before the phase).
        self.scope = scope
        #: The calling task's context when it handed calls over: workers start each call
        #: in a copy of it (as a task spawned then would), not in their own long-lived one.
        self.context = context
        #: The position of the next call to start.
        self.next = next_position
        self.errors: list[tuple[int, BaseException]] = []
        #: The workers running (or about to run) a share of this phase.
        self.active: list[_Worker] = []
        self.done: Waker | None = None
        self.stopping = False
        #: Whether a worker was cancelled from outside the phase (see the module docstring).
        self.interrupted = False
        #: Whether the calling task is driving a hook of this phase right now.
        self.driving = False
        #: Workers woken for this run that have not started taking calls yet.
        self.ready = 0
        #: Hooks of this run that suspended so far.
        self.suspensions = 0

    async def drive_in_caller(self, started: Suspended) -> None:
        """The calling task drives the call that has just suspended."""
        position = started.position
        self.driving = True  # first: a failure to wake workers cancels this very call
        self.suspended()
        try:
            self.results[position] = await drive(started)
        except anyio.get_cancelled_exc_class():
            if not (self.stopping and self.scope.cancel_called):
                self.stop()  # cancelled from outside the phase
                raise
            # A sibling failed and cancelled ``scope``; its error is the outcome.
        except Exception as exc:
            self.driving = False  # its hook is done: the failure must not cancel ``scope``
            self.fail(position, exc)
        finally:
            self.driving = False

    def suspended(self) -> None:
        """A hook just suspended in the task that started it: make sure workers are on
        their way to start the calls after it (as many as hooks waited last time; a
        worker woken for nothing finds no call left and parks again)."""
        self.suspensions += 1
        if self.ready or self.stopping:
            return
        remaining = len(self.plan.calls) - self.next
        if remaining > 0:
            self.wake_workers(min(remaining, max(1, self.plan.waiters - self.suspensions)))

    def wake_workers(self, count: int) -> None:
        """Wake ``count`` workers. If none can be started (the task group they would run in
        is closed), the calls after the cursor never start: the phase fails with that error
        and every call running is cancelled, so each still ends in its own task."""
        for _ in range(count):
            try:
                worker = self.pool.submit(self)
            except Exception as exc:
                self.fail(self.next, exc)
                return
            self.ready += 1
            self.active.append(worker)

    def fail(self, position: int, exc: BaseException) -> None:
        """Record a hook's error and cancel every other call of the phase."""
        self.errors.append((position, exc))
        if not self.stopping:
            self.stop()

    def stop(self, *, caller: bool = True) -> None:
        """Cancel every call still running: the workers running a share, and (``caller``)
        the calling task's hook if it is driving one. A worker woken but not running yet
        is left alone: it finds the phase stopping, starts nothing and parks again."""
        self.stopping = True
        for worker in self.active:
            if worker.running:
                worker.cancelled = True
                worker.scope.cancel()
        if caller and self.driving:
            self.scope.cancel()

    def interrupt(self) -> None:
        """A worker was cancelled from outside the phase: stop the other workers, not the
        calling task's hook (the same cancellation reaches it if it is inside that scope)."""
        self.interrupted = True
        self.stop(caller=False)

    def worker_done(self, worker: _Worker) -> None:
        """A worker finished (or will never start) its share; idempotent."""
        if worker in self.active:
            self.active.remove(worker)
            if not self.active and self.done is not None:
                self.done.set()

    async def outcome(self) -> list[Any]:
        """Wait for every worker's share, then the results, or the earliest hook's error."""
        if self.active:
            self.done = self.pool.new_waker()
            if self.stopping:  # the workers are unwinding; ``scope`` may be cancelled
                with anyio.CancelScope(shield=True):
                    await self.done.wait()
            else:
                try:
                    await self.done.wait()
                except BaseException:
                    await self.abandon()
                    raise
        self.plan.waiters = self.suspensions
        if self.errors:
            raise_first(self.errors, self.plan.phase, [call.name for call in self.plan.calls])
        if self.interrupted:  # some calls never ran: the phase has no results to give
            await anyio.lowlevel.checkpoint_if_cancelled()
            raise RuntimeError(
                f"hookrun: the {self.plan.phase} phase was interrupted: a task running its hooks "
                "was cancelled from outside the step (the session's task group is being cancelled)"
            )
        return self.results

    async def abandon(self) -> None:
        """Cancel every worker's share and wait, shielded, for those already running to unwind.

        A worker that has not picked up its job yet is not waited for: the job is taken
        back and the worker returned to the idle pool.
        """
        self.stop()
        for worker in [worker for worker in self.active if not worker.running]:
            self.worker_done(worker)
            self.pool.reclaim(worker, self)
        if self.active:
            if self.done is None:
                self.done = self.pool.new_waker()
            with anyio.CancelScope(shield=True):
                await self.done.wait()


class _Worker:
    """A parked task of the pool: one long-lived cancel scope, woken by a :class:`Waker` per job."""

    __slots__ = ("cancelled", "job", "running", "scope", "wake")

    def __init__(self) -> None:
        self.job: PhaseRun | None = None
        self.running = False
        #: Whether a failing phase cancelled ``scope`` (which nothing else cancels): read
        #: instead of ``scope.cancel_called``, a property that costs 0.7 us on trio.
        self.cancelled = False
        self.wake: Waker | None = None
        self.scope = anyio.CancelScope()


class WorkerPool:
    """Tasks that start the remaining calls of a phase once a hook suspends.

    Idle workers stay parked on the session's task group until the session closes.
    """

    def __init__(self, task_group: Callable[[], TaskGroup]) -> None:
        self.task_group = task_group
        self.idle: list[_Worker] = []
        #: The backend's cheapest one-shot wake-up (the pool lives in one event loop).
        self.new_waker: Callable[[], Waker] = waker_factory()

    def submit(self, run: PhaseRun) -> _Worker:
        """Wake a parked worker (or start a new one) to take calls of ``run``."""
        if self.idle:
            worker = self.idle.pop()
            worker.job = run
            if worker.wake is not None:  # None: started, and will find its job when it first runs
                worker.wake.set()
        else:
            worker = _Worker()
            worker.job = run
            self.task_group().start_soon(self._work, worker, name="hookrun hook worker")
        return worker

    def reclaim(self, worker: _Worker, run: PhaseRun) -> None:
        """Take back the job of a worker woken for ``run`` that has not run yet; it is idle again."""
        if worker.job is run:
            worker.job = None
            run.ready -= 1
            self.idle.append(worker)

    async def _work(self, worker: _Worker) -> None:
        """A worker's life: take its job's calls until none is left, park, repeat."""
        with worker.scope:
            while True:
                run, worker.job = worker.job, None
                if run is not None:
                    worker.running = True
                    run.ready -= 1
                    try:
                        await self._take_calls(worker, run)
                    finally:
                        worker.running = False
                        run.worker_done(worker)
                    if worker.cancelled:
                        return  # cancelled by a failing phase: retire
                    self.idle.append(worker)
                # else: its job was taken back before it ran, and it is in the idle list already
                worker.wake = self.new_waker()
                try:
                    await worker.wake.wait()
                except BaseException:
                    if worker in self.idle:
                        self.idle.remove(worker)
                    if worker.job is not None:  # cancelled with a job in hand: give it back
                        worker.job.ready -= 1
                        worker.job.interrupt()
                        worker.job.worker_done(worker)
                    raise

    async def _take_calls(self, worker: _Worker, run: PhaseRun) -> None:
        """Start calls of ``run`` from its cursor, in place, in a copy of the context the
        calling task handed over; drive one that suspends to its end, then take more."""
        count = len(run.plan.calls)
        while not run.stopping and run.next < count:
            started = run.context.run(start_calls, run.plan, run.args, run.results, run.next, batch=False)
            if started is None:
                run.next = count
                return
            run.next = started.position + 1
            if isinstance(started, Failed):
                run.fail(started.position, started.error)
                return
            position = started.position
            run.suspended()
            try:
                run.results[position] = await drive(started)
            except anyio.get_cancelled_exc_class():
                if not worker.cancelled:  # cancelled from outside the phase
                    run.interrupt()
                    raise
                return  # a sibling failed: the worker's scope absorbs it
            except BaseException as exc:  # KeyboardInterrupt too: the calling task raises it, bare
                run.fail(position, exc)
