"""Running one phase of hook calls: which path a phase takes, and the hook timeout.

The plan of each phase is fixed when the hooks are frozen (``_plan.py``). Every
phase starts the same way: its calls are started in place, in list order, by the
calling task (``start_calls`` in ``_start.py``); a call that finishes without
suspending costs no task. (A step starts the two simplest shapes of phase itself,
with the same semantics: plain functions only with ``call_before`` / ``call_after``,
one async call with ``start_one`` and ``drive``.) What happens next depends only on
what the calls do:

===============================================  ===========================================
what happened                                     who finishes the phase
===============================================  ===========================================
every call finished, or one raised at once        ``Dispatcher.start`` returns / raises
the last call suspended, every other one          ``_finish_alone``: the calling task drives
finished (nothing can fail while it waits)        it to its end
a call suspended with calls after it              ``_finish_with_workers``: the calling task
                                                  drives it under the caller's cancel scope;
                                                  workers start the rest (``_workers.py``)
the step is traced (``RunOptions.trace``)         ``_run_traced``: every call wrapped to record
                                                  its span, then the rows above
===============================================  ===========================================

Cancellation holds on every row, from the first step on: a phase with a call after
an async one (``PhasePlan.cancellable``) is only ever started inside a cancel scope
its caller entered first (the session enters one per step, shared by both phases;
``run`` one per phase), so a failing hook can always cancel the one the calling task
drives. Nothing learnt at run time changes that.

Why a scope entered in advance, measured (enter + exit of an empty scope, on a
2-core machine: anyio's 1.8 us on asyncio, trio's own 3.5 us, anyio's on trio
3.8 us), and not the cheaper ways to pay only when a hook waits:

* entering a scope when a hook first suspends is correct only if the hook opened
  no cancel scope of its own before it did (``with fail_after(...)``, a task
  group): scopes must nest, and telling the two cases apart needs each backend's
  private task state;
* cancelling the calling task natively (asyncio's ``Task.cancel``) needs no scope,
  but pierces anyio's shielded scopes, so a hook's shielded clean-up (closing a
  file, finishing a checkpoint) would be interrupted.

So the session pays one scope per step when a phase needs one (two phases share
it), and nothing otherwise: a phase of plain functions, or with one async hook
that is its last call, runs without any.

Errors: ``_failures.raise_first``. The hook timeout wraps every async call in a
``move_on_after`` of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Sequence
from contextvars import copy_context
from typing import TYPE_CHECKING, Any

import anyio

from .._errors import HookTimeoutError
from .._hook_protocol import TimingRecord
from ._plan import Call, PhasePlan, plan_hooks
from ._start import PENDING, Args, Failed, Suspended, check_plain_result, drive, start_calls
from ._wake import scope_factory
from ._workers import PhaseRun, WorkerPool

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ["Args", "Dispatcher"]


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
        self._pool: WorkerPool | None = None
        self._new_scope: Callable[[], anyio.CancelScope] | None = None
        if hook_timeout is not None:
            for plan in self.plans.values():
                for call in plan.calls:
                    if call.is_async:
                        call.fn = functools.partial(_timed, call, call.fn, hook_timeout)
                plan.refresh()

    def pool(self) -> WorkerPool:
        if self._pool is None:
            self._pool = WorkerPool(self.task_group)
        return self._pool

    def reset_pool(self) -> None:
        """Forget parked workers (their task group is closing)."""
        self._pool = None
        self._new_scope = None

    def task_group(self) -> TaskGroup:
        if self._task_group is None:
            raise RuntimeError("this dispatcher has no task group for hooks that suspend")
        return self._task_group()

    def new_scope(self) -> anyio.CancelScope:
        """A new cancel scope of the running backend, for the caller to enter around phases."""
        if self._new_scope is None:
            self._new_scope = scope_factory()
        return self._new_scope()

    async def run(
        self, plan: PhasePlan, args: Args, trace: list[TimingRecord] | None = None, *, pool: WorkerPool | None = None
    ) -> list[Any]:
        """Run every call of ``plan`` under a cancel scope of its own if it needs one; its
        workers, if any, come from ``pool`` (default: the session's)."""
        if not plan.cancellable and trace is None:
            started = self.start(plan, args, None)
            return started if type(started) is list else await started  # type: ignore[misc]
        with self.new_scope() as scope:
            started = self.start(plan, args, scope, trace, pool)
            return started if type(started) is list else await started  # type: ignore[misc]
        raise AssertionError("unreachable: nothing but the phase cancels its scope")  # pragma: no cover

    def start(
        self,
        plan: PhasePlan,
        args: Args,
        scope: anyio.CancelScope | None,
        trace: list[TimingRecord] | None = None,
        pool: WorkerPool | None = None,
    ) -> list[Any] | Coroutine[Any, Any, list[Any]]:
        """Start every call of ``plan`` in place: their results in list order if none
        suspended, else a coroutine that finishes the phase, to be awaited at once.

        ``args[p]`` are the arguments of call ``p``. ``scope`` is a cancel scope the caller
        entered before, which a failing hook may cancel; required when ``plan.cancellable``.
        """
        if trace is not None:
            return self._run_traced(plan, args, scope, trace)
        results: list[Any] = [PENDING] * len(plan.calls)
        started = start_calls(plan, args, results, 0)
        if started is None:
            return results
        if type(started) is Failed:
            raise started.error
        assert type(started) is Suspended
        if not plan.cancellable:  # the suspended call is the last one: no other may wait
            if started.position != len(plan.calls) - 1:  # its code changed since it was planned
                started.owner.close()
                raise RuntimeError(
                    f"hookrun: hook {plan.calls[started.position].name} waited in {plan.phase}, "
                    "but its code had no await when the session was made; replace a hook's "
                    "methods before the session is made, not after"
                )
            return self._finish_alone(plan, args, results, started)
        if scope is None:
            started.owner.close()  # nothing will drive it (closing the owner closes the call it awaits)
            raise RuntimeError(f"hookrun: the {plan.phase} phase was started without a cancel scope")
        return self._finish_with_workers(plan, args, results, started, scope, pool)

    async def _finish_alone(self, plan: PhasePlan, args: Args, results: list[Any], started: Suspended) -> list[Any]:
        """The phase's last call, its only async one, suspended: drive it to its end."""
        results[started.position] = await drive(started)
        return results

    async def _finish_with_workers(
        self, plan: PhasePlan, args: Args, results: list[Any], started: Suspended, scope: anyio.CancelScope,
        pool: WorkerPool | None,
    ) -> list[Any]:
        """A call suspended beside other async calls: drive it here, workers start the rest."""
        run = PhaseRun(pool or self.pool(), plan, args, results, scope, copy_context(), started.position + 1)
        try:
            await run.drive_in_caller(started)
        except BaseException:
            await run.abandon()
            raise
        return await run.outcome()

    async def _run_traced(
        self, plan: PhasePlan, args: Args, scope: anyio.CancelScope | None, trace: list[TimingRecord]
    ) -> list[Any]:
        """Tracing: every call wrapped in a coroutine that records its span, then run as usual."""
        traced = PhasePlan(plan.phase, [_TracedCall(call, trace) for call in plan.calls])
        if scope is None:
            return await self.run(traced, args)
        started = self.start(traced, args, scope)
        return started if type(started) is list else await started  # type: ignore[misc]


class _TracedCall(Call):
    """A call wrapped so that its start and end times land in the step's metadata."""

    __slots__ = ()

    def __init__(self, call: Call, trace: list[TimingRecord]) -> None:
        async def traced(*args: Any) -> Any:
            start = anyio.current_time()
            try:
                if call.is_async:
                    return await call.fn(*args)
                result = call.fn(*args)
                if result is not None:
                    check_plain_result(call, result)
                return result
            finally:
                trace.append(TimingRecord(call.phase, call.name, start, anyio.current_time()))

        # ``waits``: taken to wait, as its code awaits (saying so skips reading the code,
        # since a traced step builds its plan anew)
        super().__init__(call.index, call.hook, call.phase, traced, waits=True)
        self.name = call.name


async def _timed(call: Call, fn: Callable[..., Any], limit: float, *args: Any) -> Any:
    """Run one async hook call, cancelled after ``limit`` seconds with ``HookTimeoutError``."""
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
