"""A step whose hook calls are all plain functions runs inside ``run()`` itself, not in a
coroutine of its own: the same step as the general one, only cheaper. Every scenario here
runs twice, once that way and once with the session made to take the general step, and
both must see the same: results, every hook call's arguments, errors and their notes, the
statistics, the recovery, the cancellation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    AbortedError,
    MonitoredSession,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StatisticsOptions,
)
from hookrun.testing import ScriptedCreator

pytestmark = pytest.mark.anyio

Record = list[tuple[Any, ...]]


class PlainRecorder(SessionRunHook):
    """Plain before_run / after_run recording what they receive; asks for ``asks`` on the
    steps in ``ask_at``, raises ``fail`` in ``fail_in`` at step ``fail_at``."""

    def __init__(
        self, record: Record, name: str, *, asks: Any = None, ask_at: tuple[int, ...] = (),
        fail_in: str = "", fail_at: int = -1, stop_at: int = -1,
    ) -> None:
        self.record, self.name = record, name
        self.asks, self.ask_at = asks, ask_at
        self.fail_in, self.fail_at, self.stop_at = fail_in, fail_at, stop_at

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        step = run_context.global_step
        self.record.append((self.name, "before", step, run_context.original_args))
        if self.fail_in == "before" and step == self.fail_at:
            raise ValueError(f"{self.name} fails in before_run at {step}")
        if step == self.stop_at:
            run_context.request_stop()
        return SessionRunArgs(self.asks) if step in self.ask_at else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        step = run_context.global_step
        self.record.append(
            (self.name, "after", step, run_values.results, run_values.global_step, run_values.options)
        )
        if self.fail_in == "after" and step == self.fail_at:
            raise ValueError(f"{self.name} fails in after_run at {step}")


class BeforeOnly(SessionRunHook):
    def __init__(self, record: Record) -> None:
        self.record = record

    def before_run(self, run_context: SessionRunContext) -> None:
        self.record.append(("before-only", run_context.global_step))


class AfterOnly(SessionRunHook):
    def __init__(self, record: Record) -> None:
        self.record = record

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.record.append(("after-only", run_context.global_step, run_values.global_step))


async def _both_ways(
    make: Callable[[Record], MonitoredSession],
    steps: Callable[[MonitoredSession], Awaitable[list[Any]]],
) -> tuple[Any, Record, Any]:
    """What ``steps`` sees, what the hooks recorded and the statistics' counts, the plain
    way and the general way: asserted the same; returns the plain way's."""
    seen = []
    for plain in (True, False):
        record: Record = []
        sess = make(record)
        assert _takes_plain_steps(sess), "the scenario must be one run() steps itself"
        if not plain:  # the general step: the plan of plain calls off
            sess._plain = False
        sess._stats.next_sample = 10**12  # no step timed (the first one would be): each goes its way
        outcome = await steps(sess)
        stats = sess.statistics() if sess._stats.enabled else None
        counts = None if stats is None else (
            stats.steps, stats.failed_steps, dict(sess._stats.failures),
            [(hook.hook, hook.phase, hook.calls, hook.errors) for hook in stats.hooks],
        )
        seen.append((outcome, record, counts))
    assert seen[0] == seen[1]
    return seen[0]


def _takes_plain_steps(sess: MonitoredSession) -> bool:
    return "run" not in vars(sess) and sess._plain


def _outcome(exc: BaseException) -> tuple[str, str, list[str]]:
    return type(exc).__name__, str(exc), list(getattr(exc, "__notes__", []))


async def test_results_and_hook_arguments_are_the_general_steps() -> None:
    values = {"a": 1, "b": lambda step, feeds: step * 10, "c": "c"}

    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(
            ScriptedCreator(values),
            [PlainRecorder(record, "first"), PlainRecorder(record, "second", asks={"c": "c"}, ask_at=(2, 4))],
        )

    async def steps(sess: MonitoredSession) -> list[Any]:
        out = []
        async with sess:
            out.append(await sess.run())
            out.append(await sess.run(["a", "b"]))
            out.append(await sess.run({"x": "a", "y": ("b", "a")}, {"fed": 3}))  # a hook asks: handed over
            out.append(await sess.run("b"))
            out.append(await sess.run(["fed"], {"fed": 5}))  # asks again
            out.append(await sess.run(options=RunOptions()))  # options: the general step
            out.append(await sess.global_step())
        return out

    outcome, record, counts = await _both_ways(make, steps)
    assert outcome == [None, [1, 10], {"x": 1, "y": (20, 1)}, 30, [5], None, 6]
    assert [r[2] for r in record if r[:2] == ("second", "after")] == [0, 1, 2, 3, 4, 5]
    assert ("second", "after", 2, {"c": "c"}, 3, RunOptions()) in record
    assert counts is not None and counts[:3] == (6, 0, {"before_run": 0, "run": 0, "after_run": 0})


async def test_phases_with_no_call_are_skipped() -> None:
    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(ScriptedCreator({"k": 7}), [BeforeOnly(record), AfterOnly(record)])

    async def steps(sess: MonitoredSession) -> list[Any]:
        async with sess:
            out = [await sess.run("k"), await sess.run(["k"])]
        return out

    for hook in (BeforeOnly, AfterOnly):

        def alone(record: Record, hook: type[SessionRunHook] = hook) -> MonitoredSession:
            return MonitoredSession(ScriptedCreator({"k": 7}), [hook(record)])  # type: ignore[call-arg]

        outcome, record, _ = await _both_ways(alone, steps)
        assert outcome == [7, [7]]
        assert len(record) == 2
    outcome, record, _ = await _both_ways(make, steps)
    assert record == [("before-only", 0), ("after-only", 0, 1), ("before-only", 1), ("after-only", 1, 2)]


@pytest.mark.parametrize("phase", ["before", "after"])
async def test_a_failing_hook_is_counted_in_its_phase_and_propagates(phase: str) -> None:
    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(ScriptedCreator({"k": 1}), [PlainRecorder(record, "h", fail_in=phase, fail_at=1)])

    async def steps(sess: MonitoredSession) -> list[Any]:
        out: list[Any] = []
        async with sess:
            out.append(await sess.run("k"))
            with pytest.raises(ValueError) as caught:
                await sess.run("k")
            out.append(_outcome(caught.value))
            out.append(sess._busy)
        return out

    outcome, _, counts = await _both_ways(make, steps)
    assert outcome == [1, ("ValueError", f"h fails in {phase}_run at 1", []), False]
    assert counts is not None and counts[2][f"{phase}_run"] == 1


class Answers:
    """A session answering from ``values``; a missing key raises ``KeyError(key)``."""

    def __init__(self, values: dict[Any, Any]) -> None:
        self.values = values

    async def run(self, fetches: Any, feeds: Any, options: Any, metadata: Any) -> list[Any]:
        return [self.values[key] for key in fetches]

    async def aclose(self) -> None:
        pass


async def test_a_missing_fetch_names_who_asked_for_it() -> None:
    async def create() -> Answers:
        return Answers({"k": 1})

    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(create, [PlainRecorder(record, "h", asks=["gone"])])

    async def steps(sess: MonitoredSession) -> list[Any]:
        out = []
        async with sess:
            for fetches in (["k", "nowhere"], ["k", "gone"]):  # the caller's; then the hook's too
                with pytest.raises(KeyError) as caught:
                    await sess.run(fetches)
                out.append(_outcome(caught.value))
                sess.hooks[0].ask_at = (0,)  # type: ignore[attr-defined]  # no step was counted
        return out

    outcome, _, counts = await _both_ways(make, steps)
    assert outcome[0][2] == ["hookrun: the fetch 'nowhere' was asked for by the caller"]
    assert outcome[1][2] == ["hookrun: the fetch 'gone' was asked for by the caller and hook h"]
    assert counts is not None and counts[2]["run"] == 2


async def test_a_session_answering_the_wrong_number_of_values_is_refused() -> None:
    class Short:
        async def run(self, fetches: Any, feeds: Any, options: Any, metadata: Any) -> list[Any]:
            return [1]

        async def aclose(self) -> None:
            pass

    async def create() -> Short:
        return Short()

    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(create, [PlainRecorder(record, "h")])

    async def steps(sess: MonitoredSession) -> list[Any]:
        async with sess:
            with pytest.raises(Exception) as caught:  # both ways must raise the same
                await sess.run(["a", "b"])
        return [_outcome(caught.value)]

    outcome, record, _ = await _both_ways(make, steps)
    assert "Short" in outcome[0][1]
    assert [r[1] for r in record] == ["before"]  # after_run is not called after a failed run


async def test_a_recoverable_error_recreates_the_session_and_retries_the_step() -> None:
    def make(record: Record) -> MonitoredSession:
        creator = ScriptedCreator({"k": lambda step, feeds: step}, session_errors={0: {1: AbortedError("lost")}})
        return MonitoredSession(creator, [PlainRecorder(record, "h")])

    async def steps(sess: MonitoredSession) -> list[Any]:
        async with sess:
            out: list[Any] = [await sess.run("k") for _ in range(3)]
        return [*out, sess.statistics().sessions_created]

    outcome, record, counts = await _both_ways(make, steps)
    assert outcome[-1] == 2
    assert counts is not None and counts[2]["run"] == 1
    assert [r[2] for r in record if r[1] == "after"] == [0, 1, 2]


async def test_a_stop_requested_by_a_plain_hook_ends_the_steps() -> None:
    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(ScriptedCreator({}), [PlainRecorder(record, "h", stop_at=2)])

    async def steps(sess: MonitoredSession) -> list[Any]:
        async with sess:
            while not sess.should_stop():
                await sess.run()
            with pytest.raises(hookrun.RunAfterStopError):
                await sess.run()
            out = [await sess.global_step()]
        return out

    outcome, _, _ = await _both_ways(make, steps)
    assert outcome == [3]


async def test_a_step_cancelled_in_its_run_leaves_the_session_usable() -> None:
    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(ScriptedCreator({"k": 1}, hang_at={0: [1]}), [PlainRecorder(record, "h")])

    async def steps(sess: MonitoredSession) -> list[Any]:
        async with sess:
            out = [await sess.run("k")]
            with anyio.move_on_after(0.05) as scope:
                await sess.run("k")
            out += [scope.cancelled_caught, sess._busy, await sess.run("k"), await sess.global_step()]
        return out

    outcome, record, counts = await _both_ways(make, steps)
    assert outcome == [1, True, False, 1, 2]
    assert [r[1] for r in record] == ["before", "after", "before", "before", "after"]
    assert counts is not None and counts[2]["run"] == 1


async def test_a_session_without_hooks_steps_as_the_general_step() -> None:
    """No hook at all is the plan with no call to make: results, a missing fetch named, a
    recovery, a cancelled run and the statistics as the general step."""

    def make(record: Record) -> MonitoredSession:
        creator = ScriptedCreator(
            {"k": lambda step, feeds: step}, session_errors={0: {2: AbortedError("lost")}}, hang_at={1: [2]}
        )
        return MonitoredSession(creator, [])

    async def steps(sess: MonitoredSession) -> list[Any]:
        out: list[Any] = []
        async with sess:
            out += [await sess.run(), await sess.run({"a": "k", "b": ["k"]}, {"fed": 1})]
            out.append(await sess.run("k"))  # the session is lost here: a new one runs it again
            with pytest.raises(KeyError) as caught:
                await sess.run(["k", "nowhere"])
            out.append(_outcome(caught.value))
            with anyio.move_on_after(0.02) as scope:
                await sess.run("k")  # hangs
            out += [scope.cancelled_caught, sess._busy, await sess.run("k"), await sess.global_step()]
        return [*out, sess.statistics().sessions_created]

    outcome, record, counts = await _both_ways(make, steps)
    assert outcome[:3] == [None, {"a": 1, "b": [1]}, 0]  # the values count the session's own runs
    assert outcome[3][0] == "KeyError" and "nowhere" in outcome[3][1]
    assert outcome[4:] == [True, False, 3, 4, 2]  # cancelled, not busy, a run, the step; 2 sessions
    assert record == [] and counts == (4, 3, {"before_run": 0, "run": 3, "after_run": 0}, [])


async def test_only_sessions_of_plain_calls_take_the_plain_step() -> None:
    class Async(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            return None

    class Traces(SessionRunHook):
        traces_before_run = True

        def before_run(self, run_context: SessionRunContext) -> None:
            return None

    record: Record = []
    plain = MonitoredSession(ScriptedCreator({}), [PlainRecorder(record, "h")])
    assert _takes_plain_steps(plain)
    assert _takes_plain_steps(MonitoredSession(ScriptedCreator({})))  # no hook: no call to make
    assert not _takes_plain_steps(MonitoredSession(ScriptedCreator({}), [PlainRecorder(record, "h"), Async()]))
    assert not _takes_plain_steps(MonitoredSession(ScriptedCreator({}), [Traces()]))

    class Counter(hookrun.LocalStepCounter):  # not the session's own kind: it may be awaited
        pass

    assert not _takes_plain_steps(MonitoredSession(ScriptedCreator({}), [PlainRecorder(record, "h")], step_counter=Counter()))


async def test_sampled_steps_take_the_general_step_and_are_timed() -> None:
    record: Record = []
    sess = MonitoredSession(
        ScriptedCreator({}), [PlainRecorder(record, "h")], statistics=StatisticsOptions(sample_every=2)
    )
    async with sess:
        for _ in range(6):
            await sess.run()
        stats = sess.statistics()
    assert (stats.steps, stats.sampled_steps) == (6, 3)
    assert [(h.phase, h.calls, h.latency.count) for h in stats.hooks] == [("before_run", 6, 3), ("after_run", 6, 3)]


async def test_a_subclass_with_its_own_run_keeps_it() -> None:
    """A subclass's run sees every step and its super().run() takes the plain plan."""

    class Logged(MonitoredSession):
        calls = 0

        async def run(self, *args: Any, **kwargs: Any) -> Any:
            type(self).calls += 1
            return await super().run(*args, **kwargs)

    record: Record = []
    sess = Logged(ScriptedCreator({"k": 1}), [PlainRecorder(record, "h")])
    assert _takes_plain_steps(sess)
    async with sess:
        assert await sess.run("k") == 1
    assert Logged.calls == 1
    assert [entry[1] for entry in record] == ["before", "after"]


async def test_steps_in_flight_keep_the_engines_run() -> None:
    class Overlapping(AfterOnly):
        overlapping_steps = True

    record: Record = []
    sess = MonitoredSession(ScriptedCreator({"k": 1}), [Overlapping(record)], max_in_flight=2)
    assert not _takes_plain_steps(sess)
    async with sess:
        assert await sess.run("k") == 1
    assert record == [("after-only", 0, 1)]


async def test_feeds_that_are_not_a_dict_are_checked_as_ever() -> None:
    from types import MappingProxyType

    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(ScriptedCreator({}), [PlainRecorder(record, "h")])

    async def steps(sess: MonitoredSession) -> list[Any]:
        out: list[Any] = []
        async with sess:
            out.append(await sess.run(["x"], MappingProxyType({"x": 4})))
            with pytest.raises(TypeError) as caught:
                await sess.run(["x"], ["x", 4])  # type: ignore[arg-type]
            out.append(_outcome(caught.value))
        return out

    outcome, record, _ = await _both_ways(make, steps)
    assert outcome[0] == [4]
    assert "the caller passed feed_dict" in outcome[1][1]
    assert len(record) == 2  # the refused step called no hook


class KeepsCoordinator(PlainRecorder):
    coord: Any = None

    def after_create_session(self, session: Any, coord: Any) -> None:
        type(self).coord = coord


async def test_a_stop_or_an_error_held_by_the_coordinator_is_seen_before_the_step() -> None:
    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(ScriptedCreator({"k": lambda step, feeds: step}), [KeepsCoordinator(record, "h")])

    async def steps(sess: MonitoredSession) -> list[Any]:
        out: list[Any] = []
        async with sess:
            out.append(await sess.run("k"))
            KeepsCoordinator.coord.request_stop(AbortedError("a worker was lost"))  # recoverable
            out.append(await sess.run("k"))  # on a new session
            out.append(sess.statistics().recoveries)
            KeepsCoordinator.coord.request_stop()  # a plain stop
            out.append(sess.should_stop())
            try:
                out.append(await sess.run("k"))
            except Exception as exc:  # whatever it is, both ways must agree
                out.append(_outcome(exc))
        return out

    outcome, _, _ = await _both_ways(make, steps)
    assert outcome[:4] == [0, 0, 1, True]


async def test_a_run_from_another_task_during_a_step_waits_for_it() -> None:
    def make(record: Record) -> MonitoredSession:
        return MonitoredSession(ScriptedCreator({"k": 1}, hang_at={0: [0]}), [PlainRecorder(record, "h")])

    async def steps(sess: MonitoredSession) -> list[Any]:
        out: list[Any] = []
        async with sess:
            async with anyio.create_task_group() as tg:
                hung = anyio.CancelScope()

                async def hang() -> None:
                    with hung:
                        await sess.run("k")  # waits in its run until cancelled

                async def second() -> None:
                    out.append(await sess.run("k"))

                tg.start_soon(hang)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(second)
                await anyio.wait_all_tasks_blocked()
                out.append("waiting" if not out else "ran beside the step")
                hung.cancel()
            out.append(await sess.run("k"))
        return out

    outcome, record, _ = await _both_ways(make, steps)
    assert outcome == ["waiting", 1, 1]
    # the step cancelled made no after_run; the one that waited ran whole, after it
    assert [entry[1:3] for entry in record] == [("before", 0), ("before", 0), ("after", 0), ("before", 1), ("after", 1)]



class Gated:
    """A session whose run at step ``at`` waits for ``gate``."""

    def __init__(self, at: int) -> None:
        self.at, self.steps = at, 0
        self.running, self.gate = anyio.Event(), anyio.Event()

    async def run(self, fetches: Any, feeds: Any, options: Any, metadata: Any) -> list[Any]:
        self.steps += 1
        if self.steps - 1 == self.at:
            self.running.set()
            await self.gate.wait()
        return [1] * len(fetches)

    async def aclose(self) -> None:
        pass


async def test_a_close_from_another_task_waits_for_the_plain_step() -> None:
    def make(record: Record) -> MonitoredSession:
        raw = Gated(at=1)

        async def create() -> Gated:
            return raw

        sess = MonitoredSession(create, [PlainRecorder(record, "h")])
        sess.raw_gate = raw  # type: ignore[attr-defined]
        return sess

    async def steps(sess: MonitoredSession) -> list[Any]:
        raw: Gated = sess.raw_gate  # type: ignore[attr-defined]
        out: list[Any] = []
        async with sess:
            out.append(await sess.run("k"))

            async def step() -> None:
                out.append(await sess.run("k"))

            with anyio.fail_after(10):  # a close that never learns the step ended hangs
                async with anyio.create_task_group() as tg:
                    tg.start_soon(step)
                    await raw.running.wait()
                    tg.start_soon(sess.aclose)
                    await anyio.wait_all_tasks_blocked()
                    out.append(sess.should_stop())
                    raw.gate.set()
        return out

    outcome, record, _ = await _both_ways(make, steps)
    assert outcome == [1, True, 1]
    assert [entry[1] for entry in record] == ["before", "after", "before", "after"]


async def test_after_a_long_warm_up_errors_and_cancellation_hold() -> None:
    """2,000 quiet steps (some timed by the statistics, so both ways are taken), then a
    plain hook's error, a run cancelled from outside and a run that goes on as before."""
    record: Record = []
    warm = 2000
    hook = PlainRecorder(record, "h", fail_in="after", fail_at=warm)
    creator = ScriptedCreator({"k": lambda step, feeds: step}, hang_at={0: [warm + 1]})
    sess = MonitoredSession(creator, [hook])
    assert _takes_plain_steps(sess)
    async with sess:
        for step in range(warm):
            assert await sess.run("k") == step
        with pytest.raises(ValueError, match=f"h fails in after_run at {warm}"):
            await sess.run("k")
        with anyio.move_on_after(0.05) as scope:
            await sess.run("k")  # its raw run hangs: cancelled from outside
        assert scope.cancelled_caught and not sess._busy
        assert await sess.run("k") == warm + 2
        stats = sess.statistics()
    assert 0 < stats.sampled_steps < warm // 10
    assert (stats.steps, stats.failed_steps) == (warm + 1, 2)  # steps that ran to their end; failed ones
    assert sess._stats.failures == {"before_run": 0, "run": 1, "after_run": 1}
    assert record[-1][:3] == ("h", "after", warm + 1)
