"""The tasks that run the steps ``iterate`` admits with steps in flight: ``StepRunners``.

The rest of a step that ``iterate`` admitted (its raw run, its ``after_run``) runs in a
task of its own. A new anyio task costs about 20 us (its handle, cancel scope and event,
then the backend's task), handing a job to a parked one with the backend's cheapest
wake-up (``Waker``) about 3 us; so those steps run in runners of the session's task group
that park between steps, one set per iterator, never more of them than steps were in
flight at once; once the iterator ended (``close``) they leave.

A job runs as a task spawned for it would: in a copy of the context of the task that
submitted it (``drive`` runs it there), under the runner's cancel scopes.

Invariants: a runner runs one job at a time; a job submitted always runs, even when its
runner is cancelled before it starts (it meets that cancellation at its first checkpoint,
as a task started in a cancelled group would); a job's ``BaseException`` ends its runner
(the task group sees it, as it would a task's); an idle runner that is cancelled (the
session's task group closing) leaves the idle list; after ``close`` no runner parks again.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any

from .._dispatch._start import Suspended, drive
from .._dispatch._wake import Waker, waker_factory

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ["StepRunners"]

_new_tuple = tuple.__new__


class _Runner:
    __slots__ = ("context", "job", "wake")

    def __init__(self, job: Coroutine[Any, Any, None], context: Context) -> None:
        self.job: Coroutine[Any, Any, None] | None = job
        self.context: Context | None = context
        self.wake: Waker | None = None


class StepRunners:
    """Parked tasks of the session's task group, each running one submitted job at a time."""

    __slots__ = ("_closed", "_idle", "_new_waker", "_task_group")

    def __init__(self, task_group: Callable[[], TaskGroup]) -> None:
        self._task_group = task_group
        self._idle: list[_Runner] = []
        self._new_waker: Callable[[], Waker] | None = None
        self._closed = False

    def close(self) -> None:
        """No more jobs: the idle runners leave now, the busy ones once their job is done."""
        self._closed = True
        idle, self._idle = self._idle, []
        for runner in idle:
            assert runner.wake is not None
            runner.wake.set()  # woken without a job: it leaves

    def submit(self, job: Coroutine[Any, Any, None]) -> None:
        """Run ``job`` in a parked runner (or a new one), in a copy of the current context."""
        context = copy_context()
        if self._idle:
            runner = self._idle.pop()
            runner.job, runner.context = job, context
            assert runner.wake is not None
            runner.wake.set()
            return
        try:
            self._task_group().start_soon(self._serve, _Runner(job, context), name="hookrun step runner")
        except BaseException:
            job.close()  # never started: nothing else will
            raise

    async def _serve(self, runner: _Runner) -> None:
        """A runner's life: run its job, park until handed the next, repeat."""
        if self._new_waker is None:
            self._new_waker = waker_factory()
        while runner.job is not None:
            await _run(runner)
            if self._closed:
                return
            runner.wake = self._new_waker()
            self._idle.append(runner)
            try:
                await runner.wake.wait()
            except BaseException:
                if runner.job is None:  # still idle
                    if runner in self._idle:
                        self._idle.remove(runner)
                else:  # handed a job as it was cancelled: the job runs, and meets the cancellation
                    await _run(runner)
                raise


async def _run(runner: _Runner) -> None:
    """The runner's job, started and driven in the context it was submitted from."""
    job, context = runner.job, runner.context
    runner.job = runner.context = None
    assert job is not None and context is not None
    try:
        yielded = context.run(job.send, None)
    except StopIteration:
        return
    await drive(_new_tuple(Suspended, (0, job, context, yielded, job)))
