"""The phase dispatcher: concurrency, ordering, errors, and what hooks may rely on inside a call."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from hookrun.testing import RecordingHook, ScriptedCreator

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def creator() -> ScriptedCreator:
    return ScriptedCreator({f"k{i}": i for i in range(10)} | {"shared": "s"})


class Barrier(SessionRunHook):
    """Waits in before_run until every member has started: only concurrency can finish."""

    def __init__(self, started: list[str], everyone: anyio.Event, size: int, name: str) -> None:
        self.started, self.everyone, self.size, self.name = started, everyone, size, name

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        self.started.append(self.name)
        if len(self.started) == self.size:
            self.everyone.set()
        await self.everyone.wait()
        return SessionRunArgs(f"k{int(self.name[1:])}")


async def test_before_run_hooks_run_concurrently() -> None:
    """K hooks that each wait for all K to have started finish one step (a sequential runtime deadlocks)."""
    started: list[str] = []
    everyone = anyio.Event()
    hooks = [Barrier(started, everyone, 5, f"h{i}") for i in range(5)]
    with anyio.fail_after(5):
        async with hookrun.MonitoredSession(creator(), hooks) as sess:
            await sess.run()
    assert sorted(started) == [f"h{i}" for i in range(5)]


async def test_k_hooks_waiting_take_one_delay_not_k() -> None:
    """Five hooks each waiting 50 ms on an event released once: all were waiting at the same time."""
    release = anyio.Event()
    waiting: list[int] = []

    class Waiter(SessionRunHook):
        def __init__(self, i: int) -> None:
            self.i = i

        async def before_run(self, run_context: SessionRunContext) -> None:
            waiting.append(self.i)
            await release.wait()

    async def releaser() -> None:
        await anyio.wait_all_tasks_blocked()
        assert len(waiting) == 5  # all five are suspended together before anything is released
        release.set()

    async with hookrun.MonitoredSession(creator(), [Waiter(i) for i in range(5)]) as sess:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(releaser)
                await sess.run()
    assert waiting == [0, 1, 2, 3, 4]


async def test_results_merged_in_list_order_whatever_completion_order() -> None:
    """Feeds and fetch results follow hook list order even when later hooks finish first."""
    order: list[str] = []
    gates = [anyio.Event() for _ in range(3)]

    class Late(SessionRunHook):
        def __init__(self, i: int) -> None:
            self.i = i
            self.name = f"late{i}"

        async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
            await gates[self.i].wait()
            order.append(self.name)
            if self.i > 0:
                gates[self.i - 1].set()
            return SessionRunArgs([f"k{self.i}", "shared"])

        async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            assert run_values.results == [self.i, "s"]

    gates[2].set()
    session_creator = creator()
    async with hookrun.MonitoredSession(session_creator, [Late(0), Late(1), Late(2)]) as sess:
        with anyio.fail_after(5):
            await sess.run("k9")
    assert order == ["late2", "late1", "late0"]
    fetched, _, _ = session_creator.sessions[0].runs[0]
    assert fetched == ["k9", "k0", "shared", "k1", "k2"]


async def test_hook_sets_contextvar_before_first_await_does_not_leak() -> None:
    """Each async hook runs in its own copy of the context, as a task would."""
    seen: list[str] = []

    class Setter(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            VAR.set("leaked")
            await anyio.lowlevel.checkpoint()

    class Reader(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            seen.append(VAR.get())
            await anyio.lowlevel.checkpoint()
            seen.append(VAR.get())

    async with hookrun.MonitoredSession(creator(), [Setter(), Reader(), Setter()]) as sess:
        await sess.run()
        await sess.run()
    assert seen == ["unset"] * 4
    assert VAR.get() == "unset"


async def test_cancel_scope_opened_before_first_suspension_works() -> None:
    """move_on_after/fail_after inside before_run keep working across the hook's suspensions."""
    outcomes: list[str] = []

    class Scoped(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            with anyio.move_on_after(0.01) as scope:
                await anyio.sleep_forever()
            outcomes.append(f"moved on: {scope.cancelled_caught}")
            with anyio.fail_after(5):
                await anyio.lowlevel.checkpoint()
            outcomes.append("fail_after ok")

    async with hookrun.MonitoredSession(creator(), [Scoped(), Scoped(), Scoped()]) as sess:
        with anyio.fail_after(5):
            await sess.run()
            await sess.run()
    assert sorted(outcomes) == ["fail_after ok"] * 6 + ["moved on: True"] * 6


async def test_hook_keeps_its_task_across_suspensions() -> None:
    """A started hook coroutine never moves to another task."""
    identities: list[tuple[int, int]] = []

    class Identity(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            first = anyio.get_current_task().id
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            identities.append((first, anyio.get_current_task().id))

    async with hookrun.MonitoredSession(creator(), [Identity() for _ in range(4)]) as sess:
        await sess.run()
    assert len(identities) == 4
    assert all(first == last for first, last in identities)


async def test_hooks_that_do_not_suspend_run_in_the_callers_task() -> None:
    """No task is made for hooks that finish without suspending."""
    tasks: list[int] = []

    class Quick(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            tasks.append(anyio.get_current_task().id)

    async with hookrun.MonitoredSession(creator(), [Quick() for _ in range(3)]) as sess:
        await sess.run()
        assert set(tasks) == {anyio.get_current_task().id}


async def test_earliest_hook_error_wins_others_attached_as_notes() -> None:
    """Two failing hooks: the earlier hook's error propagates unwrapped, the later one is a note."""
    later_failed = anyio.Event()

    class FailsLater(SessionRunHook):
        name = "first"

        async def before_run(self, run_context: SessionRunContext) -> None:
            await later_failed.wait()
            raise ValueError("first hook")

    class FailsFirst(SessionRunHook):
        name = "second"

        async def before_run(self, run_context: SessionRunContext) -> None:
            await anyio.lowlevel.checkpoint()
            later_failed.set()
            raise KeyError("second hook")

    hooks = [FailsLater(), FailsFirst()]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        for _ in range(2):  # the first step learns; the second runs under a cancel scope
            later_failed = anyio.Event()
            with pytest.raises(ValueError, match="first hook") as info:
                with anyio.fail_after(5):
                    await sess.run()
            assert any("second" in note and "KeyError" in note for note in info.value.__notes__)
        await sess.aclose()


async def test_a_failing_hook_cancels_its_waiting_siblings() -> None:
    """Once a phase has suspended before, a failure cancels every other hook of the phase."""
    cancelled: list[str] = []
    started: list[str] = []
    fail = False

    class Waits(SessionRunHook):
        def __init__(self, name: str) -> None:
            self.name = name

        async def before_run(self, run_context: SessionRunContext) -> None:
            if fail:
                started.append(self.name)
            try:
                await anyio.sleep(0 if not fail else 60)
            except anyio.get_cancelled_exc_class():
                cancelled.append(self.name)
                raise

    class Fails(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            await anyio.lowlevel.checkpoint()
            if fail:
                raise RuntimeError("boom")

    async with hookrun.MonitoredSession(creator(), [Waits("a"), Fails(), Waits("b")]) as sess:
        await sess.run()  # every hook suspends once: the phase learns it needs a scope
        fail = True
        with anyio.fail_after(5), pytest.raises(RuntimeError, match="boom"):
            await sess.run()
        await sess.aclose()
    # Every hook that started in the failing step was cancelled (one started after the
    # failure is never started at all, depending on the backend's scheduling).
    assert "a" in started
    assert sorted(cancelled) == sorted(started)


async def test_exception_before_first_await_follows_the_error_rule() -> None:
    """A hook failing before it suspends stops later hooks from starting; earlier ones finish."""
    log: list[tuple[str, str]] = []
    hooks = [
        RecordingHook("a", log=log),
        RecordingHook("b", raises={"before_run": LookupError("sync failure")}, log=log),
        RecordingHook("c", log=log),
    ]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        with pytest.raises(LookupError, match="sync failure"):
            await sess.run()
        await sess.aclose()
    assert ("a", "before_run") in log
    assert ("c", "before_run") not in log
    assert all(phase != "after_run" for _, phase in log)


async def test_sync_hooks_are_called_inline() -> None:
    """Plain-function hooks run inline, in the caller's task, in list order."""
    calls: list[tuple[str, int]] = []

    class Plain(SessionRunHook):
        def __init__(self, name: str) -> None:
            self.name = name

        def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
            calls.append((self.name, anyio.get_current_task().id))
            return SessionRunArgs("k1")

        def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            assert run_values.results == 1

    async with hookrun.MonitoredSession(creator(), [Plain("x"), Plain("y")]) as sess:
        await sess.run()
        me = anyio.get_current_task().id
    assert calls == [("x", me), ("y", me)]


async def test_hook_timeout_names_hook_phase_and_limit() -> None:
    """A hook call over hook_timeout is cancelled and HookTimeoutError names hook, phase and limit."""

    class Slow(SessionRunHook):
        name = "slowpoke"

        async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            await anyio.sleep_forever()

    async with hookrun.MonitoredSession(creator(), [Slow()], hook_timeout=0.02) as sess:
        with anyio.fail_after(5), pytest.raises(hookrun.HookTimeoutError, match=r"slowpoke.*0\.02.*after_run") as info:
            await sess.run()
        await sess.aclose()
    assert info.value.phase == "after_run" and info.value.limit == 0.02


async def test_trace_records_one_span_per_hook_call_and_run() -> None:
    """RunOptions(trace=True) fills run_metadata.timings with every hook call and the run."""
    hooks = [RecordingHook("a"), RecordingHook("b")]
    metadata = hookrun.RunMetadata()
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        await sess.run(options=hookrun.RunOptions(trace=True), run_metadata=metadata)
    spans = sorted((t.phase, t.name) for t in metadata.timings)
    assert spans == [("after_run", "a"), ("after_run", "b"), ("before_run", "a"), ("before_run", "b"), ("run", "run")]
    assert all(t.end >= t.start for t in metadata.timings)


async def test_sync_method_returning_a_coroutine_is_a_type_error() -> None:
    """A plain def that returns an awaitable is rejected with a message naming the hook."""

    class Confused(SessionRunHook):
        def before_run(self, run_context: SessionRunContext) -> Any:
            async def later() -> None:
                return None

            return later()

    async with hookrun.MonitoredSession(creator(), [Confused()]) as sess:
        with pytest.raises(TypeError, match="Confused: before_run is a plain function but returned an awaitable"):
            await sess.run()
        await sess.aclose()


class Checkpointing(SessionRunHook):
    """Suspends once in each phase; fails in before_run while ``fail`` is set."""

    fail = False

    async def before_run(self, run_context: SessionRunContext) -> None:
        await anyio.lowlevel.checkpoint()
        if self.fail:
            raise RuntimeError("checkpointing hook failed")

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await anyio.lowlevel.checkpoint()


async def test_worker_tasks_are_reused_not_accumulated() -> None:
    """Hooks that wait reuse parked worker tasks: at most one per waiting hook, over many steps."""
    hooks = [Checkpointing() for _ in range(5)]
    baseline = len(anyio.get_running_tasks())
    bound = baseline + 1 + 5  # the coordinator's host task + one worker per waiting hook
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        for _ in range(50):
            await sess.run()
            assert len(anyio.get_running_tasks()) <= bound
    assert len(anyio.get_running_tasks()) == baseline


async def test_failing_phase_retires_workers_and_the_session_keeps_working() -> None:
    """After a phase fails and cancels its workers, later steps get fresh workers and succeed."""
    hooks = [Checkpointing() for _ in range(4)]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        await sess.run()
        hooks[2].fail = True
        with anyio.fail_after(5), pytest.raises(RuntimeError, match="checkpointing hook failed"):
            await sess.run()
        hooks[2].fail = False
        with anyio.fail_after(5):
            for _ in range(3):
                assert await sess.run("k1") == 1


class Logging(SessionRunHook):
    """Logs its start and end in before_run, waiting ``checkpoints`` times in between;
    fails before its first wait while ``fail`` is set."""

    def __init__(self, log: list[str], i: int, checkpoints: int = 3) -> None:
        self.log, self.i, self.checkpoints = log, i, checkpoints
        self.fail = False

    async def before_run(self, run_context: SessionRunContext) -> None:
        self.log.append(f"start {self.i}")
        if self.fail:
            raise RuntimeError(f"hook {self.i} failed before waiting")
        for _ in range(self.checkpoints):
            await anyio.lowlevel.checkpoint()
        self.log.append(f"end {self.i}")


async def test_hooks_that_waited_last_step_all_start_at_once() -> None:
    """Once a phase has seen its hooks wait, the next step wakes enough workers at once:
    every hook starts (in list order) before the first one finishes its three waits.
    Handing on from one worker to the next would take an event-loop pass per hook."""
    log: list[str] = []
    hooks = [Logging(log, i) for i in range(8)]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        await sess.run()  # learns that 8 hooks wait
        for _ in range(3):
            log.clear()
            await sess.run()
            starts = [entry for entry in log if entry.startswith("start")]
            assert starts == [f"start {i}" for i in range(8)]
            assert log.index("start 7") < min(log.index(f"end {i}") for i in range(8)), log


async def test_workers_woken_for_nothing_park_again() -> None:
    """A step where fewer hooks wait than last time: the spare workers find nothing to do."""
    log: list[str] = []
    hooks = [Logging(log, i) for i in range(6)]
    baseline = len(anyio.get_running_tasks())
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        await sess.run()
        await sess.run()
        for hook in hooks[1:]:
            hook.checkpoints = 0
        for _ in range(3):
            log.clear()
            assert await sess.run("k2") == 2
            assert sorted(log) == sorted([f"start {i}" for i in range(6)] + [f"end {i}" for i in range(6)])
            assert len(anyio.get_running_tasks()) <= baseline + 1 + 6  # host + a worker per hook
    assert len(anyio.get_running_tasks()) == baseline


async def test_a_hook_failing_before_it_waits_stops_later_starts_despite_workers_woken_ahead() -> None:
    """Workers are already on their way when hook 2 fails before waiting: hooks 3.. never start."""
    log: list[str] = []
    hooks = [Logging(log, i) for i in range(6)]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        await sess.run()
        await sess.run()
        hooks[2].fail = True
        log.clear()
        with anyio.fail_after(5), pytest.raises(RuntimeError, match="hook 2 failed before waiting"):
            await sess.run()
        assert [entry for entry in log if entry.startswith("start")] == ["start 0", "start 1", "start 2"]
        hooks[2].fail = False
        with anyio.fail_after(5):
            assert await sess.run("k3") == 3


async def test_hooks_started_by_workers_see_the_callers_current_context() -> None:
    """A hook started after a sibling waited runs on a pooled worker task; it must still see
    the context variables the caller has now, as a task spawned now would, not those the
    worker had when it was created some steps ago."""
    seen: list[tuple[int, str]] = []

    class Reader(SessionRunHook):
        def __init__(self, i: int, waits: bool) -> None:
            self.i, self.waits = i, waits

        async def before_run(self, run_context: SessionRunContext) -> None:
            if self.waits:
                await anyio.lowlevel.checkpoint()
            seen.append((self.i, VAR.get()))

    class PlainReader(SessionRunHook):
        def before_run(self, run_context: SessionRunContext) -> None:
            seen.append((9, VAR.get()))

    hooks = [Reader(0, True), Reader(1, True), Reader(2, False), PlainReader(), Reader(3, True)]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        for step in range(25):  # past the runs after which a quiet phase drops its scope
            VAR.set(f"step {step}")
            seen.clear()
            await sess.run()
            assert sorted(seen) == [(0, f"step {step}"), (1, f"step {step}"), (2, f"step {step}"),
                                    (3, f"step {step}"), (9, f"step {step}")]


async def test_hooks_that_never_wait_are_isolated_from_each_others_context_changes() -> None:
    """The steady-state path (no hook waits, no scope) shares one copied context between
    hooks only while none changes it: a hook that sets or resets a variable is never seen
    by the next, nor by the caller, also with plain functions in between."""
    seen: list[tuple[str, str]] = []

    class Setter(SessionRunHook):
        def __init__(self, name: str) -> None:
            self.name = name

        async def before_run(self, run_context: SessionRunContext) -> None:
            seen.append((self.name, VAR.get()))
            VAR.set(f"set by {self.name}")

    class Reader(SessionRunHook):
        def __init__(self, name: str) -> None:
            self.name = name

        async def before_run(self, run_context: SessionRunContext) -> None:
            seen.append((self.name, VAR.get()))

    class SetAndReset(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            token = VAR.set("temporary")
            VAR.reset(token)
            seen.append(("reset", VAR.get()))

    class PlainReader(SessionRunHook):
        def before_run(self, run_context: SessionRunContext) -> None:
            seen.append(("plain", VAR.get()))

    hooks = [Reader("r0"), Setter("s1"), Reader("r2"), SetAndReset(), Reader("r4"), Setter("s5"),
             PlainReader(), Setter("s7"), Reader("r8")]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        for step in range(40):  # well past the quiet runs after which the phase runs unscoped
            caller_value = f"caller {step}"
            VAR.set(caller_value)
            seen.clear()
            await sess.run()
            assert seen == [(name, caller_value) for name in ("r0", "s1", "r2", "reset", "r4", "s5", "plain", "s7", "r8")]
            assert VAR.get() == caller_value


async def test_a_failing_phase_leaves_no_more_workers_than_hooks() -> None:
    """Workers woken ahead that had not started when a sibling failed are not retired:
    they park again, so a step right after a failure does not add tasks beside them."""
    log: list[str] = []
    hooks = [Logging(log, i) for i in range(5)]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        await sess.run()
        await sess.run()  # 5 hooks waited: 5 workers are woken at once from now on
        for attempt in range(20):
            hooks[1].fail = attempt % 2 == 0
            with anyio.fail_after(5), contextlib.suppress(RuntimeError):
                await sess.run()
            workers = sum(task.name == "hookrun hook worker" for task in anyio.get_running_tasks())
            assert workers <= len(hooks), f"{workers} workers for {len(hooks)} hooks after attempt {attempt}"


async def test_cancelled_phases_never_leave_more_workers_than_hooks_wait() -> None:
    """The caller is cancelled right after waking workers, again and again: workers that
    were running hooks retire, those that had not started are taken back into the pool,
    and the count never grows past one worker per waiting hook."""
    log: list[str] = []
    hooks = [Logging(log, i) for i in range(5)]
    seen: list[int] = []

    def workers() -> int:
        return sum(task.name == "hookrun hook worker" for task in anyio.get_running_tasks())

    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        await sess.run()
        await sess.run()  # 5 hooks waited: 5 workers are woken at once from now on
        for _ in range(10):
            with anyio.move_on_after(0):  # cancelled at the caller's first wait
                await sess.run()
            seen.append(workers())
            await sess.run()
            seen.append(workers())
        assert all(log.count(f"end {i}") >= 2 for i in range(5))
    assert max(seen) <= len(hooks), seen


async def test_a_hook_that_waits_stays_in_the_task_that_started_it_and_later_steps_start_in_place() -> None:
    """The first async hook always starts in the caller's task and, if it waits, is driven
    there; the hooks after it start on workers. Once the hooks stop waiting, every hook
    runs in the caller's task again, and a variable a hook sets never reaches the caller."""
    tasks: list[int] = []

    class SometimesWaits(SessionRunHook):
        waits = True

        async def before_run(self, run_context: SessionRunContext) -> None:
            VAR.set("set by a hook")
            if self.waits:
                await anyio.lowlevel.checkpoint()
            tasks.append(anyio.get_current_task().id)

    hooks = [SometimesWaits() for _ in range(4)]
    async with hookrun.MonitoredSession(creator(), hooks) as sess:
        me = anyio.get_current_task().id
        VAR.set("caller")
        for _ in range(3):
            tasks.clear()
            await sess.run()
            assert len(tasks) == 4 and tasks.count(me) == 1  # the first in the caller, the rest on workers
            assert VAR.get() == "caller"
        for hook in hooks:
            hook.waits = False
        for _ in range(20):
            tasks.clear()
            await sess.run()
            assert tasks == [me] * 4
            assert VAR.get() == "caller"


@pytest.mark.parametrize("quiet_steps", [1, 20, 100])
async def test_a_hook_waiting_for_the_first_time_is_cancelled_when_a_sibling_fails(quiet_steps: int) -> None:
    """After many quiet steps, a hook that waits for the first time (inside a cancel scope of
    its own) while a sibling fails is cancelled at once, and run() raises the sibling's error."""
    armed_at = quiet_steps + 1
    cancelled: list[int] = []

    class Waiter(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            if run_context.global_step + 1 == armed_at:
                try:
                    with anyio.move_on_after(3600):
                        await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    cancelled.append(run_context.global_step)
                    raise

    class Failer(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            if run_context.global_step + 1 == armed_at:
                await anyio.lowlevel.checkpoint()
                raise ValueError("sibling failed")

    async with hookrun.MonitoredSession(creator(), [Waiter(), Failer()]) as sess:
        for _ in range(quiet_steps):
            await sess.run()
        with anyio.fail_after(5), pytest.raises(ValueError, match="sibling failed"):
            await sess.run()
    assert cancelled == [quiet_steps]


@pytest.mark.parametrize("caller_cancelled", [True, False], ids=["caller-too", "workers-only"])
async def test_workers_cancelled_from_outside_never_return_partial_results(caller_cancelled: bool) -> None:
    """The workers' task group is cancelled from outside while the calling task drives a
    hook: the phase never returns results with calls missing. When the caller is inside
    the cancelled scope it ends with that cancellation; when it is not, with a clear error."""
    from hookrun._dispatch._dispatcher import Dispatcher

    started = anyio.Event()
    release = anyio.Event()

    class Driven:
        async def before_run(self, run_context: object) -> SessionRunArgs:
            await release.wait()
            return SessionRunArgs("x")

    class OnWorker:
        async def before_run(self, run_context: object) -> SessionRunArgs:
            started.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    outcome: list[object] = []

    async def run_phase(dispatcher: Dispatcher) -> None:
        plan = dispatcher.plans["before_run"]
        with dispatcher.new_scope() as scope:
            try:
                started_phase = dispatcher.start(plan, [("ctx",)] * 2, scope)
                outcome.append(started_phase if isinstance(started_phase, list) else await started_phase)
            except RuntimeError as exc:
                outcome.append(exc)

    with anyio.fail_after(5):
        if caller_cancelled:
            async with anyio.create_task_group() as tg:
                dispatcher = Dispatcher([Driven(), OnWorker()], task_group=lambda: tg)
                tg.start_soon(run_phase, dispatcher)
                await started.wait()
                tg.cancel_scope.cancel()  # the workers and the caller's task alike
            assert outcome == []  # cancelled: neither results nor an error
        else:
            async with anyio.create_task_group() as caller:
                async with anyio.create_task_group() as workers:
                    dispatcher = Dispatcher([Driven(), OnWorker()], task_group=lambda: workers)
                    caller.start_soon(run_phase, dispatcher)
                    await started.wait()
                    workers.cancel_scope.cancel()  # only the workers' scope
                release.set()
            assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError), outcome
            assert "interrupted" in str(outcome[0])
