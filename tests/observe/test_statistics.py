"""MonitoredSession.statistics(): counts, histograms, recovery, failing hooks, the slow-hook
warning, turning it off, the step_context extension point and the log records' fields."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    MonitoredSession,
    RetryPolicy,
    SessionRunHook,
    SingularMonitoredSession,
    StatisticsOptions,
)
from hookrun._observe import _statistics
from hookrun._observe._histogram import Histogram
from hookrun._session._stepping import general_step, scoped_step
from hookrun.testing import MockClock

pytestmark = pytest.mark.anyio

EVERY_STEP = StatisticsOptions(sample_every=1)


class Session:
    """Runs return the keys; ``fail_at`` lists run numbers (1-based) that raise ``error``."""

    def __init__(self, fail_at: tuple[int, ...] = (), error: type[Exception] = hookrun.UnavailableError) -> None:
        self.runs = 0
        self.fail_at, self.error = fail_at, error

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        self.runs += 1
        if self.runs in self.fail_at:
            raise self.error(f"run {self.runs} lost")
        return list(fetches)


class Creator:
    def __init__(self, **session: Any) -> None:
        self.shared = Session(**session)
        self.created = 0

    async def create_session(self) -> Session:
        self.created += 1
        return self.shared


class Noop(SessionRunHook):
    async def before_run(self, run_context: Any) -> None:
        return None

    def after_run(self, run_context: Any, run_values: Any) -> None:
        return None


class FailsAt(SessionRunHook):
    """after_run raises at the given global step (after the step)."""

    def __init__(self, step: int) -> None:
        self.step = step

    async def after_run(self, run_context: Any, run_values: Any) -> None:
        if run_values.global_step == self.step:
            raise ValueError("bad value")


class Waits(SessionRunHook):
    """before_run moves the mock clock on by ``seconds`` (a deterministic duration)."""

    def __init__(self, clock: MockClock, seconds: float, name: str) -> None:
        self.clock, self.seconds, self.name = clock, seconds, name

    async def before_run(self, run_context: Any) -> None:
        await anyio.lowlevel.checkpoint()
        self.clock.jump(self.seconds)


class WaitsPlain(SessionRunHook):
    """A plain before_run that moves the mock clock on by ``seconds``."""

    def __init__(self, clock: MockClock, seconds: float, name: str) -> None:
        self.clock, self.seconds, self.name = clock, seconds, name

    def before_run(self, run_context: Any) -> None:
        self.clock.jump(self.seconds)


def test_histogram_quantiles_are_close_and_fixed_size() -> None:
    hist = Histogram()
    size = len(hist.buckets)
    for i in range(1, 1001):
        hist.add(i * 1e-6)  # 1 us .. 1 ms
    assert len(hist.buckets) == size and hist.count == 1000
    latency = hist.latency()
    assert latency.max == pytest.approx(1e-3)
    assert latency.p50 == pytest.approx(500e-6, rel=0.13)
    assert latency.p90 == pytest.approx(900e-6, rel=0.13)
    assert latency.p99 == pytest.approx(990e-6, rel=0.13)
    assert latency.mean == pytest.approx(500.5e-6)
    assert Histogram().latency().p50 is None


async def test_counts_and_latency_of_every_hook_and_phase() -> None:
    hooks = [Noop(), Noop()]
    async with MonitoredSession(Creator(), hooks, statistics=EVERY_STEP) as sess:
        for _ in range(5):
            await sess.run(["x"])
        stats = sess.statistics()
    assert stats.steps == 5 and stats.failed_steps == 0
    assert stats.sessions_created == 1 and stats.recoveries == 0
    assert stats.sampled_steps == 5 and stats.step.count == 5 and stats.run.count == 5
    assert [(h.index, h.hook, h.phase, h.calls, h.errors) for h in stats.hooks] == [
        (0, "Noop", "before_run", 5, 0), (0, "Noop", "after_run", 5, 0),
        (1, "Noop", "before_run", 5, 0), (1, "Noop", "after_run", 5, 0),
    ]
    assert all(h.latency.count == 5 and h.latency.p99 is not None for h in stats.hooks)
    table = stats.format()
    assert "5 steps (0 failed)" in table and "#1 Noop.after_run" in table and str(stats) == table
    with pytest.raises(dataclasses_frozen()):
        stats.steps = 3  # type: ignore[misc]


class TimedSession:
    """Each run moves the mock clock on by ``seconds``: a step of a known duration."""

    def __init__(self, clock: MockClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        self.clock.jump(self.seconds)
        return list(fetches)


class AsyncNoop(SessionRunHook):
    async def before_run(self, run_context: Any) -> None:
        return None

    async def after_run(self, run_context: Any, run_values: Any) -> None:
        return None


class Costs(SessionRunHook):
    """A plain before_run that moves the mock clock on by ``seconds``: a hook of a known cost."""

    def __init__(self, clock: MockClock, seconds: float) -> None:
        self.clock, self.seconds = clock, seconds

    def before_run(self, run_context: Any) -> None:
        if self.seconds:
            self.clock.jump(self.seconds)


async def sampled_share(step_seconds: float, hooks: int, hook_seconds: float = 0.0, steps: int = 600) -> float:
    """The share of ``steps`` steps that adaptive sampling timed: each step's run takes
    ``step_seconds``, each of its ``hooks`` hooks ``hook_seconds``."""
    clock = MockClock()
    session = TimedSession(clock, step_seconds)

    async def create() -> TimedSession:
        return session

    options = StatisticsOptions(clock=clock)
    async with MonitoredSession(create, [Costs(clock, hook_seconds) for _ in range(hooks)], statistics=options) as sess:
        for _ in range(steps):
            await sess.run()
        stats = sess.statistics()
    assert stats.steps == steps
    return stats.sampled_steps / steps


async def test_adaptive_sampling_times_slow_hooks_always_and_cheap_ones_rarely() -> None:
    """Hooks that do real work are timed on every step; no-op hooks, or none, at most one
    step in 256, however long the steps (the timing would cost more than the hooks)."""
    assert await sampled_share(0.05, hooks=10, hook_seconds=1e-3) == 1.0
    for step_seconds in (1e-6, 0.0015, 0.05):
        for hooks in (0, 10):
            share = await sampled_share(step_seconds, hooks=hooks, steps=2560)
            assert share == pytest.approx(1 / 256, abs=1 / 2560), (step_seconds, hooks)


@pytest.mark.parametrize("hook_seconds", [3e-6, 5e-6, 2e-5])
async def test_adaptive_sampling_keeps_the_timing_within_a_tenth_of_what_the_hooks_add(hook_seconds: float) -> None:
    """On a millisecond step that waits, ten hooks are timed often enough to be seen and
    rarely enough that the timing (as modelled) costs at most a tenth of what they add."""
    share = await sampled_share(0.0015, hooks=10, hook_seconds=hook_seconds, steps=2560)
    cost = _statistics._COST_BASE + 10 * _statistics._COST_PER_CALL
    assert share * cost <= 0.1 * 10 * hook_seconds * 1.1, share  # the gaps are random: 10 % over, at most
    assert share >= 1 / 300


@pytest.mark.parametrize("every", [10, 64])
async def test_adaptive_sampling_does_not_keep_missing_a_hook_that_works_every_n_steps(every: int) -> None:
    """A hook that works on one step in ``every`` (as ``every_n_steps`` hooks do) and
    costs nothing otherwise: with random gaps, some of its working steps are timed (with
    gaps of a fixed 256, never: the timed steps would all fall on the same residues)."""
    clock = MockClock()
    session = TimedSession(clock, 0.001)

    class Periodic(SessionRunHook):
        def before_run(self, run_context: Any) -> None:
            if run_context.global_step % every == every - 1:  # not the first step, always timed
                clock.jump(0.05)

    async def create() -> TimedSession:
        return session

    async with MonitoredSession(create, [Periodic()], statistics=StatisticsOptions(clock=clock)) as sess:
        for _ in range(4 * 256 * every):  # about four timed steps expected on working ones
            await sess.run()
        stats = sess.statistics()
    assert stats.hook("Periodic", "before_run").latency.max == pytest.approx(0.05)


async def test_adaptive_sampling_times_costlier_hooks_more_often_and_short_steps_less() -> None:
    """Twice what the hooks add: about twice the steps timed; the same hooks on steps so
    short that timing would take more than half a percent of them: fewer."""
    share = await sampled_share(0.0015, hooks=10, hook_seconds=5e-6)
    assert await sampled_share(0.0015, hooks=10, hook_seconds=1e-5) > 1.5 * share
    assert await sampled_share(1e-5, hooks=10, hook_seconds=5e-6) < share / 2


@pytest.mark.parametrize("steps", [1, 150, 400])
async def test_every_timed_call_is_in_the_record_before_and_after_a_batch_is_folded(steps: int) -> None:
    """Durations are folded into the histograms in batches: a snapshot taken after one
    step, mid-batch or past several batches counts every timed call, and the latencies
    are the clock's."""
    clock = MockClock()
    session = TimedSession(clock, 0.002)

    async def create() -> TimedSession:
        return session

    options = StatisticsOptions(sample_every=1, clock=clock)
    hooks = [Costs(clock, 1e-4), Costs(clock, 3e-4), Noop()]
    async with MonitoredSession(create, hooks, statistics=options) as sess:
        for _ in range(steps):
            await sess.run()
        stats = sess.statistics()
        await sess.run()
        again = sess.statistics()
    assert 400 * 6 > 2 * _statistics._FOLD > 150 * 6  # six records a step: within a batch, past two
    for record, n in ((stats, steps), (again, steps + 1)):
        assert record.step.count == record.run.count == record.sampled_steps == n
        assert all(h.latency.count == n for h in record.hooks)
        assert max(h.latency.max or 0.0 for h in record.hooks if h.hook == "Costs") == pytest.approx(3e-4)
        assert record.run.max == pytest.approx(0.002) and record.step.max == pytest.approx(0.0024)


def dataclasses_frozen() -> type[Exception]:
    import dataclasses

    return dataclasses.FrozenInstanceError


async def test_sampling_counts_every_step_but_times_some() -> None:
    async with MonitoredSession(Creator(), [Noop()], statistics=StatisticsOptions(sample_every=4)) as sess:
        for _ in range(9):
            await sess.run()
        stats = sess.statistics()
    assert stats.steps == 9 and stats.hook("Noop", "before_run").calls == 9
    assert stats.sampled_steps == 3  # steps 1, 5, 9
    assert stats.hook("Noop", "before_run").latency.count == 3


async def test_a_recovery_and_a_failing_hook() -> None:
    creator = Creator(fail_at=(3,))
    hooks = [Noop(), FailsAt(step=4)]
    async with MonitoredSession(
        creator, hooks, retry=RetryPolicy(initial_delay=0.0, jitter=False), statistics=EVERY_STEP
    ) as sess:
        for _ in range(3):
            await sess.run()  # the third run fails once, recovers, runs again
        with pytest.raises(ValueError, match="bad value"):
            await sess.run()
        await sess.run()
        stats = sess.statistics()
    assert creator.created == 2
    assert stats.sessions_created == 2 and stats.recoveries == 1
    assert stats.recovery_seconds >= stats.retry_wait_seconds >= 0.0
    assert stats.steps == 4 and stats.failed_steps == 2  # the lost run, the hook's error
    assert stats.hook("FailsAt", "after_run").errors == 1
    assert stats.hook("Noop", "before_run").errors == 0
    assert stats.hook("Noop", "before_run").calls == 6
    assert stats.hook("FailsAt", "after_run").calls == 5  # every step that reached after_run
    # the end phase is timed exactly: none here; begin/after_create not implemented either


async def test_lifecycle_phases_are_counted_exactly() -> None:
    class Life(SessionRunHook):
        def begin(self) -> None:
            return None

        async def after_create_session(self, session: Any, coord: Any) -> None:
            return None

        def end(self, session: Any) -> None:
            return None

    async with MonitoredSession(Creator(), [Life()]) as sess:
        await sess.run()
    stats = sess.statistics()
    assert [(h.phase, h.calls, h.latency.count) for h in stats.hooks] == [
        ("begin", 1, 1), ("after_create_session", 1, 1), ("end", 1, 1)
    ]


class EndFailsPlain(SessionRunHook):
    def end(self, session: Any) -> None:
        raise ValueError("end failed")


class EndFailsAsync(SessionRunHook):
    async def end(self, session: Any) -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("end failed")


@pytest.mark.parametrize("hook_type", [EndFailsPlain, EndFailsAsync])
async def test_a_failing_lifecycle_call_is_counted_timed_and_an_error(hook_type: type[SessionRunHook]) -> None:
    sess = MonitoredSession(Creator(), [hook_type()])
    with pytest.raises(ValueError, match="end failed"):
        async with sess:
            await sess.run()
    stats = sess.statistics()
    assert [(h.phase, h.calls, h.errors, h.latency.count) for h in stats.hooks] == [("end", 1, 1, 1)]


async def test_a_hook_timeout_names_the_hook() -> None:
    class Hangs(SessionRunHook):
        async def before_run(self, run_context: Any) -> None:
            await anyio.sleep_forever()

    with anyio.fail_after(10):
        async with SingularMonitoredSession(Creator(), [Noop(), Hangs()], hook_timeout=0.01) as sess:
            with pytest.raises(hookrun.HookTimeoutError):
                await sess.run()
            stats = sess.statistics()
    assert stats.hook("Hangs", "before_run").errors == 1 and stats.failed_steps == 1
    assert stats.hook("Hangs", "after_run" if False else "before_run").calls == 1


async def test_statistics_off() -> None:
    async with MonitoredSession(Creator(), [Noop()], statistics=False) as sess:
        await sess.run()
        with pytest.raises(RuntimeError, match="statistics=False"):
            sess.statistics()
    with pytest.raises(TypeError, match="statistics must be"):
        MonitoredSession(Creator(), statistics="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sample_every"):
        StatisticsOptions(sample_every=0)


async def test_slow_hook_warning_once_per_hook_and_phase(caplog: pytest.LogCaptureFixture) -> None:
    clock = MockClock()
    options = StatisticsOptions(sample_every=1, slow_hook_share=0.5, slow_hook_seconds=0.1, clock=clock)
    hooks = [WaitsPlain(clock, 0.5, "quick"), Waits(clock, 2.0, "slow")]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        async with MonitoredSession(Creator(), hooks, statistics=options) as sess:
            for _ in range(3):
                await sess.run()
            stats = sess.statistics()
    slow = [r for r in caplog.records if r.getMessage().startswith("slow hook")]
    assert len(slow) == 1
    record = slow[0]
    assert (record.hook, record.phase, record.step) == ("slow", "before_run", 0)  # type: ignore[attr-defined]
    assert "slow took 2s in before_run, 80% of its step (2.5s)" in record.getMessage()
    assert stats.hook("slow", "before_run").latency.max == pytest.approx(2.0)
    assert stats.step.max == pytest.approx(2.5)


async def test_a_snapshot_taken_during_a_slow_step_keeps_its_warning(caplog: pytest.LogCaptureFixture) -> None:
    """statistics() from another task while a timed step waits in a slow hook: the step's
    durations stay for its end, which still logs the slow hook and then counts its call."""
    clock, release, waiting = MockClock(), anyio.Event(), anyio.Event()

    class SlowThenWaits(SessionRunHook):
        name = "slow"

        def before_run(self, run_context: Any) -> None:
            clock.jump(2.0)

        async def after_run(self, run_context: Any, run_values: Any) -> None:
            waiting.set()
            await release.wait()

    options = StatisticsOptions(sample_every=1, clock=clock)
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(10):
        async with MonitoredSession(Creator(), [SlowThenWaits()], statistics=options) as sess:
            async with anyio.create_task_group() as tg:
                tg.start_soon(sess.run)
                await waiting.wait()
                during = sess.statistics()
                release.set()
            after = sess.statistics()
    assert during.sampled_steps == 0 and during.hook("slow", "before_run").latency.count == 0
    assert [r.getMessage()[:30] for r in caplog.records if r.getMessage().startswith("slow hook")] == [
        "slow hook: slow took 2s in bef"
    ]
    assert after.hook("slow", "before_run").latency.count == 1 and after.step.count == 1


async def test_slow_hook_under_the_floor_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    clock = MockClock()
    options = StatisticsOptions(sample_every=1, slow_hook_seconds=5.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        async with MonitoredSession(Creator(), [Waits(clock, 2.0, "slow")], statistics=options) as sess:
            await sess.run()
    assert not [r for r in caplog.records if r.getMessage().startswith("slow hook")]


VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


class StepContextHook(SessionRunHook):
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.exits: list[type[BaseException] | None] = []

    @contextlib.contextmanager
    def step_context(self, run_context: Any, run_metadata: Any) -> Iterator[None]:
        token = VAR.set(f"step {run_context.global_step}")
        try:
            yield
        except BaseException as exc:
            self.exits.append(type(exc))
            raise
        else:
            self.exits.append(None)
        finally:
            VAR.reset(token)

    async def before_run(self, run_context: Any) -> None:
        self.seen.append(VAR.get())

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.seen.append(VAR.get())


async def test_step_context_is_current_in_hooks_and_never_leaks() -> None:
    hook = StepContextHook()
    async with SingularMonitoredSession(Creator(fail_at=(2,), error=RuntimeError), [hook, Noop()]) as sess:
        await sess.run()
        assert VAR.get() == "unset"
        with pytest.raises(RuntimeError):
            await sess.run()
        assert VAR.get() == "unset"
        await sess.run()
    assert VAR.get() == "unset"
    assert hook.seen == ["step 0", "step 0", "step 1", "step 1", "step 1"]
    assert hook.exits == [None, RuntimeError, None]


async def test_no_step_context_costs_nothing() -> None:
    sess = MonitoredSession(Creator(), [Noop()])
    assert sess._step in (scoped_step, general_step)  # no wrapper when no hook has a step_context
    with pytest.raises(TypeError, match="step_context is not callable"):
        bad = Noop()
        bad.step_context = 3  # type: ignore[attr-defined]
        MonitoredSession(Creator(), [bad])


async def test_every_log_record_carries_step_hook_and_phase(caplog: pytest.LogCaptureFixture) -> None:
    """A formatter reading the extras (what a JSON formatter does) works on every record."""
    formatter = logging.Formatter("%(levelname)s step=%(step)s hook=%(hook)s phase=%(phase)s %(message)s")

    class TwoFail(SessionRunHook):
        async def after_run(self, run_context: Any, run_values: Any) -> None:
            await anyio.lowlevel.checkpoint()
            raise ValueError(self.name)

        def __init__(self, name: str) -> None:
            self.name = name

    creator = Creator(fail_at=(1,))
    with caplog.at_level(logging.DEBUG, logger="hookrun"):
        async with MonitoredSession(creator, [TwoFail("a"), TwoFail("b")],
                                    retry=RetryPolicy(initial_delay=0.0, jitter=False)) as sess:
            with pytest.raises(ValueError):
                await sess.run()
        logging.getLogger("hookrun").info("a line of a user's own")
    assert caplog.records
    lines = [formatter.format(record) for record in caplog.records]
    assert all("step=" in line for line in lines)
    retry = [r for r in caplog.records if "recovering" in r.getMessage()]
    assert retry and retry[0].step == 0 and retry[0].hook is None  # type: ignore[attr-defined]


def test_a_second_failing_hook_is_logged_with_its_name_and_phase(caplog: pytest.LogCaptureFixture) -> None:
    from hookrun._dispatch._failures import raise_first

    first, second = ValueError("a"), KeyError("b")
    with caplog.at_level(logging.ERROR, logger="hookrun"), pytest.raises(ValueError):
        raise_first([(1, second), (0, first)], "after_run", ["A", "B"])
    (record,) = caplog.records
    assert (record.step, record.hook, record.phase) == (None, "B", "after_run")  # type: ignore[attr-defined]


async def test_builtin_hooks_log_with_their_name_phase_and_step(caplog: pytest.LogCaptureFixture) -> None:
    from hookrun.hooks import NanTensorHook

    class NanSession(Session):
        async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
            return [float("nan") for _ in fetches]

    class NanCreator:
        async def create_session(self) -> NanSession:
            return NanSession()

    with caplog.at_level(logging.WARNING, logger="hookrun"):
        async with MonitoredSession(NanCreator(), [NanTensorHook("loss", fail_on_nan_loss=False)]) as sess:
            await sess.run()
    (record,) = [r for r in caplog.records if "NaN" in r.getMessage()]
    assert (record.step, record.hook, record.phase) == (1, "NanTensorHook", "after_run")  # type: ignore[attr-defined]
