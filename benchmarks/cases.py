"""The benchmark cases: hooks, the trivial session, and one sampler per timed loop.

Every sampler builds what it needs, runs ``gc.collect()``, then times ``n`` steps.
All step cases share the *bare step*: the stop check plus ``await session.run(...)``
on a :class:`TrivialSession` that returns without suspending. Hookrun cases run
``if s.should_stop(): break; await s.run()`` inside ``async with MonitoredSession``;
probes add one primitive (a checkpoint, a task, K inline calls, ...) to the bare
step, so their overhead over it is that primitive's cost measured in the same
process: the floors the hookrun figures are compared with.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Coroutine, Hashable, Mapping, Sequence
from contextvars import copy_context
from typing import Any

import anyio
import anyio.lowlevel

from hookrun import (
    MonitoredSession,
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
)
from hookrun._dispatch._plan import may_suspend
from hookrun._dispatch._wake import scope_factory, waker_factory

from ._harness import Case, Timing, clock, timed
from .reference import ReferenceSession, drive

__all__ = [
    "BASELINE",
    "HOOK_COUNTS",
    "KINDS",
    "concurrency_cases",
    "step_cases",
]

#: The numbers of hooks of the main table.
HOOK_COUNTS = (0, 1, 10, 100)
#: Hook kinds of the main table: (a) async, no suspension; (b) async, one suspension
#: per method; (c) plain functions.
KINDS = ("async", "suspend", "plain")
#: The baseline every step case is compared with.
BASELINE = "bare"
#: The delay each sleeping hook awaits in the concurrency cases.
SLEEP = 0.01

HookFactory = Callable[[], list[SessionRunHook]]


# -- the session --------------------------------------------------------------------------


class TrivialSession:
    """A session whose ``run`` returns at once: the fetched values are the keys themselves."""

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> Sequence[Hashable]:
        return fetches


class TrivialCreator:
    """Creates a :class:`TrivialSession`."""

    async def create_session(self) -> TrivialSession:
        return TrivialSession()


class _StopFlag:
    """What the bare loop checks each step (``MonitoredSession.should_stop`` in hooked loops)."""

    __slots__ = ("stop",)

    def __init__(self) -> None:
        self.stop = False


# -- hooks --------------------------------------------------------------------------------


class AsyncNoop(SessionRunHook):
    """(a) async methods that return without suspending."""

    async def before_run(self, run_context: SessionRunContext) -> None:
        return None

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        return None


async def _at_once() -> None:
    return None


class AwaitsAtOnce(SessionRunHook):
    """Async methods that await a coroutine that returns at once: they never suspend, but
    their code has an ``await``, so hookrun cannot tell them from hooks that may wait."""

    async def before_run(self, run_context: SessionRunContext) -> None:
        await _at_once()

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await _at_once()


class SuspendOnce(SessionRunHook):
    """(b) async methods that suspend once each (one event-loop round trip)."""

    async def before_run(self, run_context: SessionRunContext) -> None:
        await anyio.lowlevel.checkpoint()

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await anyio.lowlevel.checkpoint()


class PlainNoop(SessionRunHook):
    """(c) plain functions."""

    def before_run(self, run_context: SessionRunContext) -> None:
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        return None


class AsyncFetch(SessionRunHook):
    """Asks for 3 keys, two of them shared with its neighbours, and reads them after the run."""

    def __init__(self, i: int) -> None:
        self.request = SessionRunArgs(fetches=[f"k{i}", f"k{i + 1}", "shared"])
        self.seen: object = None

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self.request

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        _, _, self.seen = run_values.results


class PlainFetch(SessionRunHook):
    """:class:`AsyncFetch` as plain functions."""

    def __init__(self, i: int) -> None:
        self.request = SessionRunArgs(fetches=[f"k{i}", f"k{i + 1}", "shared"])
        self.seen: object = None

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return self.request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        _, _, self.seen = run_values.results


class Sleeper(SessionRunHook):
    """``before_run`` awaits a ``SLEEP`` seconds delay."""

    async def before_run(self, run_context: SessionRunContext) -> None:
        await anyio.sleep(SLEEP)


HOOK_CLASSES: dict[str, type[SessionRunHook]] = {
    "async": AsyncNoop,
    "suspend": SuspendOnce,
    "plain": PlainNoop,
}


def hooks_of(kind: str, k: int) -> HookFactory:
    """A factory of ``k`` fresh hooks of ``kind``."""
    cls = HOOK_CLASSES[kind]
    return lambda: [cls() for _ in range(k)]


def fetch_hooks(k: int, plain: bool = False) -> HookFactory:
    """A factory of ``k`` fetching hooks."""
    cls = PlainFetch if plain else AsyncFetch
    return lambda: [cls(i) for i in range(k)]


def sleeping_hooks(sleepers: int, others: int = 0) -> HookFactory:
    """``sleepers`` sleeping hooks followed by ``others`` async no-op hooks."""
    return lambda: [*(Sleeper() for _ in range(sleepers)), *(AsyncNoop() for _ in range(others))]


# -- samplers -----------------------------------------------------------------------------


def bare_step() -> Callable[[int], Coroutine[Any, Any, Timing]]:
    """The baseline: a stop check and ``await session.run(...)`` per step."""

    async def sample(n: int) -> Timing:
        session, flag = TrivialSession(), _StopFlag()
        keys: list[Hashable] = []
        feeds: dict[Hashable, Any] = {}
        options, metadata = RunOptions(), RunMetadata()
        gc.collect()
        start = clock()
        for _ in range(n):
            if flag.stop:
                break
            await session.run(keys, feeds, options, metadata)
        return timed(start)

    return sample


def hooked_step(
    make_hooks: HookFactory, session_type: type[MonitoredSession | SingularMonitoredSession] = MonitoredSession
) -> Callable[[int], Coroutine[Any, Any, Timing]]:
    """``n`` steps of a monitored session with the hooks ``make_hooks()`` makes."""
    hooks = make_hooks()

    async def sample(n: int) -> Timing:
        async with session_type(TrivialCreator(), hooks) as session:
            elapsed = await _time_steps(session, n)
        return elapsed

    return sample


async def _time_steps(session: MonitoredSession | SingularMonitoredSession | ReferenceSession, n: int) -> Timing:
    """Time ``n`` steps of an open session: a stop check and ``await session.run()`` each."""
    gc.collect()
    start = clock()
    for _ in range(n):
        if session.should_stop():
            break
        await session.run()
    return timed(start)


def reference_step(make_hooks: HookFactory, *, copy_contexts: bool) -> Callable[[int], Coroutine[Any, Any, Timing]]:
    """``n`` steps of the reference step (``reference.py``) with the hooks ``make_hooks()`` makes."""
    hooks = make_hooks()

    async def sample(n: int) -> Timing:
        async with anyio.create_task_group() as tg:
            elapsed = await _time_steps(ReferenceSession(TrivialSession(), hooks, tg, copy_contexts=copy_contexts), n)
        return elapsed

    return sample


Probe = Callable[[], Coroutine[Any, Any, None]]


def probe_step(make_probe: Callable[[anyio.abc.TaskGroup], Probe]) -> Callable[[int], Coroutine[Any, Any, Timing]]:
    """The bare step plus ``await probe()``; ``make_probe`` gets a long-lived task group."""

    async def sample(n: int) -> Timing:
        session, flag = TrivialSession(), _StopFlag()
        keys: list[Hashable] = []
        feeds: dict[Hashable, Any] = {}
        options, metadata = RunOptions(), RunMetadata()
        async with anyio.create_task_group() as tg:
            probe = make_probe(tg)
            gc.collect()
            start = clock()
            for _ in range(n):
                if flag.stop:
                    break
                await probe()
                await session.run(keys, feeds, options, metadata)
            elapsed = timed(start)
            tg.cancel_scope.cancel()  # tasks a probe keeps parked
        return elapsed

    return sample


def _checkpoint(tg: anyio.abc.TaskGroup) -> Probe:
    """One event-loop round trip."""
    return anyio.lowlevel.checkpoint


def _one_task(tg: anyio.abc.TaskGroup) -> Probe:
    """Start one no-op task on a live task group and wait for it (an ``anyio.Event``)."""

    async def probe() -> None:
        done = anyio.Event()
        tg.start_soon(_set, done)
        await done.wait()

    return probe


async def _set(event: anyio.Event) -> None:
    event.set()


def _naive_groups(k: int) -> Callable[[anyio.abc.TaskGroup], Probe]:
    """The naive design: per phase, one task group with one task per suspend-once hook."""

    def make(tg: anyio.abc.TaskGroup) -> Probe:
        hooks = [SuspendOnce() for _ in range(k)]
        ctx = SessionRunContext(SessionRunArgs(), None)
        values = SessionRunValues(None, RunOptions(), RunMetadata(), 0)

        async def probe() -> None:
            async with anyio.create_task_group() as before:
                for hook in hooks:
                    before.start_soon(hook.before_run, ctx)
            async with anyio.create_task_group() as after:
                for hook in hooks:
                    after.start_soon(hook.after_run, ctx, values)

        return probe

    return make


def _tasks_for_waiters(k: int) -> Callable[[anyio.abc.TaskGroup], Probe]:
    """The floor of the in-place design for ``k`` suspend-once hooks: per phase, the
    first hook awaited in the calling task and ``k - 1`` started as tasks on the
    live task group, joined with one ``anyio.Event`` (no bookkeeping at all)."""

    def make(tg: anyio.abc.TaskGroup) -> Probe:
        hooks = [SuspendOnce() for _ in range(k)]
        ctx = SessionRunContext(SessionRunArgs(), None)
        values = SessionRunValues(None, RunOptions(), RunMetadata(), 0)
        state = {"pending": 0}

        async def child(coro: Coroutine[Any, Any, None], done: anyio.Event) -> None:
            await coro
            state["pending"] -= 1
            if state["pending"] == 0:
                done.set()

        async def phase(coros: list[Coroutine[Any, Any, None]]) -> None:
            done = anyio.Event()
            state["pending"] = len(coros) - 1
            for coro in coros[1:]:
                tg.start_soon(child, coro, done)
            await coros[0]
            if state["pending"]:
                await done.wait()

        async def probe() -> None:
            await phase([hook.before_run(ctx) for hook in hooks])
            await phase([hook.after_run(ctx, values) for hook in hooks])

        return probe

    return make


def _pooled_workers(k: int, contexts: bool = False, native: bool = False) -> Callable[[anyio.abc.TaskGroup], Probe]:
    """The floor of the pooled design for ``k`` suspend-once hooks: per phase, the first
    hook awaited in the calling task and ``k - 1`` handed to parked worker tasks, one
    ``anyio.Event`` to wake each and one to join (no error handling, no cancel scope).

    With ``contexts``, every hook runs in its own copied context as hookrun isolates hooks:
    started in place with ``Context.run`` and driven through a trampoline in it. With
    ``native``, the wake-ups are the backend's own (hookrun's ``Waker``: a bare future
    on asyncio, a rescheduled task on trio) instead of ``anyio.Event``."""

    def make(tg: anyio.abc.TaskGroup) -> Probe:
        new_event: Callable[[], Any] = waker_factory() if native else anyio.Event
        hooks = [SuspendOnce() for _ in range(k)]
        ctx = SessionRunContext(SessionRunArgs(), None)
        values = SessionRunValues(None, RunOptions(), RunMetadata(), 0)
        idle: list[list[Any]] = []  # [wake event, job]
        state: dict[str, Any] = {"pending": 0, "done": None}

        async def run(coro: Coroutine[Any, Any, None]) -> None:
            if not contexts:
                await coro
                return
            context = copy_context()
            try:
                yielded = context.run(coro.send, None)
            except StopIteration:
                return
            await drive(coro, context, yielded)

        async def worker(slot: list[Any]) -> None:
            while True:
                await run(slot[1])
                state["pending"] -= 1
                if state["pending"] == 0:
                    state["done"].set()
                slot[0] = new_event()
                idle.append(slot)
                await slot[0].wait()

        def hand(coro: Coroutine[Any, Any, None]) -> None:
            if idle:
                slot = idle.pop()
                slot[1] = coro
                slot[0].set()
            else:
                tg.start_soon(worker, [None, coro])

        async def phase(coros: list[Coroutine[Any, Any, None]]) -> None:
            state["done"] = new_event()
            state["pending"] = len(coros) - 1
            for coro in coros[1:]:
                hand(coro)
            await run(coros[0])
            if state["pending"]:
                await state["done"].wait()

        async def probe() -> None:
            await phase([hook.before_run(ctx) for hook in hooks])
            await phase([hook.after_run(ctx, values) for hook in hooks])

        return probe

    return make


def _sync_calls(k: int) -> Callable[[anyio.abc.TaskGroup], Probe]:
    """Call ``before_run`` and ``after_run`` of ``k`` plain hooks inline."""

    def make(tg: anyio.abc.TaskGroup) -> Probe:
        hooks = [PlainNoop() for _ in range(k)]
        ctx = SessionRunContext(SessionRunArgs(), None)
        values = SessionRunValues(None, RunOptions(), RunMetadata(), 0)

        async def probe() -> None:
            for hook in hooks:
                hook.before_run(ctx)
            for hook in hooks:
                hook.after_run(ctx, values)

        return probe

    return make


def _seq_await(k: int) -> Callable[[anyio.abc.TaskGroup], Probe]:
    """Await ``before_run`` and ``after_run`` of ``k`` async no-op hooks one after another."""

    def make(tg: anyio.abc.TaskGroup) -> Probe:
        hooks = [AsyncNoop() for _ in range(k)]
        ctx = SessionRunContext(SessionRunArgs(), None)
        values = SessionRunValues(None, RunOptions(), RunMetadata(), 0)

        async def probe() -> None:
            for hook in hooks:
                await hook.before_run(ctx)
            for hook in hooks:
                await hook.after_run(ctx, values)

        return probe

    return make


def _ctx_send(k: int) -> Callable[[anyio.abc.TaskGroup], Probe]:
    """Start ``2k`` async no-op hook coroutines in place, each in a copied context:
    ``copy_context().run(coro.send, None)`` until ``StopIteration`` (the eager design's floor)."""

    def make(tg: anyio.abc.TaskGroup) -> Probe:
        hooks = [AsyncNoop() for _ in range(k)]
        ctx = SessionRunContext(SessionRunArgs(), None)
        values = SessionRunValues(None, RunOptions(), RunMetadata(), 0)

        async def probe() -> None:
            for hook in hooks:
                coro = hook.before_run(ctx)
                try:
                    copy_context().run(coro.send, None)
                except StopIteration:
                    continue
            for hook in hooks:
                coro = hook.after_run(ctx, values)
                try:
                    copy_context().run(coro.send, None)
                except StopIteration:
                    continue

        return probe

    return make


def _async_floor(k: int) -> Callable[[anyio.abc.TaskGroup], Probe]:
    """The least a step of ``k`` async no-op hooks does with hookrun's guarantees, and no
    dispatcher: each phase's coroutines created and awaited in turn inside one coroutine,
    started in place in one copied context (each hook's context equal to the caller's),
    and, when a phase has a hook that may wait with another after it (one may wait
    while another fails), one cancel scope of the backend around both phases, entered
    before the first call: none for these no-op hooks, whose code has no ``await``.
    One hook a phase is started with ``send`` itself (no coroutine around it); no hook,
    nothing at all."""

    def make(tg: anyio.abc.TaskGroup) -> Probe:
        befores = [hook.before_run for hook in (AsyncNoop() for _ in range(k))]
        afters = [hook.after_run for hook in (AsyncNoop() for _ in range(k))]
        ctx = SessionRunContext(SessionRunArgs(), None)
        values = SessionRunValues(None, RunOptions(), RunMetadata(), 0)
        new_scope = scope_factory()

        async def before() -> None:
            for fn in befores:
                await fn(ctx)

        async def after() -> None:
            for fn in afters:
                await fn(ctx, values)

        def start(phase: Coroutine[Any, Any, None]) -> None:
            try:
                copy_context().run(phase.send, None)
            except StopIteration:
                return
            raise RuntimeError("a no-op hook suspended")  # pragma: no cover

        async def nothing() -> None:
            return None

        async def one() -> None:
            start(befores[0](ctx))
            start(afters[0](ctx, values))

        async def scoped() -> None:
            with new_scope():
                start(before())
                start(after())

        async def unscoped() -> None:
            start(before())
            start(after())

        waits = any(may_suspend(fn) for fn in befores[:-1] + afters[:-1])
        return nothing if k == 0 else one if k == 1 else scoped if waits else unscoped

    return make


def async_floor_case(k: int) -> Case:
    """``floor_async_K``: the bare step plus ``_async_floor(k)``."""
    return Case(f"floor_async_{k}", probe_step(_async_floor(k)))


def _sleep(tg: anyio.abc.TaskGroup) -> Probe:
    """One ``anyio.sleep(SLEEP)``: the concurrency floor."""

    async def probe() -> None:
        await anyio.sleep(SLEEP)

    return probe


# -- case lists ---------------------------------------------------------------------------


def hooked_name(kind: str, k: int) -> str:
    return f"{kind}_{k}"


def step_cases() -> list[Case]:
    """Every µs-scale case of one backend; all are compared with ``BASELINE``.

    A case is listed right next to the yardsticks it is divided by (the reference step,
    the suspend-once floors), so the pair is sampled seconds apart, not a round apart:
    this machine's speed drifts within a round, and the order only rotates between rounds.
    """
    cases = [Case(BASELINE, bare_step())]
    for kind in KINDS:
        for k in HOOK_COUNTS:
            cases.append(Case(hooked_name(kind, k), hooked_step(hooks_of(kind, k))))
            if kind != "suspend":
                cases.append(Case(f"ref_{kind}_{k}", reference_step(hooks_of(kind, k), copy_contexts=False)))
            if kind == "async":
                cases.append(Case(f"refctx_async_{k}", reference_step(hooks_of(kind, k), copy_contexts=True)))
            if kind == "suspend" and k == 10:
                cases += [
                    Case("probe_naive_tg_suspend_10", probe_step(_naive_groups(10))),
                    Case("probe_pool_suspend_10", probe_step(_pooled_workers(10))),
                    Case("probe_pool_ctx_suspend_10", probe_step(_pooled_workers(10, contexts=True))),
                    Case("probe_pool_native_suspend_10", probe_step(_pooled_workers(10, contexts=True, native=True))),
                    Case("probe_floor_suspend_10", probe_step(_tasks_for_waiters(10))),
                    Case("refctx_suspend_10", reference_step(hooks_of("suspend", 10), copy_contexts=True)),
                ]
    cases += [
        Case("fetch_async_10", hooked_step(fetch_hooks(10))),
        Case("ref_fetch_async_10", reference_step(fetch_hooks(10), copy_contexts=False)),
        Case("refctx_fetch_async_10", reference_step(fetch_hooks(10), copy_contexts=True)),
        Case("fetch_plain_10", hooked_step(fetch_hooks(10, plain=True))),
        Case("singular_async_0", hooked_step(hooks_of("async", 0), SingularMonitoredSession)),
        Case("singular_async_10", hooked_step(hooks_of("async", 10), SingularMonitoredSession)),
        Case("probe_checkpoint", probe_step(_checkpoint)),
        Case("probe_task", probe_step(_one_task)),
    ]
    for k in (10, 100):
        cases += [
            Case(f"probe_sync_calls_{k}", probe_step(_sync_calls(k))),
            Case(f"probe_seq_await_{k}", probe_step(_seq_await(k))),
            Case(f"probe_ctx_send_{k}", probe_step(_ctx_send(k))),
        ]
    return cases


def concurrency_cases(steps: int) -> list[Case]:
    """Hooks that sleep ``SLEEP`` seconds, and the single-sleep floor (fixed step counts)."""
    return [
        Case("floor_single_sleep", probe_step(_sleep), n=steps),
        Case("sleep_10", hooked_step(sleeping_hooks(10)), n=steps),
        Case("mixed_1_sleep_9_noop", hooked_step(sleeping_hooks(1, 9)), n=steps),
        Case("sleep_100", hooked_step(sleeping_hooks(100)), n=steps),
    ]
