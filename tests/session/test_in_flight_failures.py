"""Steps in flight when things go wrong: per-lane recovery, a non-recoverable error,
cancellation, a close from another task, a lane lost under a restoring creator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    AbortedError,
    ChiefSessionCreator,
    MonitoredSession,
    RetryPolicy,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
)
from hookrun.hooks import CheckpointSaverHook
from tests.session._in_flight_support import (
    FailsOnce,
    GatedCreator,
    Gates,
    Recorder,
    WaitsOnce,
    release_in_order,
)

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0, jitter=False)


def feeds(n: int) -> list[dict[str, int]]:
    return [{"i": i} for i in range(n)]


def tasks_now() -> int:
    return len([task for task in anyio.get_running_tasks() if task.name != "hookrun hook worker"])


async def test_recovery_is_per_lane_and_the_other_lanes_keep_running() -> None:
    """Step 2's lane fails: that lane alone is re-created while step 3 runs on; step 2 re-runs with its number."""
    gates, hook = Gates(), Recorder()
    creator = GatedCreator(gates, errors={1: {1: AbortedError("preempted")}})
    recreated = anyio.Event()
    original = creator.create_session

    async def create() -> Any:
        if len(creator.sessions) == 3:  # the re-creation: the other lanes are still running
            assert creator.sessions[0].closed == creator.sessions[2].closed == 0
            assert 2 in gates.started and 2 not in gates.finished
            recreated.set()
        return await original()

    creator.create_session = create  # type: ignore[method-assign]
    async with MonitoredSession(creator, [hook], retry=NO_WAIT, max_in_flight=3) as sess:
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_in_order, gates, [1], 3)
            with anyio.fail_after(10):
                it = sess.iterate("y", feeds(3))
                results: list[int] = []

                async def consume() -> None:
                    results.extend([r async for r in it])

                tg.start_soon(consume)
                await recreated.wait()
                gates.open(0, 2)
        stats = sess.statistics()
    assert results == [0, 1, 2]
    assert [s.closed for s in creator.sessions] == [1, 1, 1, 1]
    assert creator.sessions[3].runs == [1]  # the step re-ran on its re-created lane
    assert hook.steps("before") == [0, 1, 2, 1]  # re-run: before_run again, same number
    assert hook.steps("after") == [1, 2, 3]
    assert hook.steps("create") == [0, 1, 2, 3]
    assert (stats.steps, stats.failed_steps, stats.recoveries, stats.sessions_created) == (3, 1, 1, 4)


async def test_a_singular_session_does_not_recover_a_lane() -> None:
    """SingularMonitoredSession with lanes: a recoverable error propagates and cancels the others."""
    gates = Gates()
    creator = GatedCreator(gates, errors={1: {1: AbortedError("preempted")}})
    async with SingularMonitoredSession(creator, max_in_flight=3) as sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [1], 3)
        with anyio.fail_after(10), pytest.raises(AbortedError, match="preempted"):
            async for _ in sess.iterate("y", feeds(3)):
                pass
    assert len(creator.sessions) == 3


async def test_a_non_recoverable_error_cancels_the_other_steps_and_propagates() -> None:
    """Step 2 raises ValueError: steps 1 and 3 (still running) are cancelled; iterate raises it."""
    gates, hook = Gates(), Recorder()
    creator = GatedCreator(gates, errors={1: {1: ValueError("bad batch")}})
    with pytest.raises(ValueError, match="bad batch"):
        async with MonitoredSession(creator, [hook], max_in_flight=3) as sess:
            async with anyio.create_task_group() as tg:
                tg.start_soon(release_in_order, gates, [1], 3)
                with anyio.fail_after(10), pytest.raises(ValueError) as caught:
                    async for _ in sess.iterate("y", feeds(3)):
                        pass
            raise caught.value
    assert sorted(gates.started) == [0, 1, 2]
    assert sorted(gates.finished) == [1]  # the others were cancelled in their runs
    assert hook.steps("after") == []
    assert [s.closed for s in creator.sessions] == [1, 1, 1]
    assert hook.ends == 0 and len(hook.exceptions) == 1


async def test_concurrent_run_callers_of_cancelled_steps_hear_why() -> None:
    """A run() caller whose step was cancelled by another step's error gets a RuntimeError from it."""
    gates = Gates()
    creator = GatedCreator(gates, errors={1: {1: ValueError("bad batch")}})
    errors: list[BaseException] = []
    async with MonitoredSession(creator, max_in_flight=2) as sess:

        async def one(i: int) -> None:
            try:
                await sess.run("y", {"i": i})
            except Exception as exc:
                errors.append(exc)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 0)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(one, 1)
                await anyio.wait_all_tasks_blocked()
                gates.open(1)
        with anyio.fail_after(10):  # still usable afterwards
            gates.open(5)
            assert await sess.run("y", {"i": 5}) == 5
    kinds = sorted(type(exc).__name__ for exc in errors)
    assert kinds == ["RuntimeError", "ValueError"]
    cancelled = next(exc for exc in errors if type(exc) is RuntimeError)
    assert isinstance(cancelled.__cause__, ValueError)
    assert "another step in flight failed with ValueError('bad batch')" in str(cancelled)


async def test_cancelling_the_iterating_task_cancels_every_run_and_leaves_no_task() -> None:
    """Cancel the caller of iterate(): the runs in flight are cancelled, each lane's session closed once."""
    gates, hook = Gates(), Recorder()
    creator = GatedCreator(gates)
    baseline = tasks_now()

    async def cancel_when_running() -> None:
        while len(gates.started) < 3:
            await anyio.wait_all_tasks_blocked()
        scope.cancel()

    with anyio.CancelScope() as scope:
        async with MonitoredSession(creator, [hook], max_in_flight=3) as sess, anyio.create_task_group() as tg:
            tg.start_soon(cancel_when_running)
            with anyio.fail_after(10):
                async for _ in sess.iterate("y", feeds(10)):
                    pass
    assert scope.cancelled_caught
    assert tasks_now() == baseline
    assert gates.finished == []
    assert [s.closed for s in creator.sessions] == [1, 1, 1]
    assert hook.steps("after") == [] and hook.ends == 0 and len(hook.exceptions) == 1


async def test_cancelling_every_run_caller_leaves_no_task() -> None:
    """Cancel every task awaiting run(): their runs stop, the session still works, then closes each lane once."""
    gates = Gates()
    creator = GatedCreator(gates)
    baseline = tasks_now()
    async with MonitoredSession(creator, max_in_flight=3) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(sess.run, "y", {"i": i})
                while len(gates.started) < 3:
                    await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
            assert not sess._busy
            gates.open(9)
            assert await sess.run("y", {"i": 9}) == 9
    assert tasks_now() == baseline
    assert [s.closed for s in creator.sessions] == [1, 1, 1]


async def test_a_close_from_another_task_waits_for_the_steps_in_flight() -> None:
    """aclose() from another task: the steps in flight finish (after_run in order), then end."""
    gates, hook = Gates(), Recorder()
    creator = GatedCreator(gates)
    results: list[int] = []
    sess = MonitoredSession(creator, [hook], max_in_flight=3)

    async def one(i: int) -> None:
        results.append(await sess.run("y", {"i": i}))

    async with sess, anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(one, i)
        while len(gates.started) < 3:
            await anyio.wait_all_tasks_blocked()
        tg.start_soon(sess.aclose)
        await anyio.wait_all_tasks_blocked()
        assert hook.ends == 0  # waiting for the steps in flight
        gates.open(2, 0, 1)
    assert sorted(results) == [0, 1, 2]
    assert hook.steps("after") == [1, 2, 3]
    assert hook.ends == 1
    assert [s.closed for s in creator.sessions] == [1, 1, 1]


class Counted(SessionRunHook):
    """A checkpointable hook counting its after_run calls: a restore would roll it back."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.count = 0
        self.loaded: list[int] = []

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.count += 1

    def state_dict(self) -> dict[str, int]:
        return {"count": self.count}

    def load_state_dict(self, state: Any) -> None:
        self.loaded.append(state["count"])
        self.count = state["count"]


class Stateful:
    """A checkpointable raw session; the first run fed 5 loses its lane (once)."""

    made: ClassVar[list[Stateful]] = []
    lost: ClassVar[bool] = False

    def __init__(self) -> None:
        self.index = len(Stateful.made)
        Stateful.made.append(self)
        self.runs = 0
        self.loaded: list[object] = []

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        await anyio.lowlevel.checkpoint()
        if feed_dict.get("i") == 5 and not Stateful.lost:
            Stateful.lost = True
            raise AbortedError("lane lost")
        self.runs += 1
        return [feed_dict.get("i") for _ in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"runs": self.runs}

    def load_state_dict(self, state: Any) -> None:
        self.loaded.append(dict(state))


async def test_a_lane_lost_mid_run_under_a_restoring_creator_rolls_nothing_back(tmp_path: Path) -> None:
    """A restoring creator restores the counter and hooks once, at entry; a lane re-created mid-run
    restores its raw session's own state from the latest checkpoint, never the counter or the hooks."""
    Stateful.made, Stateful.lost = [], False
    counted, seen = Counted(), Recorder()
    saver = CheckpointSaverHook(checkpoint_dir=tmp_path, save_steps=2)
    creator = ChiefSessionCreator(Stateful, checkpoint_dir=tmp_path)
    async with MonitoredSession(creator, [saver, counted, seen], retry=NO_WAIT, max_in_flight=3) as sess:
        with anyio.fail_after(20):
            assert [r async for r in sess.iterate("y", feeds(12))] == list(range(12))
        assert await sess.global_step() == 12
    assert seen.steps("after") == list(range(1, 13))  # the counter never went back
    assert counted.count == 12 and counted.loaded == []  # nothing restored into the hooks
    assert len(Stateful.made) == 4
    replacement = Stateful.made[3]
    assert len(replacement.loaded) == 1  # its own state, from the latest checkpoint
    # A second run restores the counter and the hooks once, at entry, from the last checkpoint.
    Stateful.made = []
    again = Counted()
    resumed = ChiefSessionCreator(Stateful, checkpoint_dir=tmp_path)
    async with MonitoredSession(resumed, [CheckpointSaverHook(checkpoint_dir=tmp_path, save_steps=2), again],
                                max_in_flight=3) as sess:
        assert await sess.global_step() == 12
    assert again.loaded == [12]


async def test_a_checkpoint_saved_in_after_run_is_a_consistent_cut(tmp_path: Path) -> None:
    """Runs ending out of order, a checkpoint at every after_run: each holds its step and the
    hooks' state after exactly that many steps, whatever was still in flight."""
    from hookrun import Checkpointer

    gates, counted = Gates(), Counted()
    saver = CheckpointSaverHook(checkpoint_dir=tmp_path, save_steps=1, max_to_keep=None)
    sess = MonitoredSession(GatedCreator(gates), [saver, counted], max_in_flight=3)
    async with sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [2, 1, 0, 4, 3, 5], 3)
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate("y", feeds(6))] == list(range(6))
    checkpointer = Checkpointer(tmp_path)
    infos = checkpointer.all()
    assert [info.step for info in infos] == [0, 1, 2, 3, 4, 5, 6]
    for info in infos:
        restored = await checkpointer.restore(info.path)
        assert restored is not None
        assert restored.state["global_step"] == info.step
        (hook_state,) = [state for key, state in restored.state["hooks"].items() if "Counted" in key]
        assert hook_state == {"count": info.step}  # the hooks saw exactly the steps up to it


async def test_a_recoverable_error_in_after_run_re_runs_the_step_with_its_number() -> None:
    """after_run of step 2 raises AbortedError: its lane is re-created, the step re-run; the
    counter moves once for it and the steps after it wait, in order."""
    from hookrun.testing import FaultyHook

    gates, hook = Gates(), Recorder()
    gates.open_all = True
    creator = GatedCreator(gates)
    faulty = FaultyHook("after_run", AbortedError("lost in after_run"), at=1)
    async with MonitoredSession(creator, [hook, faulty], retry=NO_WAIT, max_in_flight=3) as sess:
        with anyio.fail_after(10):
            assert [r async for r in sess.iterate("y", feeds(5))] == list(range(5))
        assert await sess.global_step() == 5
    assert hook.steps("after") == [1, 2, 2, 3, 4, 5]  # step 2's after_run again, same number
    assert hook.steps("before").count(1) == 2  # its before_run again, with the same number
    assert len(creator.sessions) == 4


async def test_a_hook_error_at_admission_cancels_the_steps_in_flight() -> None:
    """before_run of the third step raises: the two steps in flight are cancelled, iterate raises it."""
    from hookrun.testing import FaultyHook

    gates, hook = Gates(), Recorder()
    creator = GatedCreator(gates)
    faulty = FaultyHook("before_run", ValueError("bad hook"), at=2)
    with pytest.raises(ValueError, match="bad hook"):
        async with MonitoredSession(creator, [hook, faulty], max_in_flight=3) as sess:
            with anyio.fail_after(10):
                async for _ in sess.iterate("y", feeds(5)):
                    pass
    assert sorted(gates.started) == [0, 1]
    assert gates.finished == []
    assert hook.steps("after") == []
    assert [s.closed for s in creator.sessions] == [1, 1, 1]


async def test_run_step_fn_is_called_again_on_its_lanes_new_session() -> None:
    """A step function failing with a recoverable error: its lane is re-created, the function called again."""
    gates = Gates()
    gates.open_all = True
    creator = GatedCreator(gates)
    sessions: list[Any] = []
    async with MonitoredSession(creator, retry=NO_WAIT, max_in_flight=2) as sess:

        async def step_fn(ctx: Any) -> Any:
            sessions.append(ctx.session)
            if len(sessions) == 1:
                raise AbortedError("lost")
            return await ctx.run_with_hooks("y", {"i": 3})

        with anyio.fail_after(10):
            assert await sess.run_step_fn(step_fn) == 3
    assert sessions[0] is creator.sessions[0] and sessions[1] is creator.sessions[2]
    assert creator.sessions[0].closed == 1


async def test_creating_a_lane_at_entry_is_retried() -> None:
    """A recoverable error creating the second lane's session is retried per the policy."""
    from hookrun import UnavailableError

    gates = Gates()
    creator = GatedCreator(gates)
    original = creator.create_session
    failures = [UnavailableError("not yet")]

    async def create() -> Any:
        if len(creator.sessions) == 1 and failures:
            raise failures.pop()
        return await original()

    creator.create_session = create  # type: ignore[method-assign]
    async with MonitoredSession(creator, retry=NO_WAIT, max_in_flight=2) as sess:
        assert sess.statistics().sessions_created == 2
    assert failures == []


async def test_a_recoverable_error_in_a_lanes_coordinator_re_creates_that_lane() -> None:
    """A background task of lane 0's coordinator fails recoverably: the next step on that lane re-creates it."""
    gates = Gates()
    gates.open_all = True
    creator = GatedCreator(gates)

    class Keep(SessionRunHook):
        overlapping_steps = True

        def __init__(self) -> None:
            self.coords: list[Any] = []

        def after_create_session(self, session: Any, coord: Any) -> None:
            self.coords.append(coord)

    keep = Keep()

    async def fail() -> None:
        raise AbortedError("background task lost its connection")

    async with MonitoredSession(creator, [keep], retry=NO_WAIT, max_in_flight=2) as sess:
        keep.coords[0].start_soon(fail)
        await anyio.wait_all_tasks_blocked()
        assert not sess.should_stop()  # recoverable: the lane is re-created, nothing stops
        with anyio.fail_after(10):
            assert [await sess.run("y", {"i": i}) for i in range(2)] == [0, 1]
        assert len(keep.coords) == 3 and not sess.should_stop()
        keep.coords[-1].request_stop()  # the re-created lane's own coordinator: a stop at once
        assert sess.should_stop()
    assert len(creator.sessions) == 3
    assert [s.closed for s in creator.sessions] == [1, 1, 1]
    assert creator.sessions[0].runs == []  # its lane was re-created before running a step


@pytest.mark.parametrize("how", ["cancel step 1 in its run", "cancel step 2 waiting for its turn", "step 2 fails"])
async def test_a_step_cancelled_or_failed_passes_its_turn_on(how: str) -> None:
    """Steps 2-4 (or 3-4) ran and wait for their turn when one step is cancelled or fails:
    its turn passes on, the steps after it have their after_run in order, none stalls."""
    from hookrun import OutOfRangeError

    gates, hook = Gates(), Recorder()
    fails = how == "step 2 fails"
    creator = GatedCreator(gates, errors={k: {1: OutOfRangeError("no more")} for k in range(4)} if fails else None)
    lost = 0 if how.startswith("cancel step 1") else 1
    results: dict[int, Any] = {}
    scopes = [anyio.CancelScope() for _ in range(4)]
    async with MonitoredSession(creator, [hook], max_in_flight=4) as sess:

        async def one(i: int) -> None:
            with scopes[i]:
                try:
                    results[i] = await sess.run("y", {"i": i})
                except OutOfRangeError as exc:
                    results[i] = exc

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(one, i)
                    await anyio.wait_all_tasks_blocked()  # step i + 1 is feed i
                gates.open(1, 2, 3)
                await anyio.wait_all_tasks_blocked()
                assert sorted(gates.finished) == [1, 2, 3]
                assert hook.steps("after") == []  # every one of them waits for step 1
                if not fails:
                    scopes[lost].cancel()
                    await anyio.wait_all_tasks_blocked()
                gates.open(0)
        assert await sess.global_step() == 4  # past the number given up
    assert hook.steps("before") == [0, 1, 2, 3]
    assert hook.steps("after") == [n for n in (1, 2, 3, 4) if n != lost + 1]  # numbers fixed at admission
    assert sorted(results) == sorted({0, 1, 2, 3} - ({lost} if not fails else set()))
    assert [results[i] for i in (0, 2, 3) if i != lost] == [i for i in (0, 2, 3) if i != lost]
    if fails:
        assert isinstance(results[1], OutOfRangeError)
    else:
        assert scopes[lost].cancelled_caught


@pytest.mark.parametrize("phase", ["before_run", "after_run"])
@pytest.mark.parametrize("mode", ["iterate", "run"])
async def test_a_hook_failing_beside_a_waiting_one_is_recovered_from(phase: str, mode: str) -> None:
    """A hook fails while an earlier one of the same phase waits: the waiting one is
    cancelled, the lane is re-created and the step re-runs to its end (the phase ran under
    the step's cancel scope, which that failure cancelled; the recovery runs under a new one)."""
    gates = Gates()
    gates.open_all = True
    creator = GatedCreator(gates)
    waits, fails = WaitsOnce(phase), FailsOnce(phase)
    async with MonitoredSession(creator, [waits, fails], retry=NO_WAIT, max_in_flight=2) as sess:
        with anyio.fail_after(10):
            if mode == "iterate":
                results = [r async for r in sess.iterate("y", feeds(4))]
            else:
                results = [await sess.run("y", feed) for feed in feeds(4)]
    assert results == [0, 1, 2, 3]
    assert waits.cancelled == 1 and fails.failed
    assert len(creator.sessions) == 3  # two lanes, one re-created
    assert sess.statistics().steps >= 4


async def _error_into(errors: list[BaseException], call: Callable[..., Awaitable[Any]], *args: Any) -> None:
    """Await ``call(*args)`` in a task of its own, keeping the error it raises in ``errors``."""
    try:
        await call(*args)
    except Exception as exc:
        errors.append(exc)


@pytest.mark.parametrize("error", ["not recoverable", "retries used up"])
async def test_run_step_fn_error_it_does_not_recover_from_propagates_and_cancels_the_others(error: str) -> None:
    """A step function's error that is not recovered from (not recoverable, or the retry
    budget is spent) propagates from ``run_step_fn`` and cancels the step in flight beside it."""
    gates = Gates()  # the other step's run waits at its gate until cancelled
    creator = GatedCreator(gates)
    retry = RetryPolicy(initial_delay=0, jitter=False, max_attempts=1) if error == "retries used up" else NO_WAIT
    raised: BaseException = ValueError("bad batch") if error == "not recoverable" else AbortedError("lost again")
    calls = 0
    async with MonitoredSession(creator, retry=retry, max_in_flight=2) as sess:

        async def step_fn(ctx: Any) -> Any:
            nonlocal calls
            calls += 1
            while 0 not in gates.started:  # the other step's raw run has started
                await anyio.lowlevel.checkpoint()
            raise raised

        other: list[BaseException] = []

        async def other_step() -> None:
            await _error_into(other, sess.run, "y", {"i": 0})

        got: list[BaseException] = []
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(other_step)
                tg.start_soon(_error_into, got, sess.run_step_fn, step_fn)
    assert got == [raised]
    assert calls == 1
    assert len(other) == 1 and isinstance(other[0], RuntimeError) and other[0].__cause__ is raised
    assert gates.finished == []


async def test_run_step_fn_cancelled_by_another_steps_fatal_error_says_so() -> None:
    """Another step in flight fails with a non-recoverable error while a step function
    waits: the function is cancelled and ``run_step_fn`` raises a ``RuntimeError`` caused
    by that error."""
    gates = Gates()
    gates.open_all = True
    boom = ValueError("boom")
    creator = GatedCreator(gates, errors={0: {0: boom}, 1: {0: boom}})
    cancelled = []
    got: list[BaseException] = []
    async with MonitoredSession(creator, retry=NO_WAIT, max_in_flight=2) as sess:

        holding = anyio.Event()

        async def step_fn(ctx: Any) -> Any:
            holding.set()  # it holds its lane
            try:
                await anyio.sleep(5)
            except anyio.get_cancelled_exc_class():
                cancelled.append(True)
                raise

        async def failing_step() -> None:
            await holding.wait()
            await _error_into(got, sess.run, "y", {"i": 0})

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_error_into, got, sess.run_step_fn, step_fn)
                tg.start_soon(failing_step)
    assert cancelled == [True]
    assert boom in got
    [cancellation] = [exc for exc in got if exc is not boom]
    assert isinstance(cancellation, RuntimeError) and cancellation.__cause__ is boom
    assert "another step in flight failed" in str(cancellation)


async def test_run_with_hooks_after_a_stop_request_with_lanes_is_refused() -> None:
    """Inside ``run_step_fn`` with lanes, ``run_with_hooks`` after ``request_stop`` is refused, saying why."""
    from hookrun import RunAfterStopError

    gates = Gates()
    gates.open_all = True
    async with MonitoredSession(GatedCreator(gates), retry=NO_WAIT, max_in_flight=2) as sess:

        async def step_fn(ctx: Any) -> Any:
            ctx.request_stop()
            return await ctx.run_with_hooks("y", {"i": 1})

        with anyio.fail_after(10), pytest.raises(RunAfterStopError, match="requested stop"):
            await sess.run_step_fn(step_fn)
    assert gates.started == []
