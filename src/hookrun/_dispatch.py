"""Which hook methods run in a phase, how, and which error wins.

The plan is computed once, when the hooks are frozen: for every phase, the
hooks that override that method, each marked sync or async. A phase then runs:

* plain functions inline, in list order;
* async methods *started in place*: each coroutine is sent its first value in
  the calling task, in its own copy of the context (as a task would run it).
  A hook that finishes without suspending never costs a task;
* a hook that really suspends is driven to the end by the task that started it
  (through a trampoline, so its cancel scopes and task-bound waits stay in their
  task), while worker tasks carry on starting the remaining hooks the same way,
  taking them in list order from a shared cursor. Only hooks that wait occupy a
  task. A started coroutine never moves to another task. Workers are pooled
  tasks parked on the session's task group: waking one costs a wake-up, not a new
  task. When a hook suspends, as many workers are woken as hooks waited in the
  phase's previous run, so waiting hooks start within one event-loop pass
  instead of one pass per hook;
* a hot phase of async hooks only, whose hooks waited in its previous run, is
  handed to workers whole: they need a task each anyway, and the calling task,
  which then only waits, needs no cancel scope.

Workers and the calling task park on a ``Waker`` (``_wake.py``), the backend's
own one-shot wake-up, a third of the cost of an ``anyio.Event``.

Errors: a failing hook cancels the others of its phase; the error of the
earliest hook in list order propagates unwrapped and the others are attached to
it as notes (and logged), whatever order the coroutines ran in. A hook that fails
before it suspends stops later hooks from starting.

Cancel scopes: the hook driven by the calling task can only be cancelled by a
scope entered *before* it started, and a scope costs 4-9 us, more than a whole
step of no-op hooks. So a phase with several async hooks runs under a scope until
it has run 16 times in a row without any hook suspending, and without one after
that until a hook suspends again (``PhasePlan``). The one case left: a hook that
had not suspended in those 16 runs suspends, and in that same step a sibling
fails; it is then awaited (bounded by ``hook_timeout``) rather than cancelled.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

from ._errors import HookTimeoutError
from ._hooks import SessionRunArgs, TimingRecord
from ._log import logger
from ._plan import Call, PhasePlan, plan_hooks
from ._wake import Waker, waker_factory

__all__ = ["Dispatcher", "raise_first"]


@types.coroutine
def _drive(coro: Coroutine[Any, Any, Any], context: Any, yielded: Any) -> Generator[Any, Any, Any]:
    """Drive a started coroutine to its end from the current task, in its own context."""
    send, throw, run = coro.send, coro.throw, context.run
    while True:
        try:
            value = yield yielded
        except BaseException as exc:
            try:
                yielded = run(throw, exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = run(send, value)
            except StopIteration as stop:
                return stop.value


def raise_first(errors: list[tuple[int, BaseException]], phase: str, names: Sequence[str]) -> None:
    """Raise the error of the earliest hook; attach and log the others."""
    errors.sort(key=lambda item: item[0])
    first = errors[0][1]
    for index, other in errors[1:]:
        first.add_note(f"hookrun: hook {names[index]} also failed in {phase}: {other!r}")
        logger().error("hook %s also failed in %s: %r", names[index], phase, other, exc_info=other)
    raise first


class _Fanout:
    """One run of a phase with several async hooks: results, errors, the workers engaged."""

    __slots__ = (
        "active", "args", "calls", "context", "dispatcher", "done", "errors", "next", "plan", "ready",
        "results", "scope", "stopping", "suspensions",
    )

    def __init__(
        self, dispatcher: Dispatcher, plan: PhasePlan, args: Sequence[tuple[Any, ...]], results: list[Any]
    ) -> None:
        self.dispatcher = dispatcher
        self.plan = plan
        self.calls = plan.calls
        self.args = args
        self.results = results
        self.errors: list[tuple[int, BaseException]] = []
        self.scope: anyio.CancelScope | None = None
        #: The workers running (or about to run) a share of this phase.
        self.active: list[_Worker] = []
        self.done: Waker | None = None
        self.stopping = False
        #: The position of the next call to start: whichever task is running takes it.
        self.next = 0
        #: The calling task's context when it handed calls over: workers start each call
        #: in a copy of it (as a task spawned then would), not in their own long-lived one.
        self.context: Context | None = None
        #: Workers woken for this run that have not started taking calls yet.
        self.ready = 0
        #: Hooks of this run that suspended so far.
        self.suspensions = 0

    def suspended(self) -> None:
        """A hook just suspended in the task that started it, which will now drive it:
        make sure workers are on their way to start the calls after it.

        As many workers are woken at once as the phase's previous run saw hooks wait, so
        that hooks which wait all start within one pass of the event loop instead of one
        worker waking the next (which spreads their start over a pass per hook). A worker
        woken for nothing finds no call left and parks again.
        """
        self.suspensions += 1
        if self.suspensions == 1:
            self.plan.suspended()
        if self.ready or self.stopping:
            return
        remaining = len(self.calls) - self.next
        if remaining > 0:
            self.wake_workers(min(remaining, max(1, self.plan.waiters - self.suspensions)))

    def wake_workers(self, count: int) -> None:
        """Wake ``count`` pooled workers (starting new ones if too few are parked) to take calls."""
        pool = self.dispatcher.pool()
        self.ready += count
        for _ in range(count):
            self.active.append(pool.submit(self))

    def fail(self, position: int, exc: BaseException) -> None:
        """Record a hook's error and cancel every other call of the phase."""
        self.errors.append((position, exc))
        if not self.stopping:
            self.stop()

    def stop(self) -> None:
        """Cancel every call still running: the workers running a share, and the calling
        task's scope. A worker woken but not running yet is left alone: it will find the
        phase stopping, start nothing and park again (cancelling it would retire it, and
        it would linger as a task until it next ran)."""
        self.stopping = True
        for worker in self.active:
            if worker.running:
                worker.cancelled = True
                worker.scope.cancel()
        if self.scope is not None:
            self.scope.cancel()

    def worker_done(self, worker: _Worker) -> None:
        """A worker finished (or will never start) its share; idempotent."""
        if worker in self.active:
            self.active.remove(worker)
            if not self.active and self.done is not None:
                self.done.set()

    async def join(self) -> None:
        """Wait for every worker's share; if interrupted, cancel them and still wait (shielded)."""
        if not self.active:
            return
        self.done = self.dispatcher.pool().new_waker()
        try:
            await self.done.wait()
        except BaseException:
            await self.abandon()
            raise

    async def outcome(self) -> list[Any]:
        """Wait for every worker's share, then the results, or the earliest hook's error."""
        await self.join()
        self.plan.waiters = self.suspensions
        if not self.suspensions:
            self.plan.ran_quietly()
        if self.errors:
            raise_first(self.errors, self.plan.phase, [call.name for call in self.calls])
        return self.results

    async def abandon(self) -> None:
        """Cancel every worker's share and wait, shielded, for those already running to unwind.

        A worker that has not picked up its job yet is not waited for: the job is taken
        back and the worker returned to the idle pool (a task cancelled before its first
        step never runs at all, and an idle worker is ready for the next phase).
        """
        self.stop()
        pool = self.dispatcher.pool()
        for worker in [worker for worker in self.active if not worker.running]:
            self.worker_done(worker)
            pool.reclaim(worker, self)
        if self.active:
            if self.done is None:
                self.done = self.dispatcher.pool().new_waker()
            with anyio.CancelScope(shield=True):
                await self.done.wait()


class _Worker:
    """A parked task of the pool: one long-lived cancel scope, woken by a :class:`Waker` per job."""

    __slots__ = ("cancelled", "job", "running", "scope", "wake")

    def __init__(self) -> None:
        self.job: _Fanout | None = None
        self.running = False
        #: Whether a failing phase cancelled ``scope`` (which nothing else cancels): read
        #: instead of ``scope.cancel_called``, a property that costs 0.7 us on trio.
        self.cancelled = False
        self.wake: Waker | None = None
        self.scope = anyio.CancelScope()


class _WorkerPool:
    """Tasks that start the remaining hooks of a phase once a hook suspends.

    Handing a job to a parked worker costs a wake-up, where a new anyio task costs
    15-20 us. A worker's scope is cancelled only when a failing phase cancels the job
    it runs; the worker then retires and a new one takes its place on demand. Idle
    workers stay parked on the session's task group until the session closes.
    """

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.idle: list[_Worker] = []
        #: Parks and wakes one task the cheapest way the running backend offers (the pool
        #: lives in one event loop): a third of the cost of ``anyio.Event`` per wake-up.
        self.new_waker: Callable[[], Waker] = waker_factory()
        #: The running backend's cancel scope class: ``anyio.CancelScope()`` looks the
        #: backend up on every call, which costs as much as entering the scope.
        self.new_scope: type[anyio.CancelScope] = type(anyio.CancelScope())

    def submit(self, fan: _Fanout) -> _Worker:
        """Wake a parked worker (or start a new one) to take calls of ``fan``."""
        if self.idle:
            worker = self.idle.pop()
            worker.job = fan
            if worker.wake is not None:  # None: started, and will find its job when it first runs
                worker.wake.set()
        else:
            worker = _Worker()
            worker.job = fan
            self.dispatcher.task_group().start_soon(self._work, worker, name="hookrun hook worker")
        return worker

    def reclaim(self, worker: _Worker, fan: _Fanout) -> None:
        """Take back the job of a worker woken for ``fan`` that has not run yet; it is idle again."""
        if worker.job is fan:
            worker.job = None
            fan.ready -= 1
            self.idle.append(worker)

    async def _work(self, worker: _Worker) -> None:
        """A worker's life: take calls of the phase it is handed until none is left, park, repeat.

        Each call is started in place, in a copy of the context the calling task handed
        over (a plain function runs in that context itself), and one that suspends is
        driven to its end before the next is taken. The loop is written out here, a
        near-copy of the calling task's ``start_calls`` on purpose: two coroutine
        frames fewer per resumption measured 4-5% of a step of 10 hooks that suspend
        once, and a shared synchronous "start the next call" helper still cost 3%.
        """
        scope = worker.scope
        cancelled = anyio.get_cancelled_exc_class()
        with scope:
            while True:
                fan, worker.job = worker.job, None
                if fan is not None:
                    worker.running = True
                    fan.ready -= 1
                    calls, args, results, base = fan.calls, fan.args, fan.results, fan.context
                    assert base is not None
                    count = len(calls)
                    try:
                        while not fan.stopping:
                            position = fan.next
                            if position >= count:
                                break
                            fan.next = position + 1
                            call = calls[position]
                            if not call.is_async:
                                try:
                                    results[position] = base.run(_call_sync, call, args[position])
                                except Exception as exc:
                                    fan.fail(position, exc)
                                continue
                            context = base.copy()
                            try:
                                coro = call.fn(*args[position])
                                yielded = context.run(coro.send, None)
                            except StopIteration as stop:
                                results[position] = stop.value
                                continue
                            except Exception as exc:
                                fan.fail(position, exc)
                                break
                            fan.suspended()
                            try:
                                results[position] = await _drive(coro, context, yielded)
                            except cancelled:
                                if not worker.cancelled:  # cancelled from outside the phase
                                    fan.stop()
                                    raise
                                # else a sibling failed: the worker's scope absorbs it
                            except Exception as exc:
                                fan.fail(position, exc)
                    finally:
                        worker.running = False
                        fan.worker_done(worker)
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
                        worker.job.worker_done(worker)
                    raise


class Dispatcher:
    """Runs phases of hook calls; owns the per-phase plans and the hook timeout."""

    def __init__(
        self,
        hooks: Sequence[object],
        *,
        hook_timeout: float | None = None,
        task_group: Callable[[], TaskGroup] | None = None,
    ) -> None:
        self.plans = plan_hooks(tuple(hooks))
        self.hook_timeout = hook_timeout
        self._task_group = task_group
        self._pool: _WorkerPool | None = None
        if hook_timeout is not None:
            for plan in self.plans.values():
                for call in plan.calls:
                    if call.is_async:
                        call.fn = functools.partial(_timed, call, call.fn, hook_timeout)
                plan.refresh()

    def pool(self) -> _WorkerPool:
        if self._pool is None:
            self._pool = _WorkerPool(self)
        return self._pool

    def reset_pool(self) -> None:
        """Forget parked workers (their task group is closing)."""
        self._pool = None

    def task_group(self) -> TaskGroup:
        if self._task_group is None:
            raise RuntimeError("this dispatcher has no task group for hooks that suspend")
        return self._task_group()

    async def run(
        self,
        plan: PhasePlan,
        args: Sequence[tuple[Any, ...]] | tuple[Any, ...],
        trace: list[TimingRecord] | None = None,
    ) -> list[Any]:
        """Run every call of ``plan``; return their results in list order."""
        started = self.start(plan, args, trace)
        return started if isinstance(started, list) else await started

    def start(
        self,
        plan: PhasePlan,
        args: Sequence[tuple[Any, ...]] | tuple[Any, ...],
        trace: list[TimingRecord] | None = None,
    ) -> list[Any] | Coroutine[Any, Any, list[Any]]:
        """Start every call of ``plan``: their results in list order if none suspended, else a
        coroutine that finishes the phase, which the caller must await at once.

        ``args`` is one tuple of arguments shared by every call, or one tuple per call.
        Sync calls are made and async ones started in place, here, without a coroutine
        frame of the dispatcher's own; the first suspension hands over to the slow path.
        """
        if trace is None:
            if plan.n_async == 0:  # plain functions only: call each inline, in list order
                return _call_plain(plan, args)
            single = plan.single
            if single is not None:
                context = copy_context()
                coro = single(*args) if type(args) is tuple else single(*args[0])
                try:
                    yielded = context.run(coro.send, None)
                except StopIteration as stop:
                    return [stop.value]
                return self._finish_single(plan, [], [], 0, coro, context, yielded)
            if not plan.scoped or plan.n_async == 1:
                every = plan.all_async
                if every is None:
                    return self._start_from(plan, args, [])
                # Async hooks only: ``_start_from``'s first pass, written out (its call and
                # loop set-up are a tenth of a phase of two no-op hooks).
                results: list[Any] = []
                base = copy_context()
                context = base.copy()
                coro, yielded = context.run(_start_quiet, every, args, results, context, base)
                if coro is None:
                    return results
                if coro is _CHANGED:
                    return self._start_from(plan, args, results)
                return self._suspended(plan, args, results, coro, context, yielded)
        if type(args) is tuple:
            args = [args] * len(plan.calls)
        if trace is not None:
            return self._run_traced(plan, args, trace)
        return self._run_many(plan, args)

    def _start_from(
        self,
        plan: PhasePlan,
        args: Sequence[tuple[Any, ...]] | tuple[Any, ...],
        results: list[Any],
    ) -> list[Any] | Coroutine[Any, Any, list[Any]]:
        """The unscoped fast path, from the call after those in ``results`` on: ``args`` is
        one tuple shared by every call, or one per call."""
        fns = plan.fns
        count = len(fns)
        shared = type(args) is tuple
        position = len(results)
        context: Context | None = None
        base: Any = None  # the pristine copy ``context`` is compared with; set with it
        runs = plan.runs
        while position < count:
            run = runs[position]
            if run is None:  # a plain function
                fn = fns[position][0]
                result = fn(*args) if shared else fn(*args[position])
                if result is not None and type(result) is not SessionRunArgs:
                    _check_sync_result(plan.calls[position], result)
                results.append(result)
                position += 1
                context = None  # it ran in the caller's context, which it may have changed
                continue
            if context is None:
                base = copy_context()
                context = base.copy()
            coro, yielded = context.run(_start_quiet, run, args, results, context, base)
            position = len(results)
            if coro is _CHANGED:
                context = None
            elif coro is not None:
                return self._suspended(plan, args, results, coro, context, yielded)
        return results

    def _suspended(
        self,
        plan: PhasePlan,
        args: Sequence[tuple[Any, ...]] | tuple[Any, ...],
        results: list[Any],
        coro: Coroutine[Any, Any, Any],
        context: Context,
        yielded: Any,
    ) -> Coroutine[Any, Any, list[Any]]:
        """The fast path's call at position ``len(results)`` suspended: finish the phase in a coroutine."""
        position = len(results)
        if type(args) is tuple:
            args = [args] * len(plan.calls)
        if plan.n_async == 1:  # no sibling to run beside it or to be cancelled by
            return self._finish_single(plan, args, results, position, coro, context, yielded)
        results += [None] * (len(plan.calls) - position)
        return self._after_first_suspension(plan, args, results, position, coro, context, yielded)

    async def _finish_single(
        self,
        plan: PhasePlan,
        args: Sequence[tuple[Any, ...]],
        results: list[Any],
        position: int,
        coro: Coroutine[Any, Any, Any],
        context: Any,
        yielded: Any,
    ) -> list[Any]:
        """The phase's only async hook suspended: drive it here, then make the sync calls after it."""
        results.append(await _drive(coro, context, yielded))
        rest = self._start_from(plan, args, results)
        assert type(rest) is list  # only sync calls are left
        return rest

    async def _after_first_suspension(
        self,
        plan: PhasePlan,
        args: Sequence[tuple[Any, ...]],
        results: list[Any],
        position: int,
        coro: Coroutine[Any, Any, Any],
        context: Any,
        yielded: Any,
    ) -> list[Any]:
        """An unscoped phase found a hook that waits: drive it here, start the rest in a child."""
        fan = _Fanout(self, plan, args, results)
        fan.next = position + 1
        fan.context = copy_context()
        try:
            fan.suspended()
            await self._drive_recorded(fan, position, coro, context, yielded, None)
        except BaseException:
            await fan.abandon()
            raise
        return await fan.outcome()

    async def _run_many(self, plan: PhasePlan, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """A scoped phase: the calling task starts the calls under a cancel scope (workers
        under their own); or, in a phase of async hooks that waited in its last run, every
        call is handed to workers and the calling task only waits for them."""
        fan = _Fanout(self, plan, args, [None] * len(plan.calls))
        try:
            if plan.waiters and plan.can_unscope and plan.all_async is not None:
                # Hooks that wait need a task each anyway, and workers that start them all
                # spare the calling task a cancel scope (4-9 us) around the one it would drive.
                fan.context = copy_context()
                fan.wake_workers(min(len(plan.calls), plan.waiters))
            else:
                with self.pool().new_scope() as fan.scope:
                    await self.start_calls(fan)
        except BaseException:
            await fan.abandon()
            raise
        return await fan.outcome()

    async def start_calls(self, fan: _Fanout) -> None:
        """The calling task's share of a scoped phase: take the next call and start it in
        place, until none is left; drive one that suspends to its end (workers take the
        calls after it meanwhile, as in ``_WorkerPool._work``)."""
        calls, args, results = fan.calls, fan.args, fan.results
        count = len(calls)
        while not fan.stopping:
            position = fan.next
            if position >= count:
                return
            fan.next = position + 1
            call = calls[position]
            if not call.is_async:
                try:
                    results[position] = _call_sync(call, args[position])
                except Exception as exc:
                    fan.fail(position, exc)
                continue
            context = copy_context()
            try:
                coro = call.fn(*args[position])
                yielded = context.run(coro.send, None)
            except StopIteration as stop:
                results[position] = stop.value
                continue
            except Exception as exc:
                fan.fail(position, exc)
                return
            fan.context = copy_context()
            fan.suspended()
            await self._drive_recorded(fan, position, coro, context, yielded, fan.scope)

    async def _drive_recorded(
        self,
        fan: _Fanout,
        position: int,
        coro: Coroutine[Any, Any, Any],
        context: Any,
        yielded: Any,
        own_scope: anyio.CancelScope | None,
    ) -> None:
        try:
            fan.results[position] = await _drive(coro, context, yielded)
        except anyio.get_cancelled_exc_class():
            if own_scope is None or not own_scope.cancel_called:
                fan.stop()
                raise
            # Cancelled because a sibling failed; ``own_scope`` absorbs it.
        except Exception as exc:
            fan.fail(position, exc)

    async def _run_traced(
        self, plan: PhasePlan, args: Sequence[tuple[Any, ...]], trace: list[TimingRecord]
    ) -> list[Any]:
        """Tracing path: every call wrapped in a coroutine that records its span."""
        traced = PhasePlan(plan.phase, [_TracedCall(call, trace) for call in plan.calls])
        return await self._run_many(traced, args)


class _TracedCall(Call):
    """A call wrapped so that its start and end times land in the step's metadata."""

    __slots__ = ()

    def __init__(self, call: Call, trace: list[TimingRecord]) -> None:
        async def traced(*args: Any) -> Any:
            start = anyio.current_time()
            try:
                if call.is_async:
                    return await call.fn(*args)
                return _call_sync(call, args)
            finally:
                trace.append(TimingRecord(call.phase, call.name, start, anyio.current_time()))

        super().__init__(call.index, call.hook, call.phase, traced)
        self.name = call.name


#: ``_start_quiet``'s word for "a hook changed the shared context".
_CHANGED: Any = object()


def _start_quiet(
    fns: tuple[Callable[..., Any], ...],
    args: Sequence[tuple[Any, ...]] | tuple[Any, ...],
    results: list[Any],
    context: Context,
    base: Context,
) -> tuple[Any, Any]:
    """Run inside ``context``: start the async calls ``fns`` (consecutive ones, the first
    at position ``len(results)``), in place, one after another, as long as each
    finishes without suspending; append their results.

    Each call must start in a context of its own, equal to the caller's. A copied
    context costs a copy and a ``Context.run`` per call (a third of a no-op hook's
    cost), so consecutive calls share one copy for as long as it still equals
    ``base``, the pristine snapshot it was copied from: a call that finishes and left
    it unchanged leaves nothing the next call could see. Returns ``(None, None)``
    when every call finished, ``(_CHANGED, None)`` when the last call appended set a
    variable (the next needs a fresh copy), or the coroutine that suspended (at
    position ``len(results)``; it keeps ``context``) and the value it yielded.

    The loop is written out per kind of ``args`` (shared by every call with one or two
    arguments, as before_run and after_run without fetches have, or one tuple per call):
    ``fn(a)`` costs a fifth less than ``fn(*args[position])`` on a no-op hook.
    """
    append = results.append
    if type(args) is tuple and len(args) == 1:
        (a,) = args
        for fn in fns:
            coro = fn(a)
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                append(stop.value)
                if context != base:
                    return _CHANGED, None
                continue
            return coro, yielded
    elif type(args) is tuple and len(args) == 2:
        a, b = args
        for fn in fns:
            coro = fn(a, b)
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                append(stop.value)
                if context != base:
                    return _CHANGED, None
                continue
            return coro, yielded
    else:
        shared = type(args) is tuple
        for fn in fns:
            coro = fn(*args) if shared else fn(*args[len(results)])
            try:
                yielded = coro.send(None)
            except StopIteration as stop:
                append(stop.value)
                if context != base:
                    return _CHANGED, None
                continue
            return coro, yielded
    return None, None


def _call_plain(plan: PhasePlan, args: Sequence[tuple[Any, ...]] | tuple[Any, ...]) -> list[Any]:
    """A phase of plain functions: call each inline, in list order (written out per kind
    of ``args``, as ``_start_quiet`` is: ``fn(a)`` is cheaper than ``fn(*args)``)."""
    results: list[Any] = []
    append = results.append
    if type(args) is tuple and len(args) == 1:
        (a,) = args
        for fn, _ in plan.fns:
            result = fn(a)
            if result is not None and type(result) is not SessionRunArgs:
                _check_sync_result(plan.calls[len(results)], result)
            append(result)
    elif type(args) is tuple and len(args) == 2:
        a, b = args
        for fn, _ in plan.fns:
            result = fn(a, b)
            if result is not None and type(result) is not SessionRunArgs:
                _check_sync_result(plan.calls[len(results)], result)
            append(result)
    else:
        shared = type(args) is tuple
        for position, (fn, _) in enumerate(plan.fns):
            result = fn(*args) if shared else fn(*args[position])
            if result is not None and type(result) is not SessionRunArgs:
                _check_sync_result(plan.calls[position], result)
            append(result)
    return results


def _check_sync_result(call: Call, result: object) -> None:
    """A plain-function hook must not return an awaitable (it would never be awaited)."""
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError(
            f"hook {call.name}: {call.phase} is a plain function but returned an "
            f"awaitable; declare it with 'async def'"
        )


def _call_sync(call: Call, args: tuple[Any, ...]) -> Any:
    result = call.fn(*args)
    if result is not None and type(result) is not SessionRunArgs:
        _check_sync_result(call, result)
    return result


async def _timed(call: Call, fn: Callable[..., Any], limit: float, *args: Any) -> Any:
    with anyio.move_on_after(limit) as scope:
        return await fn(*args)
    if scope.cancelled_caught:
        raise HookTimeoutError(
            f"hook {call.name} took longer than hook_timeout={limit}s in {call.phase}",
            hook=call.hook,
            phase=call.phase,
            limit=limit,
        )
    raise AssertionError("unreachable: a hook call returned without a result")  # pragma: no cover
