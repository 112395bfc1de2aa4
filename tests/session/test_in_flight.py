"""Steps in flight (``max_in_flight=N``): order of the hook phases, numbers, back-pressure,
``iterate`` ordered and not, stopping exactly, the hooks refused, statistics."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    MonitoredSession,
    MonitoredTrainingSession,
    RunAfterStopError,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
    StatisticsOptions,
    StepSession,
)
from hookrun.hooks import LoggingTensorHook, StopAtStepHook, on_after_run
from tests.session._in_flight_support import GatedCreator, Gates, Recorder, feeds, release_in_order

pytestmark = pytest.mark.anyio


# -- order --------------------------------------------------------------------------------


async def test_after_run_comes_in_step_order_when_runs_complete_out_of_order() -> None:
    """Runs ending 3rd, 2nd, 1st: after_run still comes for steps 1, 2, 3, and results in feed order."""
    gates, hook = Gates(), Recorder()
    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=3) as sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [2, 1, 0], 3)
        with anyio.fail_after(10):
            results = [r async for r in sess.iterate("y", feeds(3))]
    assert gates.finished == [2, 1, 0]
    assert results == [0, 1, 2]
    assert hook.steps("before") == [0, 1, 2]
    assert hook.steps("after") == [1, 2, 3]
    assert hook.calls.index(("before", 2)) < hook.calls.index(("after", 1))  # really overlapping


async def test_unordered_iterate_yields_as_runs_complete() -> None:
    """ordered=False yields each result when its run ends; after_run still comes in step order."""
    gates, hook = Gates(), Recorder()
    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=3) as sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [2, 0, 1], 3)
        with anyio.fail_after(10):
            results = [r async for r in sess.iterate("y", feeds(3), ordered=False)]
    assert results == [2, 0, 1]
    assert hook.steps("after") == [1, 2, 3]


async def test_one_hook_phase_at_a_time_with_many_overlapping_steps() -> None:
    """Runs of up to 4 steps overlap, hook phases never do (the recorder asserts it), every step once."""
    gates, hook = Gates(), Recorder()
    gates.open_all = True
    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=4) as sess:
        with anyio.fail_after(10):
            results = [r async for r in sess.iterate("y", feeds(20))]
            async with anyio.create_task_group() as tg:
                for i in range(20, 30):
                    tg.start_soon(sess.run, "y", {"i": i})
    assert results == list(range(20))
    assert hook.steps("after") == list(range(1, 31))
    assert sorted(hook.steps("before")) == list(range(30))
    assert hook.steps("create") == [0, 1, 2, 3]


async def test_numbers_are_given_at_admission_unique_and_increasing() -> None:
    """Each step's number is fixed when it is admitted: before_run sees n - 1, after_run n, in order."""
    gates, hook = Gates(), Recorder()
    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=2) as sess:
        async with anyio.create_task_group() as tg:
            tg.start_soon(release_in_order, gates, [1, 0, 3, 2], 2)
            with anyio.fail_after(10):
                assert [r async for r in sess.iterate("y", feeds(4))] == [0, 1, 2, 3]
        assert await sess.global_step() == 4
    assert hook.steps("before") == [0, 1, 2, 3]
    assert hook.steps("after") == [1, 2, 3, 4]


# -- back-pressure ---------------------------------------------------------------------------


async def test_the_call_after_n_waits_for_a_free_lane() -> None:
    """With N = 2 the third concurrent run() waits (no error) until a lane is free."""
    gates = Gates()
    async with MonitoredSession(GatedCreator(gates), max_in_flight=2) as sess:
        done: list[int] = []

        async def one(i: int) -> None:
            done.append(await sess.run("y", {"i": i}))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(one, i)
                await anyio.wait_all_tasks_blocked()
                first = list(gates.started)
                assert len(first) == 2  # the third waits for a lane
                assert done == []
                gates.open(*first)
                await anyio.wait_all_tasks_blocked()
                assert len(gates.started) == 3  # a lane came free: the third runs
                assert sorted(done) == sorted(first)
                gates.open(*gates.started)
    assert sorted(done) == [0, 1, 2]


# -- stopping --------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["last_step", "num_steps"])
async def test_stop_at_step_runs_exactly_the_steps_up_to_the_last_one_with_8_lanes(how: str) -> None:
    """StopAtStepHook with N = 8: exactly 5 raw runs, never one more, then end."""
    gates, hook = Gates(), Recorder()
    gates.open_all = True
    creator = GatedCreator(gates)
    stop = StopAtStepHook(last_step=5) if how == "last_step" else StopAtStepHook(num_steps=5)
    async with MonitoredSession(creator, [stop, hook], max_in_flight=8) as sess:
        with anyio.fail_after(10):
            results = [r async for r in sess.iterate("y", feeds(100))]
        assert sess.should_stop()
        assert await sess.global_step() == 5
    assert results == [0, 1, 2, 3, 4]
    assert sorted(gates.started) == [0, 1, 2, 3, 4]
    assert hook.steps("after") == [1, 2, 3, 4, 5]
    assert hook.ends == 1


async def test_stop_at_step_with_concurrent_run_callers() -> None:
    """Eight tasks calling run(): exactly last_step raw runs; the others hear RunAfterStopError."""
    gates = Gates()
    gates.open_all = True
    refused: list[int] = []
    async with MonitoredSession(GatedCreator(gates), [StopAtStepHook(last_step=7)], max_in_flight=4) as sess:

        async def loop(start: int) -> None:
            for i in range(start, start + 100, 8):
                try:
                    await sess.run("y", {"i": i})
                except RunAfterStopError:
                    refused.append(i)
                    return

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for start in range(8):
                    tg.start_soon(loop, start)
        assert await sess.global_step() == 7
    assert len(gates.started) == 7
    assert len(refused) == 8


async def test_a_stop_drains_the_steps_in_flight() -> None:
    """A stop requested in after_run of step 1: steps 2 and 3, already admitted, still finish."""
    gates, hook = Gates(), Recorder()

    class StopAtFirst(SessionRunHook):
        overlapping_steps = True

        def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            run_context.request_stop()

    async with MonitoredSession(GatedCreator(gates), [StopAtFirst(), hook], max_in_flight=3) as sess, anyio.create_task_group() as tg:
        tg.start_soon(release_in_order, gates, [0, 1, 2], 3)
        with anyio.fail_after(10):
            results = [r async for r in sess.iterate("y", feeds(10))]
    assert results == [0, 1, 2]
    assert hook.steps("after") == [1, 2, 3]
    assert hook.ends == 1


async def test_a_clean_stop_error_of_one_step_stops_admission_and_yields_nothing_for_it() -> None:
    """Step 2 finds its input exhausted: the steps in flight are yielded, nothing more is admitted."""
    from hookrun import OutOfRangeError

    gates, hook = Gates(), Recorder()
    creator = GatedCreator(gates, errors={1: {1: OutOfRangeError("no more")}})
    async with MonitoredSession(creator, [hook], max_in_flight=3) as sess:
        async with anyio.create_task_group() as tg:
            # Step 1 ends first, so step 4 (feed 3) is admitted before step 2 meets the end.
            tg.start_soon(release_in_order, gates, [0, 1, 2, 3], 3)
            with anyio.fail_after(10):
                results = [r async for r in sess.iterate("y", feeds(10))]
        assert sess.should_stop()
    assert results == [0, 2, 3]
    assert gates.started == [0, 1, 2, 3]
    # Numbers are fixed at admission: the steps after the one given up keep theirs.
    assert hook.steps("after") == [1, 3, 4]
    assert hook.ends == 1


# -- the argument and the hooks refused --------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [(0, ValueError, "max_in_flight must be at least 1, got 0"), (-3, ValueError, "at least 1, got -3"),
     (True, TypeError, "max_in_flight must be an int of at least 1, got True"), (2.0, TypeError, "got 2.0"),
     ("4", TypeError, "got '4'"), (2**70, ValueError, "max_in_flight=1180591620717411303424 is more than 1,048,576"),
     (2**20 + 1, ValueError, "is more than 1,048,576 lanes")],
)
def test_bad_max_in_flight_is_refused_naming_the_argument(value: Any, error: type[Exception], match: str) -> None:
    """Below 1, past the most lanes, a bool or a non-int: an error naming max_in_flight and
    the value, before anything is built."""
    for cls in (MonitoredSession, SingularMonitoredSession):
        with pytest.raises(error, match=match):
            cls(lambda: StepSession(lambda feed: {}), max_in_flight=value)


def test_a_hook_that_does_not_declare_overlapping_steps_is_refused() -> None:
    """A hook without overlapping_steps = True is refused at construction, named, with what to check."""

    class PerStep(SessionRunHook):
        def before_run(self, run_context: SessionRunContext) -> None:
            self.started = run_context.global_step

    class Duck:
        def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            pass

    creator = GatedCreator(Gates())
    for hook in (PerStep(), Duck()):
        with pytest.raises(TypeError, match=r"max_in_flight=2\): hooks\[1\] \(\w+\) does not declare overlapping_steps = True"):
            MonitoredSession(creator, [Recorder(), hook], max_in_flight=2)
        with pytest.raises(TypeError, match="keeps no per-step state on itself from before_run to after_run"):
            SingularMonitoredSession(creator, [hook], max_in_flight=3)
        MonitoredSession(creator, [hook])  # one lane: accepted as before


def test_safe_builtin_and_function_hooks_are_accepted() -> None:
    """Built-in hooks made safe and function hooks declare overlapping_steps."""
    from hookrun import in_thread, sequential
    from hookrun.hooks import NanTensorHook, ProfilerHook, StepCounterHook, SummarySaverHook

    @on_after_run
    def seen(run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        pass

    summaries = SummarySaverHook(save_steps=10, summary_writer=_NoWriter(), scalars=["y"])
    hooks = [StopAtStepHook(last_step=3), NanTensorHook("loss"), StepCounterHook(), seen,
             sequential(Recorder(), seen), in_thread(NanTensorHook("loss")),
             LoggingTensorHook(["y"], every_n_iter=1), summaries, ProfilerHook(save_steps=10)]
    MonitoredSession(GatedCreator(Gates()), hooks, max_in_flight=4)
    with pytest.raises(TypeError, match="sequential"):
        MonitoredSession(GatedCreator(Gates()), [sequential(Recorder(), SessionRunHook())], max_in_flight=2)


class _NoWriter:
    def add_scalar(self, tag: str, value: float, step: int) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_monitored_training_session_takes_max_in_flight() -> None:
    """MonitoredTrainingSession passes max_in_flight on (its default hooks without a directory are safe)."""
    sess = MonitoredTrainingSession(lambda: StepSession(lambda feed: {}), max_in_flight=3)
    assert sess.max_in_flight == 3
    with pytest.raises(ValueError, match="max_in_flight must be at least 1"):
        MonitoredTrainingSession(lambda: StepSession(lambda feed: {}), max_in_flight=0)


# -- statistics and the step function ------------------------------------------------------


async def test_statistics_stay_exact_with_overlapping_steps() -> None:
    """Counts, every hook call timed once, and the lanes' occupancy."""
    gates, hook = Gates(), Recorder()
    options = StatisticsOptions(sample_every=1)

    async def hold_four_then_open() -> None:
        # Four runs held in flight for a while: the occupancy is then close to 4 whatever
        # the machine's load does to the quick steps around them.
        while len(gates.started) < 4:
            await anyio.wait_all_tasks_blocked()
        await anyio.sleep(0.3)
        gates.open_all = True
        gates.open(*range(12))

    async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=4, statistics=options) as sess:
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_four_then_open)
            with anyio.fail_after(10):
                assert len([r async for r in sess.iterate("y", feeds(12))]) == 12
        stats = sess.statistics()
    assert (stats.steps, stats.failed_steps, stats.sessions_created, stats.recoveries) == (12, 0, 4, 0)
    assert stats.hook("Recorder", "before_run").calls == 12
    assert stats.hook("Recorder", "after_run").calls == 12
    assert stats.hook("Recorder", "before_run").latency.count == 12
    assert stats.hook("Recorder", "after_run").latency.count == 12
    assert stats.run.count == 12
    assert 2.0 < stats.mean_in_flight <= 4.0
    assert "steps in flight on average" in stats.format()


async def test_one_lane_has_an_occupancy_figure_too() -> None:
    """With max_in_flight=1 mean_in_flight is a number: 0.0 before any step, then the share
    of the time a step ran (at most 1.0), which round() takes as a user's progress line does."""
    async with MonitoredSession(lambda: StepSession(lambda feed: {})) as sess:
        assert sess.statistics().mean_in_flight == 0.0
        for _ in range(5):
            await sess.run()
        share = sess.statistics().mean_in_flight
        assert isinstance(share, float) and 0.0 < share <= 1.0
        assert round(share, 2) <= 1.0
        assert "steps in flight on average" in str(sess.statistics())


async def test_the_occupancy_counts_runs_never_more_than_the_lanes() -> None:
    """One slow run holds its lane while the others return and wait for their after_run
    (up to 2 N steps admitted): mean_in_flight counts the lanes occupied, at most N."""
    from hookrun.testing import MockClock

    clock = MockClock()
    slow = anyio.Event()

    class OneSlow:
        async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
            if feed_dict["i"] == 0:
                await slow.wait()
            return [feed_dict["i"] for _ in fetches]

    async def hold_then_release() -> None:
        await anyio.wait_all_tasks_blocked()  # the others returned: 4 steps admitted, 1 lane busy
        clock.jump(10.0)
        slow.set()

    async with MonitoredSession(OneSlow, max_in_flight=2, statistics=StatisticsOptions(clock=clock)) as sess:
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_then_release)
            with anyio.fail_after(10):
                got = [r async for r in sess.iterate("y", ({"i": i} for i in range(4)))]
        mean = sess.statistics().mean_in_flight
    assert got == [0, 1, 2, 3]
    assert 0.9 <= mean <= 1.1  # one lane held for all that time, not the four steps waiting


async def test_lanes_report_zero_in_flight_before_any_step() -> None:
    """With lanes, mean_in_flight is 0.0 until the first step begins."""
    async with MonitoredSession(lambda: StepSession(lambda feed: {}), max_in_flight=3) as sess:
        assert sess.statistics().mean_in_flight == 0.0


async def test_run_step_fn_runs_on_one_free_lane() -> None:
    """run_step_fn with N > 1: its context has a lane's session; run_with_hooks is a full step."""
    gates, hook = Gates(), Recorder()
    gates.open_all = True
    creator = GatedCreator(gates)
    async with MonitoredSession(creator, [hook], max_in_flight=2) as sess:

        async def step_fn(ctx: Any) -> Any:
            assert ctx.session in creator.sessions
            return await ctx.run_with_hooks("y", {"i": 7})

        with anyio.fail_after(10):
            assert await sess.run_step_fn(step_fn) == 7
            assert await sess.run("y", {"i": 8}) == 8
    assert hook.steps("after") == [1, 2]


async def test_ordered_must_be_a_bool_and_means_nothing_with_one_lane() -> None:
    """iterate(ordered=...) is checked; with one lane both orders are the step order; aclose ends it."""
    async with MonitoredSession(lambda: StepSession(lambda feed: {"y": feed["i"]})) as sess:
        with pytest.raises(TypeError, match=r"iterate\(\): ordered must be True or False, got 'no'"):
            sess.iterate("y", feeds(2), ordered="no")  # type: ignore[arg-type]
        assert [r async for r in sess.iterate("y", feeds(3), ordered=False)] == [0, 1, 2]
        it = sess.iterate("y", feeds(3))
        assert await it.__anext__() == 0
        await it.aclose()
        with pytest.raises(StopAsyncIteration):
            await it.__anext__()
    async with MonitoredSession(lambda: StepSession(lambda feed: {}), max_in_flight=2) as sess:
        with pytest.raises(TypeError, match=r"iterate\(\): ordered must be True or False, got 1"):
            sess.iterate(None, feeds(2), ordered=1)  # type: ignore[arg-type]


class AsyncWork(SessionRunHook):
    """50 µs of work a call on a mock clock: timing a step is a small share of it."""

    overlapping_steps = True

    def __init__(self, clock: Any) -> None:
        self.clock = clock

    async def before_run(self, run_context: SessionRunContext) -> None:
        self.clock.jump(5e-5)

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.clock.jump(5e-5)


async def test_adaptive_sampling_reads_a_steps_time_as_shared_by_the_steps_in_flight() -> None:
    """With 8 steps in flight a step lasts about 8 steps' time: 1.5 ms steps with ten async
    hooks are timed about as rarely as one at a time (not every one, nor in bursts of 8)."""
    from hookrun.testing import MockClock

    clock = MockClock()

    class Timed:
        async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
            clock.jump(0.0015)
            for _ in range(10):  # a run that lasts a while: the other lanes' steps overlap it
                await anyio.lowlevel.checkpoint()
            return list(fetches)

    options = StatisticsOptions(clock=clock)
    hooks = [AsyncWork(clock) for _ in range(10)]
    async with MonitoredSession(Timed, hooks, max_in_flight=8, statistics=options) as sess:
        with anyio.fail_after(10):
            assert len([r async for r in sess.iterate("y", [None] * 400)]) == 400
        stats = sess.statistics()
    assert stats.mean_in_flight > 6
    share = stats.sampled_steps / stats.steps
    # One at a time about one step in five is timed; read as not shared, nearly every one.
    assert 1 / 16 <= share <= 1 / 3, share


async def test_a_timed_step_is_read_as_shared_by_the_steps_in_flight_over_its_life() -> None:
    """Runs that end in bursts (eight at a time) leave fewer steps in flight at each one's end
    than shared its time: the statistics read the mean over the step's life, so 1.5 ms steps
    are still timed rarely, not nearly every one."""
    from hookrun.testing import MockClock

    clock = MockClock()
    waiting: list[anyio.Event] = []

    class Burst:
        async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
            clock.jump(0.0015)
            gate = anyio.Event()
            waiting.append(gate)
            if len(waiting) == 8:  # the eighth run in flight lets all eight end together
                for other in waiting:
                    other.set()
                waiting.clear()
            await gate.wait()
            return list(fetches)

    options = StatisticsOptions(clock=clock)
    hooks = [AsyncWork(clock) for _ in range(10)]
    async with MonitoredSession(Burst, hooks, max_in_flight=8, statistics=options) as sess:
        with anyio.fail_after(10):
            assert len([r async for r in sess.iterate("y", [None] * 400)]) == 400
        stats = sess.statistics()
    share = stats.sampled_steps / stats.steps
    assert 1 / 16 <= share <= 1 / 3, share
