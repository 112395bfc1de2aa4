"""One lane and several follow one rule where they used to part: a step function's hooked
runs after a stop and at once (they take turns), ``iterate()`` after a stop or with a stop
asked while it waits for a feed, errors of the feeds' own iterator, closes while a step
loses its session or while a lane's session is re-created, step numbers after a step
function's recovery, feeds that refuse a copy, and a missing fetch's note. Each test runs with one lane and
with several."""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    RetryPolicy,
    RunAfterStopError,
    RunMetadata,
    RunOptions,
    SessionClosedError,
    SessionRunContext,
    SessionRunValues,
    StepContext,
    StepSession,
    UnavailableError,
)
from hookrun.hooks import StopAtStepHook

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0, max_delay=0)
LIMIT = 10.0


async def _echo(feeds: Mapping[Any, Any]) -> dict[str, Any]:
    await anyio.sleep(0.001)
    return {"y": feeds.get("x")}


class Phases:
    """Records each hook phase with its step numbers (safe under overlapping steps)."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    async def before_run(self, run_context: SessionRunContext) -> None:
        self.log.append(("before_run", run_context.global_step))

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.log.append(("after_run", run_values.global_step))


@pytest.mark.parametrize("max_in_flight", [1, 2])
async def test_run_with_hooks_after_a_stop_request_is_refused(max_in_flight: int) -> None:
    async with MonitoredSession(lambda: StepSession(_echo), max_in_flight=max_in_flight) as sess:

        async def step_fn(ctx: StepContext) -> Any:
            ctx.request_stop()
            return await ctx.run_with_hooks("y", {"x": 1})

        with anyio.fail_after(LIMIT), pytest.raises(RunAfterStopError, match="run_with_hooks"):
            await sess.run_step_fn(step_fn)
        assert await sess.step_counter.get() == 0


@pytest.mark.parametrize("max_in_flight", [1, 2])
async def test_a_hook_stop_refuses_the_next_run_with_hooks_of_the_same_step_function(max_in_flight: int) -> None:
    """``StopAtStepHook(last_step=1)`` never lets a step function make a second step."""
    hook = Phases()
    async with MonitoredSession(
        lambda: StepSession(_echo), [StopAtStepHook(last_step=1), hook], max_in_flight=max_in_flight,
    ) as sess:

        async def step_fn(ctx: StepContext) -> Any:
            first = await ctx.run_with_hooks("y", {"x": 1})
            return first, await ctx.run_with_hooks("y", {"x": 2})

        with anyio.fail_after(LIMIT), pytest.raises(RunAfterStopError):
            await sess.run_step_fn(step_fn)
        assert await sess.step_counter.get() == 1
    assert hook.log == [("before_run", 0), ("after_run", 1)]


async def test_two_hooked_runs_of_one_step_function_at_once_take_turns_with_one_lane() -> None:
    """With one lane a step function's hooked runs are steps of the one lane, one at a time:
    a second one while the first is under way waits for it (as a second ``run()`` does),
    never overlapped under hooks that did not declare ``overlapping_steps``."""
    hook = Phases()
    release = anyio.Event()

    async def slow(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        await release.wait()
        return {"y": feeds["x"]}

    async with MonitoredSession(lambda: StepSession(slow), [hook]) as sess:

        async def release_once_blocked() -> None:
            await anyio.wait_all_tasks_blocked()
            release.set()

        async def step_fn(ctx: StepContext) -> Any:
            first: list[Any] = []

            async def hooked_first() -> None:
                first.append(await ctx.run_with_hooks("y", {"x": 1}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(hooked_first)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(release_once_blocked)
                second = await ctx.run_with_hooks("y", {"x": 2})
                assert first == [1]  # the first one ended before the second one started
            return first, second

        with anyio.fail_after(LIMIT):
            assert await sess.run_step_fn(step_fn) == ([1], 2)
        assert await sess.step_counter.get() == 2
    assert hook.log == [("before_run", 0), ("after_run", 1), ("before_run", 1), ("after_run", 2)]


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("how", ["hook", "end of input", "step function"])
async def test_iterate_after_a_stop_yields_nothing(max_in_flight: int, how: str) -> None:
    async def step(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        if feeds.get("eof"):
            raise anyio.EndOfStream
        return {"y": feeds["x"]}

    hooks = [StopAtStepHook(last_step=2)] if how == "hook" else []
    async with MonitoredSession(lambda: StepSession(step), hooks, max_in_flight=max_in_flight) as sess:
        with anyio.fail_after(LIMIT):
            if how == "hook":
                assert [y async for y in sess.iterate("y", ({"x": i} for i in range(5)))] == [0, 1]
            elif how == "end of input":
                assert [y async for y in sess.iterate("y", [{"x": 0}, {"x": 1}, {"eof": 1}, {"x": 3}])] == [0, 1]
            else:

                async def step_fn(ctx: StepContext) -> None:
                    ctx.request_stop()

                await sess.run_step_fn(step_fn)
            assert sess.should_stop()
            assert [y async for y in sess.iterate("y", ({"x": i} for i in range(3)))] == []
        with pytest.raises(RunAfterStopError):
            await sess.run("y", {"x": 9})


class _Lost:
    async def run(
        self, fetches: Sequence[Hashable], feeds: Mapping[Any, Any], options: RunOptions, metadata: RunMetadata
    ) -> list[Any]:
        await anyio.sleep(0.1)
        raise UnavailableError("worker lost")

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
@pytest.mark.parametrize("entry", ["run", "iterate"])
async def test_a_step_that_loses_its_session_during_a_close_raises_session_closed(
    max_in_flight: int, entry: str
) -> None:
    """A close from another task lands while a step runs; the step then loses its session:
    it is not re-created, and the caller gets ``SessionClosedError`` caused by the loss."""
    sess = MonitoredSession(_Lost, max_in_flight=max_in_flight, retry=NO_WAIT)
    caught: list[BaseException] = []
    with anyio.fail_after(LIMIT):
        async with sess:

            async def closer() -> None:
                await anyio.sleep(0.02)
                await sess.aclose()

            async with anyio.create_task_group() as tg:
                tg.start_soon(closer)
                try:
                    if entry == "run":
                        await sess.run("y", {"x": 0})
                    else:
                        async for _ in sess.iterate("y", [{"x": 0}]):
                            pass
                except Exception as exc:
                    caught.append(exc)
    assert len(caught) == 1
    assert isinstance(caught[0], SessionClosedError), repr(caught[0])
    assert isinstance(caught[0].__cause__, UnavailableError)


@pytest.mark.parametrize("max_in_flight", [1, 3])
async def test_a_session_made_after_the_close_reaches_no_hook(max_in_flight: int) -> None:
    """A close lands while a lane's session is being re-created: ``run()`` raises
    ``SessionClosedError`` caused by the loss, the new session is closed as soon as it
    exists, and no hook sees it (no ``after_create_session`` after the close,
    with the session's one coordinator or any other)."""
    log: list[str] = []
    coords: list[object] = []
    made: list[Any] = []

    class Raw:
        def __init__(self) -> None:
            self.name = f"s{len(made) + 1}"
            self.fail = False

        async def run(self, fetches: Any, feeds: Any, options: Any, metadata: Any) -> list[Any]:
            if self.fail:
                raise UnavailableError("lost")
            return [0 for _ in fetches]

        async def aclose(self) -> None:
            log.append(f"aclose({self.name})")

    class Hook:
        overlapping_steps = True

        def after_create_session(self, session: Any, coord: Any) -> None:
            log.append(f"after_create_session({session.name})")
            coords.append(coord)

        def end(self, session: Any) -> None:
            log.append("end")

    async def creator() -> Raw:
        if len(made) >= max_in_flight:
            await anyio.sleep(0.2)  # the re-creation is slow
        raw = Raw()
        made.append(raw)
        return raw

    sess = MonitoredSession(creator, [Hook()], max_in_flight=max_in_flight, retry=NO_WAIT)
    with anyio.fail_after(LIMIT):
        async with sess:
            made[0].fail = True

            async def closer() -> None:
                await anyio.sleep(0.05)
                await sess.aclose()
                log.append("closed")

            async with anyio.create_task_group() as tg:
                tg.start_soon(closer)
                with pytest.raises(SessionClosedError) as caught:
                    await sess.run("y")
        await anyio.sleep(0.3)  # a re-creation left behind would reach its hooks by now
    assert isinstance(caught.value.__cause__, UnavailableError)  # the loss it was re-created for
    replacement = made[max_in_flight].name
    assert f"after_create_session({replacement})" not in log
    assert f"aclose({replacement})" in log
    assert len({id(coord) for coord in coords}) == 1
    assert log.index("closed") == len(log) - 1 or all(
        not entry.startswith("after_create_session") for entry in log[log.index("closed"):]
    )


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
@pytest.mark.parametrize("ordered", [True, False])
async def test_a_stop_asked_in_after_run_ends_iterate_waiting_for_a_quiet_feed(max_in_flight: int, ordered: bool) -> None:
    """A hook asks to stop in ``after_run`` while the next feed of an async source is not
    there yet: ``iterate()`` ends without waiting for the source (which never yields again)."""

    class StopAfterFirst:
        overlapping_steps = True

        def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            run_context.request_stop()

    async def feeds() -> Any:
        yield {"x": 1}
        await anyio.sleep_forever()
        yield {"x": 2}  # pragma: no cover - never reached

    async with MonitoredSession(lambda: StepSession(_echo), [StopAfterFirst()], max_in_flight=max_in_flight) as sess:
        with anyio.fail_after(LIMIT):
            async with contextlib.aclosing(feeds()) as source:
                assert [y async for y in sess.iterate("y", source, ordered=ordered)] == [1]
        assert sess.should_stop()


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("error", [anyio.EndOfStream, ValueError])
@pytest.mark.parametrize("source", ["sync", "async"])
async def test_an_error_of_the_feeds_iterator_is_raised_after_the_results_before_it(
    max_in_flight: int, error: type[Exception], source: str
) -> None:
    """Even a clean-stop error (``EndOfStream``) of the feeds' own iterator is raised in its
    place, as with one lane: only a step's clean stop ends the loop quietly."""

    def sync_feeds() -> Any:
        yield {"x": 1}
        yield {"x": 2}
        raise error("feeds broke")

    async def async_feeds() -> Any:
        for feed in sync_feeds():
            yield feed

    seen: list[Any] = []
    async with MonitoredSession(lambda: StepSession(_echo), max_in_flight=max_in_flight) as sess:
        with anyio.fail_after(LIMIT), pytest.raises(error):
            async for y in sess.iterate("y", sync_feeds() if source == "sync" else async_feeds()):
                seen.append(y)
        assert seen == [1, 2]


@pytest.mark.parametrize("max_in_flight", [1, 4])
async def test_a_step_function_recovered_hands_the_lost_number_out_again(max_in_flight: int) -> None:
    """A step function's hooked run loses its session: the step function is called again
    and its next hooked run has the number the lost one had, so ``StopAtStepHook`` stops
    after exactly ``last_step`` steps, as with one lane."""
    hook = Phases()
    runs = {"n": 0}

    class Raw:
        async def run(self, fetches: Any, feeds: Any, options: Any, metadata: Any) -> list[Any]:
            await anyio.sleep(0.001)
            runs["n"] += 1
            if runs["n"] == 2:
                raise UnavailableError("lost")
            return [1 for _ in fetches]

    async def create() -> Raw:
        return Raw()

    async with MonitoredSession(
        create, [StopAtStepHook(last_step=3), hook], max_in_flight=max_in_flight, retry=NO_WAIT
    ) as sess:

        async def step_fn(ctx: StepContext) -> None:
            while not sess.should_stop():
                await ctx.run_with_hooks("y")

        with anyio.fail_after(LIMIT):
            await sess.run_step_fn(step_fn)
        assert await sess.step_counter.get() == 3
    assert [entry for entry in hook.log if entry[0] == "after_run"] == [("after_run", 1), ("after_run", 2), ("after_run", 3)]
    assert sess.statistics().steps == 3


class _ReadOnly(dict):  # type: ignore[type-arg]
    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("read-only")


@pytest.mark.parametrize("max_in_flight", [1, 4])
async def test_a_dict_class_that_refuses_a_copy_is_fed_as_it_is(max_in_flight: int) -> None:
    feeds = [_ReadOnly({"x": 1}), _ReadOnly({"x": 2})]
    async with MonitoredSession(lambda: StepSession(_echo), max_in_flight=max_in_flight) as sess:
        with anyio.fail_after(LIMIT):
            assert [y async for y in sess.iterate("y", feeds)] == [1, 2]


@pytest.mark.parametrize("max_in_flight", [1, 2, 4])
async def test_a_stop_asked_in_a_lost_attempt_of_a_step_function_stands(max_in_flight: int) -> None:
    """``StopAtStepHook(last_step=2)`` asks to stop in step 2's ``before_run``; step 2's run
    then loses its session. The stop stands at every ``max_in_flight``: the step function
    called again after the recovery sees ``should_stop()`` and makes no hooked run (one
    that tried would get ``RunAfterStopError``), so no step past ``last_step`` is made."""
    hook = Phases()
    calls = {"n": 0}

    async def body(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise UnavailableError("lost")
        return {"y": 1}

    async with MonitoredSession(
        lambda: StepSession(body), [StopAtStepHook(last_step=2), hook], max_in_flight=max_in_flight, retry=NO_WAIT,
    ) as sess:
        attempts: list[bool] = []

        async def step_fn(ctx: StepContext) -> None:
            attempts.append(sess.should_stop())
            while not sess.should_stop():
                await ctx.run_with_hooks("y", {"x": 1})

        with anyio.fail_after(LIMIT):
            await sess.run_step_fn(step_fn)
            assert attempts == [False, True]

            async def hooked_at_once(ctx: StepContext) -> None:
                await ctx.run_with_hooks("y", {"x": 1})

            with pytest.raises(RunAfterStopError):
                await sess.run_step_fn(hooked_at_once)
        assert await sess.step_counter.get() == 1
    assert [entry for entry in hook.log if entry[0] == "after_run"] == [("after_run", 1)]


async def test_one_hooked_run_at_a_time_holds_across_a_step_functions_recovery() -> None:
    """With one lane, a hooked run left running by a step function attempt that was lost
    still counts: the attempt made again waits for it before it starts a second one."""
    hook = Phases()
    release = anyio.Event()

    async def slow(feeds: Mapping[Any, Any]) -> dict[str, Any]:
        await release.wait()
        return {"y": 1}

    attempts: list[str] = []
    first_session: list[Any] = []
    async with MonitoredSession(lambda: StepSession(slow), [hook], retry=NO_WAIT) as sess:

        with anyio.fail_after(LIMIT):
            async with anyio.create_task_group() as outer:

                async def step_fn(ctx: StepContext) -> None:
                    if not attempts:
                        attempts.append("first")
                        first_session.append(ctx.session)
                        outer.start_soon(ctx.run_with_hooks, "y")  # outlives this attempt
                        await anyio.wait_all_tasks_blocked()
                        raise UnavailableError("lost while a hooked run is under way")
                    attempts.append("again")
                    assert ctx.session is not first_session[0]  # the attempt made again has a new one
                    outer.start_soon(release_once_blocked)
                    await ctx.run_with_hooks("y")
                    assert hook.log[:2] == [("before_run", 0), ("after_run", 1)]  # the one left ran first

                async def release_once_blocked() -> None:
                    await anyio.wait_all_tasks_blocked()
                    release.set()

                await sess.run_step_fn(step_fn)
    assert attempts == ["first", "again"]
    assert hook.log == [("before_run", 0), ("after_run", 1), ("before_run", 1), ("after_run", 2)]


@pytest.mark.parametrize("max_in_flight", [1, 4])
@pytest.mark.parametrize("timed", [False, True])
async def test_a_missing_fetch_names_who_asked_for_it(max_in_flight: int, timed: bool) -> None:
    class Asker:
        overlapping_steps = True

        def before_run(self, run_context: SessionRunContext) -> Any:
            from hookrun import SessionRunArgs

            return SessionRunArgs("missing_key")

    options = RunOptions(timeout=5.0) if timed else None
    async with MonitoredSession(lambda: StepSession(_echo), [Asker()], max_in_flight=max_in_flight) as sess:
        with anyio.fail_after(LIMIT), pytest.raises(KeyError) as caught:
            await sess.run("y", {"x": 1}, options=options)
    assert any("was asked for by hook Asker" in note for note in getattr(caught.value, "__notes__", []))
