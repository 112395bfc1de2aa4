"""What a new user gets wrong first, and the error that says so; the accessors TF users reach for."""

from __future__ import annotations

import gc
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    Coordinator,
    LocalStepCounter,
    MonitoredSession,
    SessionRunArgs,
    SingularMonitoredSession,
    StepSession,
    UnavailableError,
)
from hookrun.testing import RecordingHook, ScriptedCreator

LIMIT = 10.0
SESSION_TYPES = [MonitoredSession, SingularMonitoredSession]


async def _create() -> StepSession:
    return StepSession(lambda feeds: {"loss": 0.5, **feeds})


@pytest.mark.anyio
@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_hooks_none_means_no_hooks(session_type: type[Any]) -> None:
    with anyio.fail_after(LIMIT):
        async with session_type(_create, hooks=None) as sess:
            assert sess.hooks == ()
            assert await sess.run("loss") == 0.5


@pytest.mark.parametrize("session_type", SESSION_TYPES)
def test_with_instead_of_async_with_says_use_async_with(session_type: type[Any]) -> None:
    sess = session_type(_create)
    with pytest.raises(TypeError, match=rf"^{session_type.__name__} is an async context manager: "
                       r"use 'async with', not 'with'$"), sess:
        pass


def test_coordinator_with_instead_of_async_with_says_use_async_with() -> None:
    with pytest.raises(TypeError, match="Coordinator is an async context manager: use 'async with'"), \
            Coordinator():
        pass


@pytest.mark.anyio
@pytest.mark.parametrize("session_type", SESSION_TYPES)
@pytest.mark.parametrize("bad", [["x", 1], "x=1", [], ""])
async def test_a_feed_dict_that_is_not_a_mapping_is_refused_naming_the_caller(
    session_type: type[Any], bad: Any
) -> None:
    hooked = RecordingHook()
    for hooks in ([], [hooked]):
        with anyio.fail_after(LIMIT):
            async with session_type(_create, hooks) as sess:
                with pytest.raises(TypeError, match=r"^the caller passed feed_dict=.*, a (list|str); "
                                   r"a feed_dict must be a mapping"):
                    await sess.run("loss", feed_dict=bad)
                assert await sess.run("loss", feed_dict={"x": 1}) == 0.5  # still usable


@pytest.mark.anyio
@pytest.mark.parametrize("bad", [[("x", 1)], "x", [], ""])
async def test_a_hooks_feed_dict_that_is_not_a_mapping_is_refused_naming_the_hook(bad: Any) -> None:
    hook = RecordingHook("feeder", request=SessionRunArgs(feed_dict=bad))
    with anyio.fail_after(LIMIT), pytest.raises(
        TypeError, match=r"^hook feeder passed feed_dict=.*; a feed_dict must be a mapping"
    ):
        async with SingularMonitoredSession(_create, [RecordingHook("other"), hook]) as sess:
            await sess.run("loss")


@pytest.mark.anyio
async def test_a_sequential_members_bad_feed_dict_names_the_member() -> None:
    member = RecordingHook("member", request=SessionRunArgs(feed_dict=[("x", 1)]))  # type: ignore[arg-type]
    with anyio.fail_after(LIMIT), pytest.raises(TypeError, match=r"^hook member passed feed_dict="):
        async with SingularMonitoredSession(_create, [hookrun.sequential(member)]) as sess:
            await sess.run("loss")


@pytest.mark.anyio
async def test_run_with_hooks_refuses_a_bad_feed_dict_too() -> None:
    async def step(context: Any) -> Any:
        return await context.run_with_hooks("loss", feed_dict=["x"])

    with anyio.fail_after(LIMIT):
        async with MonitoredSession(_create, [RecordingHook()]) as sess:
            with pytest.raises(TypeError, match=r"^the caller passed feed_dict="):
                await sess.run_step_fn(step)


@pytest.mark.anyio
async def test_a_coroutine_object_as_creator_is_refused_without_a_warning() -> None:
    """create() instead of create: refused, and no 'never awaited' RuntimeWarning afterwards."""
    with pytest.raises(TypeError, match=r"session_creator is a coroutine object \(_create\(\) was "
                       r"called\): pass the async factory itself, session_creator=_create, not _create\(\)"):
        MonitoredSession(_create())
    gc.collect()  # filterwarnings=error turns a "never awaited" warning into a failure


@pytest.mark.anyio
@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_a_missing_fetch_key_names_the_hook_that_asked_for_it(session_type: type[Any]) -> None:
    asker = RecordingHook("asker", request=SessionRunArgs({"acc": "accuracy"}))
    with anyio.fail_after(LIMIT), pytest.raises(KeyError) as caught:
        async with session_type(_create, [RecordingHook("quiet"), asker]) as sess:
            await sess.run("loss")
    assert "no value for fetch 'accuracy'" in str(caught.value)
    assert caught.value.__notes__ == ["hookrun: the fetch 'accuracy' was asked for by hook asker"]


@pytest.mark.anyio
async def test_a_missing_fetch_asked_by_the_caller_and_a_hook_names_both() -> None:
    asker = RecordingHook("asker", request=SessionRunArgs(["accuracy"]))
    with anyio.fail_after(LIMIT), pytest.raises(KeyError) as caught:
        async with SingularMonitoredSession(_create, [asker]) as sess:
            await sess.run({"a": "accuracy"})
    assert caught.value.__notes__ == [
        "hookrun: the fetch 'accuracy' was asked for by the caller and hook asker"
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_raw_session_and_global_step_are_public(session_type: type[Any]) -> None:
    creator = ScriptedCreator({"x": 1})
    counter = LocalStepCounter(initial=10)
    sess = session_type(creator, step_counter=counter)
    assert sess.raw_session() is None
    assert sess.step_counter is counter
    with anyio.fail_after(LIMIT):
        async with sess:
            assert sess.raw_session() is creator.sessions[0]
            assert await sess.global_step() == 10
            await sess.run("x")
            await sess.run("x")
            assert await sess.global_step() == 12
    assert sess.raw_session() is None


@pytest.mark.anyio
async def test_raw_session_follows_recovery() -> None:
    creator = ScriptedCreator({"x": 1}, session_errors={0: {1: UnavailableError("lost")}})
    retry = hookrun.RetryPolicy(initial_delay=0.0)
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(creator, retry=retry) as sess:
            await sess.run("x")
            assert sess.raw_session() is creator.sessions[0]
            await sess.run("x")
            assert sess.raw_session() is creator.sessions[1]
            assert await sess.global_step() == 2
