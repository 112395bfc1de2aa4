"""The tasks that run the steps ``iterate`` admits with steps in flight: ``StepRunners``,
and ``ParkedJobs``, the jobs parked between steps waiting to be handed an admission.

The rest of a step that ``iterate`` admitted (its raw run, its ``after_run``) runs in a
task of its own. A new anyio task costs about 20 us (its handle, cancel scope and event,
then the backend's task), waking a parked one with the backend's cheapest wake-up
(``Waker``) about 3 us; so those steps run in runners of the session's task group that
park between steps, one set per iterator, never more of them than steps were in flight
at once; once the iterator ended (``close``) they leave.

Jobs wait in one queue; a runner that runs takes its head and starts it at once (up to
its first suspension), so jobs start in the order they were submitted whichever runner
the backend runs first. A job runs as a task spawned for it would: in a copy of the
context of the task that submitted it (``_run`` drives it there), under the runner's
cancel scopes. A job that runs several steps one after another gives each a context of
its own with ``await InContext((context,))``, which switches the context it is driven in
without a pass of the event loop.

Invariants: every job submitted wakes or starts one runner, and a runner that runs takes
a job if one is queued, so no job is left queued; a runner cancelled while it is parked
(the session's task group closing) still takes one queued job, which meets that
cancellation at its first checkpoint (as a task started in a cancelled group would); a
job's ``BaseException`` ends its runner (the task group sees it, as it would a task's);
after ``close`` no runner parks again.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any

from .._dispatch._wake import Waker, Wakers

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ["InContext", "ParkedJobs", "StepRunners"]

_Job = tuple[Coroutine[Any, Any, None], Context]


class StepRunners:
    """Tasks of the session's task group running submitted jobs in order, parked between jobs."""

    __slots__ = ("_closed", "_idle", "_jobs", "_task_group", "_wakers")

    def __init__(self, task_group: Callable[[], TaskGroup], wakers: Wakers) -> None:
        self._task_group = task_group
        self._jobs: deque[_Job] = deque()
        self._idle: list[Waker] = []  # the wake-up of each parked runner
        self._wakers = wakers
        self._closed = False

    def close(self) -> None:
        """No more jobs: the parked runners leave now, the busy ones once their job is done."""
        self._closed = True
        idle, self._idle = self._idle, []
        for wake in idle:
            wake.set()

    def submit(self, job: Coroutine[Any, Any, None], context: Context | None = None) -> None:
        """Queue ``job``, to run in ``context`` (a copy of the current one by default), and
        wake (or start) a runner."""
        self._jobs.append((job, copy_context() if context is None else context))
        if self._idle:
            self._idle.pop().set()
            return
        try:
            self._task_group().start_soon(self._serve, name="hookrun step runner")
        except BaseException:
            self._jobs.pop()  # the job just queued: nothing ran since
            job.close()  # never started: nothing else will
            raise

    async def _serve(self) -> None:
        """A runner's life: take the queued jobs one after another, park, repeat."""
        jobs = self._jobs
        while True:
            while jobs:
                await _run(*jobs.popleft())
            wake = self._wakers()  # first: a collection it may start can close() the runners
            if self._closed:
                return
            self._idle.append(wake)
            try:
                await wake.wait()
            except BaseException:
                if wake in self._idle:
                    self._idle.remove(wake)
                if jobs:  # woken for a job as it was cancelled: the job runs, and meets the cancellation
                    await _run(*jobs.popleft())
                raise


class InContext(tuple[Context]):
    """Awaited by a job (``await InContext((context,))``): the rest of the job runs in
    ``context``, from this point on, without a pass of the event loop. A job that runs
    several steps one after the other gives each its own context this way.

    Awaiting it yields its one item, the context, to the job's driver (``_run``: no event
    loop yields a ``Context``), which goes on at once in that context."""

    __slots__ = ()
    if TYPE_CHECKING:

        def __await__(self) -> Generator[Context, None, None]: ...
    else:
        __await__ = tuple.__iter__


@types.coroutine
def _run(job: Coroutine[Any, Any, None], context: Context) -> Generator[Any, Any, None]:
    """``job``, started and driven in ``context`` (or the one it switches to: ``InContext``)
    from the current task."""
    send, throw, run = job.send, job.throw, context.run
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                yielded = run(send, value) if error is None else run(throw, error)
            except StopIteration:
                return
            value = error = None
            if type(yielded) is Context:  # ``InContext``, not for the event loop: go on at once
                run = yielded.run
                continue
            try:
                value = yield yielded
            except BaseException as exc:
                error = exc
    finally:
        job.close()


class ParkedJobs:
    """The jobs of ``iterate``'s runners parked between steps (a job whose step ended while
    another admission was under way), each waiting to be handed the next admission.

    ``hand`` gives the admission to the latest parked job; a job whose step ends before that
    one ran takes it over (``take_over``), so admissions follow one another in one pass of
    the event loop when steps end together, and the job handed it parks again. ``park``
    returns False once the jobs leave (``leave``) or ``ended()``; a job cancelled after it
    was handed the admission ends it (``drop``).

    So in a steady stream no task hands a step to another, and a new job (maybe a new
    runner) is submitted only when none is parked: the runners are about as many as the
    most steps admitted and not ended at once, and when the driver bounds the rate the steps
    in flight grow only as fast as the event loop starts runners (with 1024 steps of 10 ms
    in flight trio had started some 2900 for 8192 steps, whose objects took the garbage
    collector a third of the driver's time; about 300 since)."""

    __slots__ = ("_drop", "_ended", "_handed", "_parked", "_wakers", "leaving")

    def __init__(self, wakers: Wakers, ended: Callable[[], bool], drop: Callable[[], None]) -> None:
        self._parked: list[Waker] = []
        self._handed: Waker | None = None  # the job handed the admission, until it runs
        self._wakers = wakers
        self._ended = ended
        self._drop = drop
        self.leaving = False

    def hand(self) -> bool:
        """Hand the admission to a parked job (False: none is parked)."""
        if not self._parked:
            return False
        self._handed = wake = self._parked.pop()
        wake.set()
        return True

    def take_over(self) -> bool:
        """Take the admission handed to a parked job that has not run yet (False: none is)."""
        if self._handed is None:
            return False
        self._handed = None
        return True

    async def park(self) -> bool:
        """Wait to be handed the admission (True), or until the jobs leave (False)."""
        while not (self.leaving or self._ended()):
            wake = self._wakers()
            self._parked.append(wake)
            try:
                await wake.wait()
            except BaseException:
                if self._handed is wake:  # handed the admission as it was cancelled: it ends here
                    self._handed = None
                    self._drop()
                elif wake in self._parked:
                    self._parked.remove(wake)
                raise
            if self._handed is wake:
                self._handed = None
                return True
            # Woken to leave, or its admission was taken over: it parks again unless leaving.
        return False

    def leave(self) -> None:
        """The parked jobs leave now; no job parks any more."""
        self.leaving = True
        parked, self._parked = self._parked, []
        for wake in parked:
            wake.set()
