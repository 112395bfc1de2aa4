"""MonitoredSession: lifecycle, merging, stop, errors and closing (and TensorFlow's checklist items)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    FeedConflictError,
    MonitoredSession,
    OutOfRangeError,
    RunAfterStopError,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
)
from hookrun._global_step import LocalStepCounter
from hookrun.testing import RecordingHook, ScriptedCreator, ScriptedSession

pytestmark = pytest.mark.anyio

Pair = namedtuple("Pair", "left right")


def creator(**values: Any) -> ScriptedCreator:
    return ScriptedCreator({"a": 1, "b": 2, "c": 3, "loss": 0.5} | values)


async def test_lifecycle_order_begin_create_run_end() -> None:
    """begin → after_create_session → before_run → after_run → end, with the raw session."""
    hook = RecordingHook()
    session_creator = creator()
    async with MonitoredSession(session_creator, [hook]) as sess:
        assert hook.phases() == ["begin", "after_create_session"]
        await sess.run("a")
    raw = session_creator.sessions[0]
    assert hook.phases() == ["begin", "after_create_session", "before_run", "after_run", "end"]
    assert hook.calls[1].args["session"] is raw
    assert hook.calls[-1].args["session"] is raw
    assert raw.closed == 1


async def test_run_context_is_shared_and_carries_caller_args() -> None:
    """One context per step shared by all hooks, holding the caller's args and the raw session (◆52)."""
    hooks = [RecordingHook("x"), RecordingHook("y")]
    options = RunOptions(tags={"t": 1})
    async with MonitoredSession(creator(), hooks) as sess:
        await sess.run(["a"], {"f": 1}, options)
        raw = sess.raw_session()
    contexts = {id(h.calls[i].args["run_context"]) for h in hooks for i in (2, 3)}
    assert len(contexts) == 1
    ctx = hooks[0].calls[2].args["run_context"]
    assert ctx.original_args == SessionRunArgs(["a"], {"f": 1}, options)
    assert ctx.session is raw


async def test_hooks_and_caller_get_their_own_nested_structures() -> None:
    """Nested fetches: duplicates fetched once, each party packed back its own structure (◆54)."""
    hook_a = RecordingHook("a", request=SessionRunArgs({"x": ["a", ("b", "a")], "p": Pair("c", None)}))
    hook_b = RecordingHook("b", request=SessionRunArgs("b"))
    hook_c = RecordingHook("c")
    session_creator = creator()
    async with MonitoredSession(session_creator, [hook_a, hook_b, hook_c]) as sess:
        got = await sess.run(("c", ["a"]))
    assert got == (3, [1])
    assert hook_a.calls[3].args["results"] == {"x": [1, (2, 1)], "p": Pair(3, None)}
    assert isinstance(hook_a.calls[3].args["results"]["p"], Pair)
    assert hook_b.calls[3].args["results"] == 2
    assert hook_c.calls[3].args["results"] is None
    assert session_creator.sessions[0].runs[0][0] == ["c", "a", "b"]


async def test_unhashable_fetch_names_the_party() -> None:
    """An unhashable leaf is a TypeError naming the caller or the hook that asked for it."""
    hook = RecordingHook("greedy", request=SessionRunArgs([{"a"}]))
    async with MonitoredSession(creator(), [hook]) as sess:
        with pytest.raises(TypeError, match="hook greedy fetches a set"):
            await sess.run()
        with pytest.raises(TypeError, match="the caller fetches an unhashable key"):
            await sess.run(bytearray(b"x"))
        await sess.aclose()


async def test_hook_feeds_are_combined_and_caller_dict_unchanged() -> None:
    """Feeds of hooks and the caller are merged; the caller's dict is not modified (◆55, ◆56)."""
    hooks = [RecordingHook("x", request=SessionRunArgs(None, {"p": 5})),
             RecordingHook("y", request=SessionRunArgs(None, {"q": 10}))]
    caller_feed = {"r": 20}
    session_creator = creator()
    async with MonitoredSession(session_creator, hooks) as sess:
        assert await sess.run(["p", "q", "r"], caller_feed) == [5, 10, 20]
    assert caller_feed == {"r": 20}
    assert session_creator.sessions[0].runs[0][1] == {"p": 5, "q": 10, "r": 20}


async def test_two_hooks_feeding_one_key_conflict() -> None:
    """Hook/hook feed conflict: FeedConflictError naming both hooks and the keys; no run, no after_run (◆57)."""
    hooks = [RecordingHook("x", request=SessionRunArgs(None, {"p": 1, "q": 1})),
             RecordingHook("y", request=SessionRunArgs(None, {"p": 2, "q": 2}))]
    session_creator = creator()
    async with MonitoredSession(session_creator, hooks) as sess:
        with pytest.raises(FeedConflictError, match=r"two hooks: 'p' by hook x and hook y; 'q' by hook x and hook y") as info:
            await sess.run()
        await sess.aclose()
    assert info.value.keys == ("p", "q")
    assert session_creator.sessions[0].runs == []
    assert all(h.count("after_run") == 0 for h in hooks)


async def test_hook_and_caller_feeding_one_key_conflict() -> None:
    """Hook/caller feed conflict names the hook and the caller (◆58)."""
    hook = RecordingHook("x", request=SessionRunArgs(None, {"p": 1}))
    async with MonitoredSession(creator(), [hook]) as sess:
        with pytest.raises(FeedConflictError, match="a hook and the caller: 'p' by hook x and the caller"):
            await sess.run(None, {"p": 2})
        await sess.aclose()
    assert hook.count("after_run") == 0


async def test_options_merge_by_max_or_and_union() -> None:
    """timeout is the maximum, trace OR-ed, tags united; the caller's options are not mutated (◆77, ◆78)."""
    hooks = [RecordingHook("x", request=SessionRunArgs(None, None, RunOptions(timeout=5, tags={"h": 1}))),
             RecordingHook("y", request=SessionRunArgs(None, None, RunOptions(timeout=2, trace=True)))]
    caller = RunOptions(timeout=3, tags={"c": 2})
    session_creator = creator()
    async with MonitoredSession(session_creator, hooks) as sess:
        await sess.run(options=caller)
    used = session_creator.sessions[0].runs[0][2]
    assert used == RunOptions(timeout=5, trace=True, tags={"c": 2, "h": 1})
    assert caller == RunOptions(timeout=3, tags={"c": 2})
    assert hooks[0].calls[3].args["options"] == used


async def test_conflicting_option_tags_name_key_and_parties() -> None:
    """A tag given two values by two parties is a ValueError naming both."""
    hook = RecordingHook("x", request=SessionRunArgs(None, None, RunOptions(tags={"mode": "eval"})))
    async with MonitoredSession(creator(), [hook]) as sess:
        with pytest.raises(ValueError, match="tag 'mode' is given two values: 'train' by the caller and 'eval' by hook x"):
            await sess.run(options=RunOptions(tags={"mode": "train"}))
        await sess.aclose()


async def test_run_metadata_is_shared_and_is_the_callers() -> None:
    """Every hook sees the same RunMetadata object, the caller's when given."""
    hooks = [RecordingHook("x"), RecordingHook("y")]
    metadata = hookrun.RunMetadata()
    async with MonitoredSession(creator(), hooks) as sess:
        await sess.run(run_metadata=metadata)
    assert all(h.calls[3].args["run_metadata"] is metadata for h in hooks)


async def test_global_step_in_context_and_values() -> None:
    """run_context.global_step is the value before the step, run_values.global_step after it."""
    hook = RecordingHook()
    counter = hookrun.LocalStepCounter(41)
    async with MonitoredSession(creator(), [hook], step_counter=counter) as sess:
        await sess.run()
        await sess.run()
    steps = [(c.phase, c.args["global_step"]) for c in hook.calls if "global_step" in c.args]
    assert steps == [("before_run", 41), ("after_run", 42), ("before_run", 42), ("after_run", 43)]
    assert counter.value == 43


async def test_should_stop_after_hook_requests_stop_in_after_run() -> None:
    """should_stop() is False until a hook requests stop, then True; run() then raises (◆53)."""
    hook = RecordingHook(stop_in=("after_run",))
    async with MonitoredSession(creator(), [hook]) as sess:
        assert not sess.should_stop()
        await sess.run()
        assert sess.should_stop()
        with pytest.raises(RunAfterStopError, match="after a hook requested stop"):
            await sess.run()


async def test_stop_in_before_run_does_not_cancel_the_step() -> None:
    """A stop requested in before_run still runs the session and every after_run."""
    stopper = RecordingHook("stopper", stop_in=("before_run",))
    other = RecordingHook("other", request=SessionRunArgs("a"))
    session_creator = creator()
    async with MonitoredSession(session_creator, [stopper, other]) as sess:
        await sess.run()
        assert sess.should_stop()
    assert other.calls[3].args["results"] == 1
    assert other.calls[3].args["run_context"].stop_requested
    assert session_creator.sessions[0].steps == 1


async def test_stop_is_not_lost_when_another_hook_raises() -> None:
    """A stop request survives another hook's error in the same phase (differs from TF)."""

    class Stopper(SessionRunHook):
        async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            run_context.request_stop()

    failing = RecordingHook("failing", raises={"after_run": ValueError("after_run failed")})
    async with MonitoredSession(creator(), [Stopper(), failing]) as sess:
        with pytest.raises(ValueError, match="after_run failed"):
            await sess.run()
        assert sess.should_stop()
        await sess.aclose()


async def test_coordinator_stop_makes_should_stop_true_but_run_works() -> None:
    """A coordinator stop request is a stop signal but does not block run() (◆34)."""
    hook = RecordingHook()
    async with MonitoredSession(creator(), [hook]) as sess:
        hook.calls[1].args["coord"].request_stop()
        assert sess.should_stop()
        assert await sess.run("a") == 1


async def test_clean_stop_exception_ends_block_cleanly_and_calls_end() -> None:
    """OutOfRangeError, StopAsyncIteration and EndOfStream end the block cleanly with end (◆67, ◆97)."""
    for error in (OutOfRangeError("done"), StopAsyncIteration(), anyio.EndOfStream(), type("Sub", (OutOfRangeError,), {})()):
        hook = RecordingHook()
        session_creator = ScriptedCreator({"a": 1}, session_errors={0: {1: error}})
        async with MonitoredSession(session_creator, [hook]) as sess:
            while not sess.should_stop():
                await sess.run("a")
        assert hook.phases()[-1] == "end"
        assert session_creator.sessions[0].closed == 1
        assert sess.should_stop()


async def test_other_exception_skips_end_and_still_closes() -> None:
    """An ordinary error from the body propagates, end is skipped, everything is closed (◆69, ◆73)."""
    hook = RecordingHook()
    session_creator = creator()
    with pytest.raises(ZeroDivisionError):
        async with MonitoredSession(session_creator, [hook]) as sess:
            await sess.run()
            raise ZeroDivisionError
    assert "end" not in hook.phases()
    assert session_creator.sessions[0].closed == 1
    assert sess.should_stop()


async def test_error_in_before_run_skips_run_and_after_run() -> None:
    """A hook raising in before_run: no session run, no after_run, error out of run() (◆ T22)."""
    failing = RecordingHook("failing", raises={"before_run": KeyError("nope")})
    other = RecordingHook("other")
    session_creator = creator()
    with pytest.raises(KeyError, match="nope"):
        async with MonitoredSession(session_creator, [failing, other]) as sess:
            await sess.run()
    assert session_creator.sessions[0].runs == []
    assert other.count("after_run") == 0
    assert "end" not in other.phases()


async def test_error_in_after_run_has_moved_the_step() -> None:
    """If after_run raises, the run happened and the step counter moved; the session stays usable."""
    failing = RecordingHook("failing", raises={"after_run": ValueError("late")})
    async with MonitoredSession(creator(), [failing]) as sess:
        with pytest.raises(ValueError, match="late"):
            await sess.run()
        assert failing.calls[3].args["global_step"] == 1
        assert await sess.run("a") == 1


async def test_aclose_is_a_clean_exit_and_closing_twice_is_a_noop() -> None:
    """aclose() calls end once and closes; a second aclose and leaving the block do nothing (◆29)."""
    hook = RecordingHook()
    session_creator = creator()
    async with MonitoredSession(session_creator, [hook]) as sess:
        await sess.aclose()
        await sess.aclose()
        assert sess.should_stop()
        with pytest.raises(hookrun.SessionClosedError, match="after the session closed"):
            await sess.run()
    assert hook.count("end") == 1
    assert session_creator.sessions[0].closed == 1


async def test_run_outside_async_with_is_session_closed_error() -> None:
    """run() before entering the block names the problem."""
    sess = MonitoredSession(creator(), [])
    with pytest.raises(hookrun.SessionClosedError, match="outside 'async with'"):
        await sess.run()


async def test_entering_twice_is_an_error() -> None:
    """A monitored session can be entered only once."""
    sess = MonitoredSession(creator(), [])
    async with sess:
        with pytest.raises(RuntimeError, match="can be entered only once"):
            await sess.__aenter__()


async def test_run_from_two_tasks_at_once_takes_turns() -> None:
    """A second concurrent run() waits for the step in progress instead of interleaving
    steps, and runs once it ended."""
    session_creator = ScriptedCreator({"a": 1}, hang_at={0: [0]})
    results: list[Any] = []
    async with MonitoredSession(session_creator, []) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                hung = anyio.CancelScope()

                async def hang() -> None:
                    with hung:
                        await sess.run("a")

                async def second() -> None:
                    results.append(await sess.run("a"))

                tg.start_soon(hang)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(second)
                await anyio.wait_all_tasks_blocked()
                assert results == [] and session_creator.sessions[0].steps == 1  # it waits
                hung.cancel()
            assert results == [1]
            assert await sess.run("a") == 1



async def test_run_timeout_is_deadline_exceeded() -> None:
    """RunOptions(timeout=...) cancels the session's run: DeadlineExceededError, no after_run."""
    hook = RecordingHook()
    session_creator = ScriptedCreator({"a": 1}, hang_at={0: [0]})
    async with MonitoredSession(session_creator, [hook]) as sess:
        with anyio.fail_after(5), pytest.raises(hookrun.DeadlineExceededError, match=r"RunOptions.timeout=0\.01"):
            await sess.run("a", options=RunOptions(timeout=0.01))
        assert hook.count("after_run") == 0
        assert await sess.run("a") == 1


async def test_cancelling_run_from_outside_leaves_no_task_and_session_usable() -> None:
    """Cancelling run() from outside leaves no task running and the next run works."""

    hang = True

    class Waiter(SessionRunHook):
        async def before_run(self, run_context: SessionRunContext) -> None:
            await anyio.sleep(60 if hang else 0)

    async with MonitoredSession(creator(), [Waiter(), Waiter(), Waiter()]) as sess:
        before = len(anyio.get_running_tasks())
        with anyio.move_on_after(0.02) as scope:
            await sess.run("a")
        assert scope.cancelled_caught
        await anyio.wait_all_tasks_blocked()
        assert len(anyio.get_running_tasks()) == before
        hang = False
        with anyio.fail_after(5):
            assert await sess.run("a") == 1


async def test_cancelling_the_block_closes_everything_within_grace() -> None:
    """Cancelling the whole block: no end, coordinator and session closed, no task left."""
    hook = RecordingHook()
    session_creator = ScriptedCreator({"a": 1}, hang_at={0: [1]})
    before = len(anyio.get_running_tasks())
    with anyio.move_on_after(0.05) as scope:
        async with MonitoredSession(session_creator, [hook], stop_grace_period=1) as sess:
            coord = hook.calls[1].args["coord"]
            coord.start_soon(anyio.sleep_forever)
            await sess.run("a")
            await sess.run("a")
    assert scope.cancelled_caught
    assert "end" not in hook.phases()
    assert session_creator.sessions[0].closed == 1
    assert coord.joined
    assert len(anyio.get_running_tasks()) == before


class _QuietHook:
    def before_run(self, run_context: Any) -> None:
        return None


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
@pytest.mark.parametrize("hooked", [False, True], ids=["bare", "hooked"])
async def test_session_returning_wrong_number_of_values(hooked: bool, warm: bool) -> None:
    """A session answering the wrong number of values is a TypeError naming its type and
    counts: on a step without hooks and with one, on the first (timed) steps and later."""

    class Short(ScriptedSession):
        async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
            return []

    async def make() -> Short:
        return Short()

    async with MonitoredSession(make, [_QuietHook()] if hooked else []) as sess:
        for _ in range(300 if warm else 0):
            await sess.run()  # no fetches: no values is the right answer
        with pytest.raises(TypeError, match=r"Short\.run returned 0 values for 1 fetches"):
            await sess.run("a")
        assert sess.statistics().failed_steps == 1  # the run failed: counted as a failed step
        await sess.aclose()


class _OwnCounter:
    """A step counter of the user's own (not the in-process ``LocalStepCounter``)."""

    def __init__(self) -> None:
        self.inner = LocalStepCounter()

    async def get(self) -> int:
        return await self.inner.get()

    async def increment(self, n: int = 1) -> int:
        return await self.inner.increment(n)

    async def set(self, value: int) -> None:
        await self.inner.set(value)

    async def wait_for(self, target: int) -> int:
        return await self.inner.wait_for(target)


@pytest.mark.parametrize("hooked", [False, True], ids=["bare", "hooked"])
async def test_a_counter_of_the_users_own_counts_every_step(hooked: bool) -> None:
    """Every step increments a step counter that is not the in-process one, timed or not."""
    counter = _OwnCounter()
    async with MonitoredSession(ScriptedCreator({"a": 1}), [_QuietHook()] if hooked else [], step_counter=counter) as sess:
        for _ in range(300):
            assert await sess.run("a") == 1
        assert await sess.global_step() == 300
    assert counter.inner.value == 300


async def test_async_factory_is_a_creator() -> None:
    """A plain async factory works as a session creator."""

    async def make() -> ScriptedSession:
        return ScriptedSession({"a": 7})

    async with MonitoredSession(make) as sess:
        assert await sess.run({"v": "a"}) == {"v": 7}


async def test_creator_returning_non_session_is_rejected() -> None:
    """A creator returning something without async run() is a TypeError naming it."""

    async def make() -> object:
        return 42

    with pytest.raises(TypeError, match=r"returned 42 \(int\), which is not a session"):
        async with MonitoredSession(make):
            pass


async def test_error_in_end_propagates_after_closing() -> None:
    """An error from end() propagates from the clean exit after the session is closed (T24)."""
    session_creator = creator()
    with pytest.raises(ValueError, match="end failed"):
        async with MonitoredSession(session_creator, [RecordingHook(raises={"end": ValueError("end failed")})]):
            pass
    assert session_creator.sessions[0].closed == 1


async def test_coordinator_exception_raised_at_exit() -> None:
    """An exception reported to the coordinator does not break run() and is raised at exit (◆70, ◆71, ◆98)."""
    for cls in (MonitoredSession, SingularMonitoredSession):
        hook = RecordingHook()
        with pytest.raises(ArithmeticError, match="background"):
            async with cls(creator(), [hook]) as sess:
                hook.calls[1].args["coord"].request_stop(ArithmeticError("background"))
                assert await sess.run("a") == 1
                assert sess.should_stop()


async def test_singular_raw_session_is_none_after_close() -> None:
    """SingularMonitoredSession.raw_session() is the session while open, None after (◆99)."""
    session_creator = creator()
    async with SingularMonitoredSession(session_creator) as sess:
        assert sess.raw_session() is session_creator.sessions[0]
    assert sess.raw_session() is None


async def test_hooks_with_no_overridden_methods_cost_nothing() -> None:
    """A plain SessionRunHook is accepted and never called."""
    async with MonitoredSession(creator(), [SessionRunHook()]) as sess:
        assert not (sess._before.calls or sess._after.calls)
        assert await sess.run("a") == 1


async def test_fetch_runs_a_structure_against_a_raw_session() -> None:
    """hookrun.fetch packs a nested structure from a raw session outside a step."""
    raw = ScriptedSession({"a": 1, "b": 2})
    assert await hookrun.fetch(raw, {"x": ["a", "b"], "y": "a"}) == {"x": [1, 2], "y": 1}


def test_non_hook_is_rejected_at_construction() -> None:
    """An object with none of the five methods is a TypeError naming it."""
    with pytest.raises(TypeError, match=r"hooks\[1\] = 42 \(int\) is not a hook"):
        MonitoredSession(creator(), [RecordingHook(), 42])
    with pytest.raises(TypeError, match="is the class RecordingHook"):
        MonitoredSession(creator(), [RecordingHook])
    with pytest.raises(TypeError, match="wrap a single hook in a list"):
        MonitoredSession(creator(), RecordingHook())  # type: ignore[arg-type]


def test_bad_settings_are_rejected_at_construction() -> None:
    """Negative grace, zero hook timeout and creators needing arguments are rejected with clear messages."""
    with pytest.raises(ValueError, match="stop_grace_period must be a number of seconds >= 0"):
        MonitoredSession(creator(), stop_grace_period=-1)
    with pytest.raises(ValueError, match="hook_timeout must be a number of seconds > 0"):
        MonitoredSession(creator(), hook_timeout=0)
    with pytest.raises(TypeError, match=r"session_creator .*<lambda> needs arguments \(path\)"):
        MonitoredSession(lambda path: ScriptedSession())  # type: ignore[arg-type,misc]  # the mistake under test
    with pytest.raises(TypeError, match="recoverable must hold exception classes"):
        MonitoredSession(creator(), recoverable=[42])  # type: ignore[list-item]


async def test_error_from_run_does_not_stop_the_coordinator() -> None:
    """An error from run() in the caller's task does not stop the coordinator or the session (◆35)."""
    hook = RecordingHook()
    session_creator = ScriptedCreator({"a": 1}, session_errors={0: {0: ValueError("bad step")}})
    async with SingularMonitoredSession(session_creator, [hook]) as sess:
        with pytest.raises(ValueError, match="bad step"):
            await sess.run("a")
        assert not hook.calls[1].args["coord"].should_stop()
        assert not sess.should_stop()
        assert await sess.run("a") == 1


async def test_close_stops_and_joins_background_tasks_after_an_error() -> None:
    """Leaving the block, even after a failed run, stops and joins the coordinator's tasks (◆36, ◆37)."""
    hook = RecordingHook()
    stopped: list[str] = []

    async def watcher(coord: hookrun.Coordinator) -> None:
        await coord.wait_for_stop()
        stopped.append("watcher saw stop")

    session_creator = ScriptedCreator({"a": 1}, session_errors={0: {0: ValueError("bad step")}})
    with pytest.raises(ValueError, match="bad step"):
        async with MonitoredSession(session_creator, [hook]) as sess:
            coord = hook.calls[1].args["coord"]
            coord.start_soon(watcher, coord)
            await sess.run("a")
    assert stopped == ["watcher saw stop"]
    assert coord.should_stop() and coord.joined


class Changing(SessionRunHook):
    """Returns whatever ``request`` currently is, and records what it got back."""

    def __init__(self) -> None:
        self.request: SessionRunArgs | None = None
        self.got: list[Any] = []

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        return self.request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.got.append(run_values.results)


async def test_fetch_layout_follows_requests_that_change() -> None:
    """Reusing the last step's fetch layout never serves a stale one: mutation in place,
    a different structure, an equal tuple for a list, a namedtuple, or no request at all."""
    hook = Changing()
    wanted = ["a", "b"]
    async with MonitoredSession(creator(), [hook]) as sess:
        hook.request = SessionRunArgs(wanted)
        assert await sess.run("c") == 3
        wanted.append("loss")  # the same list object, mutated in place
        await sess.run("c")
        hook.request = SessionRunArgs(("a", "b"))  # equal items, another container type
        await sess.run("c")
        hook.request = SessionRunArgs(Pair("a", "b"))
        await sess.run("c")
        hook.request = None
        await sess.run("c")
        hook.request = SessionRunArgs({"x": "c"})
        caller = ["a"]
        assert await sess.run(caller) == [1]
        caller[0] = "b"  # the caller's structure mutated in place
        assert await sess.run(caller) == [2]
    assert hook.got == [[1, 2], [1, 2, 0.5], (1, 2), Pair(1, 2), None, {"x": 3}, {"x": 3}]
    assert type(hook.got[3]) is Pair
