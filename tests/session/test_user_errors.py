"""What a new user gets wrong first, and the error that says so; the accessors TF users reach for."""

from __future__ import annotations

import errno
import gc
import os
from pathlib import Path
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
        MonitoredSession(_create())  # type: ignore[arg-type]  # the mistake under test
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


# -- fetch structures that are too deep or contain themselves ---------------------------------


def _nested(levels: int) -> Any:
    """``levels`` lists, each holding the next and the key "loss"."""
    structure: Any = "loss"
    for _ in range(levels):
        structure = [structure, "loss"]
    return structure


def _self_referencing(kind: str) -> Any:
    if kind == "list":
        looped: Any = ["loss"]
        looped.append(looped)
        return looped
    mapping: dict[str, Any] = {"a": "loss"}
    mapping["b"] = ({"c": mapping},)
    return mapping


@pytest.mark.anyio
@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_a_5000_deep_fetch_is_refused_naming_the_caller_and_the_limit(session_type: type[Any]) -> None:
    """A caller's 5,000-deep structure: a ValueError naming the caller and the limit, not a RecursionError."""
    with anyio.fail_after(LIMIT):
        async with session_type(_create, [RecordingHook()]) as sess:
            with pytest.raises(ValueError, match=r"^the caller fetches a structure nested more than 100 "
                               r"levels deep; fetch structures nest at most 100 levels deep$"):
                await sess.run(_nested(5_000))
            assert await sess.run("loss") == 0.5  # still usable


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["list", "dict"])
async def test_a_fetch_that_contains_itself_is_refused_naming_the_caller(kind: str) -> None:
    """A list or dict inside itself, fetched with and without hooks: says it contains itself."""
    for hooks in ([], [RecordingHook()]):
        with anyio.fail_after(LIMIT):
            async with SingularMonitoredSession(_create, hooks) as sess:
                with pytest.raises(ValueError, match=r"^the caller fetches a structure that contains itself "
                                   r"\(a (list|tuple|dict) in it holds itself, directly or not\); fetch "
                                   r"structures nest at most 100 levels deep$"):
                    await sess.run(_self_referencing(kind))


@pytest.mark.anyio
async def test_a_hooks_self_referencing_fetch_names_the_hook() -> None:
    """A hook's before_run asking for a structure inside itself: the error names the hook."""
    hook = RecordingHook("looper", request=SessionRunArgs(_self_referencing("list")))
    with anyio.fail_after(LIMIT), pytest.raises(ValueError, match=r"^hook looper fetches a structure that contains itself"):
        async with SingularMonitoredSession(_create, [RecordingHook("other"), hook]) as sess:
            await sess.run("loss")


@pytest.mark.anyio
async def test_fetch_helper_refuses_a_deep_structure() -> None:
    """hookrun.fetch() on a raw session names itself as the party."""
    with anyio.fail_after(LIMIT), pytest.raises(ValueError, match=r"^fetch\(\) fetches a structure nested more than 100"):
        await hookrun.fetch(await _create(), _nested(3_000))


@pytest.mark.anyio
async def test_a_fetch_exactly_at_the_depth_limit_is_packed_back() -> None:
    """100 levels are fine, with hooks and without, on every step."""
    structure = _nested(100)
    for hooks in ([], [RecordingHook()]):
        with anyio.fail_after(LIMIT):
            async with SingularMonitoredSession(_create, hooks) as sess:
                for _ in range(3):
                    result = await sess.run(structure)
                    assert _depth(result) == 100


def _depth(structure: Any) -> int:
    levels = 0
    while isinstance(structure, list):
        structure, levels = structure[0], levels + 1
    assert structure == 0.5
    return levels


# -- a full disk during a save ------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
async def test_a_failed_checkpoint_write_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """ENOSPC (or EIO) while writing a checkpoint: an OSError naming the file, errno kept, cause chained."""
    checkpointer = hookrun.Checkpointer(tmp_path)
    original = OSError(code, os.strerror(code))

    def full_disk(fd: int, buffers: Any) -> int:
        raise original

    monkeypatch.setattr(os, "writev", full_disk)
    monkeypatch.setattr(os, "write", full_disk)
    with anyio.fail_after(LIMIT), pytest.raises(OSError) as caught:
        await checkpointer.save(7, {"w": [1.0, 2.0]})
    path = os.path.join(checkpointer.directory, "ckpt-7")
    assert caught.value.errno == code
    assert caught.value.filename == path
    assert str(caught.value) == f"[Errno {code}] {os.strerror(code)}: {path!r}"
    assert caught.value.__cause__ is original
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []  # no temporary file left behind
    assert (await checkpointer.save(8, {"w": [1.0]})).step == 8  # and the next save works
