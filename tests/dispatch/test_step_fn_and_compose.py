"""run_step_fn, in_thread and sequential, StepSession and the public surface."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    AbortedError,
    MonitoredSession,
    RetryPolicy,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
    StepContext,
    StepSession,
)
from hookrun.testing import RecordingHook, ScriptedCreator

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0, jitter=False)


async def test_step_fn_raw_runs_bypass_hooks_and_run_with_hooks_runs_them() -> None:
    """Raw session runs trigger no hooks; run_with_hooks does; the value is returned (◆80, ◆88)."""
    hook = RecordingHook(request=SessionRunArgs("b"))
    async with MonitoredSession(ScriptedCreator({"a": 1, "b": 2}), [hook]) as sess:

        async def step(step_context: StepContext) -> Any:
            raw = await hookrun.fetch(step_context.session, "a")
            assert hook.count("before_run") == 0
            return raw, await step_context.run_with_hooks("a")

        assert await sess.run_step_fn(step) == (1, 1)
    assert hook.calls[3].args["results"] == 2


async def test_step_fn_request_stop_sets_should_stop() -> None:
    """request_stop() in step_fn makes should_stop() True and a later run() raises (differs from TF)."""
    hook = RecordingHook()
    async with MonitoredSession(ScriptedCreator({"a": 1}), [hook]) as sess:
        while not sess.should_stop():

            async def step(step_context: StepContext) -> str:
                step_context.request_stop()
                return "stopping"

            assert await sess.run_step_fn(step) == "stopping"
        with pytest.raises(hookrun.RunAfterStopError):
            await sess.run()
    assert hook.count("before_run") == 0 and hook.count("end") == 1


async def test_recovered_step_fn_gets_the_new_session() -> None:
    """An AbortedError in step_fn re-runs it from the start with the new session (◆91, ◆92; T45 fixed)."""
    session_creator = ScriptedCreator({"a": 1})
    seen: list[Any] = []
    async with MonitoredSession(session_creator, retry=NO_WAIT) as sess:

        async def step(step_context: StepContext) -> Any:
            seen.append(step_context.session)
            value = await hookrun.fetch(step_context.session, "a")
            if len(seen) == 1:
                raise AbortedError("preempted")
            return value

        assert await sess.run_step_fn(step) == 1
    assert seen == session_creator.sessions
    assert seen[0] is not seen[1]


async def test_step_fn_hook_error_in_run_with_hooks_reruns_whole_step_fn() -> None:
    """AbortedError from a hook's before_run inside run_with_hooks re-runs step_fn (◆94)."""
    hook = RecordingHook(raises={"before_run": AbortedError("x")})
    calls = 0
    async with MonitoredSession(ScriptedCreator({"a": 1}), [hook], retry=NO_WAIT) as sess:

        async def step(step_context: StepContext) -> Any:
            nonlocal calls
            calls += 1
            return await step_context.run_with_hooks("a")

        assert await sess.run_step_fn(step) == 1
    assert calls == 2


async def test_singular_step_fn_propagates() -> None:
    """SingularMonitoredSession does not recover step_fn (◆93)."""

    async def step(step_context: StepContext) -> None:
        raise AbortedError("no")

    with pytest.raises(AbortedError):
        async with SingularMonitoredSession(ScriptedCreator()) as sess:
            await sess.run_step_fn(step)


async def test_step_fn_signature_is_checked() -> None:
    """Extra parameters are a ValueError; bound methods with (self, step_context) work (◆85, ◆86, ◆87)."""

    class Owner:
        async def good(self, step_context: StepContext) -> int:
            return 3

        async def bad(self, step_context: StepContext, extra: int) -> int:
            return extra

    async def two(step_context: StepContext, other: int) -> None:
        return None

    async with MonitoredSession(ScriptedCreator()) as sess:
        assert await sess.run_step_fn(Owner().good) == 3
        with pytest.raises(ValueError, match="may either have one `step_context` argument"):
            await sess.run_step_fn(Owner().bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"Got \('step_context', 'other'\) instead"):
            await sess.run_step_fn(two)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="needs an async function"):
            await sess.run_step_fn(lambda step_context: None)  # type: ignore[arg-type,return-value]


async def test_in_thread_runs_blocking_methods_in_worker_threads() -> None:
    """in_thread(hook) runs each method in a worker thread, not on the event loop."""
    loop_thread = threading.get_ident()
    threads: list[int] = []

    class Blocking(SessionRunHook):
        def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
            threads.append(threading.get_ident())
            return SessionRunArgs("a")

        def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            threads.append(threading.get_ident())
            assert run_values.results == 1

    async with MonitoredSession(ScriptedCreator({"a": 1}), [hookrun.in_thread(Blocking())]) as sess:
        await sess.run()
    assert len(threads) == 2 and loop_thread not in threads


def test_in_thread_rejects_async_hooks() -> None:
    """in_thread is for blocking plain-function hooks."""
    with pytest.raises(TypeError, match=r"recorder.begin is async"):
        hookrun.in_thread(RecordingHook())


async def test_sequential_orders_members_and_splits_results() -> None:
    """sequential(h1, h2) runs members in order in every phase; each gets its own results."""
    log: list[tuple[str, str]] = []
    first = RecordingHook("first", request=SessionRunArgs("a", {"p": 1}), log=log)
    second = RecordingHook("second", request=SessionRunArgs(["b"]), log=log)
    async with MonitoredSession(ScriptedCreator({"a": 1, "b": 2}), [hookrun.sequential(first, second)]) as sess:
        assert await sess.run("p") == 1
    assert log == [(n, p) for p in ("begin", "after_create_session", "before_run", "after_run", "end") for n in ("first", "second")]
    assert first.calls[3].args["results"] == 1
    assert second.calls[3].args["results"] == [2]


async def test_step_session_sync_fn_runs_in_a_thread_and_missing_key_lists_keys() -> None:
    """StepSession: sync step functions run in a worker thread; a missing key lists those that exist."""
    loop_thread = threading.get_ident()

    def step(feed_dict: Any) -> dict[str, Any]:
        assert threading.get_ident() != loop_thread
        return {"y": feed_dict["x"] * 2}

    async def make() -> StepSession:
        return StepSession(step)

    async with MonitoredSession(make) as sess:
        assert await sess.run("y", {"x": 21}) == 42
        with pytest.raises(KeyError, match=r"no value for fetch 'z'; the step produced 'y'"):
            await sess.run("z", {"x": 1})
        await sess.aclose()


async def test_fetching_a_fed_key_says_fed_keys_are_not_fetched_back() -> None:
    """A fetch of a key only fed (not returned by the step) says the step must return it."""

    async def make() -> StepSession:
        return StepSession(lambda feed_dict: {"loss": 0.5, "y": 1})

    async with MonitoredSession(make) as sess:
        expected = (
            r"no value for fetch 'x'; 'x' is fed, but a fed key is not fetched back: a StepSession "
            r"answers only from what its step returns \(return it from the step to fetch it\); "
            r"the step produced 'loss', 'y'"
        )
        with pytest.raises(KeyError, match=expected):
            await sess.run("x", {"x": 1})


def test_public_names_are_exactly_the_contract() -> None:
    """import hookrun gives the names of the core contract (and __all__ is sorted)."""
    expected = {
        "SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues", "RunOptions",
        "RunMetadata", "MonitoredSession", "SingularMonitoredSession", "StepContext", "Coordinator",
        "StepSession", "SessionCreator", "SessionCreatorLike", "SessionFactory", "Session", "StepCounter", "LocalStepCounter", "RetryPolicy",
        "in_thread", "sequential", "fetch", "borrowed", "HookrunError", "OutOfRangeError", "AbortedError",
        "UnavailableError", "DeadlineExceededError", "HookTimeoutError", "FeedConflictError",
        "RunAfterStopError", "SessionClosedError",
    }
    assert expected <= set(hookrun.__all__)
    assert list(hookrun.__all__) == sorted(hookrun.__all__, key=str.lower) or list(hookrun.__all__) == sorted(hookrun.__all__)
    assert all(hasattr(hookrun, name) for name in hookrun.__all__)


def test_error_tree() -> None:
    """Every error is a HookrunError and subclasses the builtin with the same meaning."""
    assert issubclass(hookrun.DeadlineExceededError, TimeoutError)
    assert issubclass(hookrun.HookTimeoutError, TimeoutError)
    for cls in (hookrun.FeedConflictError, hookrun.RunAfterStopError, hookrun.SessionClosedError):
        assert issubclass(cls, RuntimeError) and issubclass(cls, hookrun.HookrunError)


async def test_local_step_counter_wait_for_does_not_poll() -> None:
    """wait_for parks until increment reaches the target."""
    counter = hookrun.LocalStepCounter()
    reached: list[int] = []

    async def waiter() -> None:
        reached.append(await counter.wait_for(2))

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        await counter.increment()
        await anyio.wait_all_tasks_blocked()
        assert reached == []
        await counter.increment()
    assert reached == [2]


async def test_singular_step_fn_runs_hooks_like_monitored() -> None:
    """run_step_fn on a SingularMonitoredSession runs hooks the same way (◆89)."""
    hook = RecordingHook(request=SessionRunArgs("b"))
    async with SingularMonitoredSession(ScriptedCreator({"a": 1, "b": 2}), [hook]) as sess:

        async def step(step_context: StepContext) -> Any:
            return await step_context.run_with_hooks("a")

        assert await sess.run_step_fn(step) == 1
    assert hook.calls[3].args["results"] == 2


async def test_step_fn_that_only_requests_stop_calls_no_hooks() -> None:
    """A step_fn that only requests stop triggers no before_run/after_run (◆90)."""
    hook = RecordingHook()
    async with MonitoredSession(ScriptedCreator(), [hook]) as sess:

        async def step(step_context: StepContext) -> None:
            step_context.request_stop()

        await sess.run_step_fn(step)
        assert sess.should_stop()
    assert hook.phases() == ["begin", "after_create_session", "end"]
