"""``on_exception``: which exits call it, with what, in which hooks, and how it is bounded."""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun import (
    MonitoredSession,
    MonitoredTrainingSession,
    OutOfRangeError,
    SessionClosedError,
    SessionRunHook,
    SingularMonitoredSession,
    UnavailableError,
    in_thread,
    sequential,
)
from hookrun.hooks import StopAtStepHook
from hookrun.testing import FaultyHook, ScriptedCreator, drive

pytestmark = pytest.mark.anyio

LIMIT = 10.0


class Boom(Exception):
    """The error the tests raise."""


class _Recorder(SessionRunHook):
    """Records ``end`` and ``on_exception`` into ``log``, as ``(name, phase, argument)``."""

    def __init__(self, name: str = "exits", log: list[tuple[str, str, object]] | None = None) -> None:
        self.name = name
        self.log = log if log is not None else []
        self.began = False
        self.session: object = "not called"

    async def end(self, session: Any) -> None:
        self.log.append((self.name, "end", session))


class Exits(_Recorder):
    """A recorder with async methods; its on_exception suspends."""

    async def begin(self) -> None:
        self.began = True

    async def on_exception(self, session: Any, exception: BaseException) -> None:
        await anyio.lowlevel.checkpoint()  # suspends: runs beside the others, shielded
        self.log.append((self.name, "on_exception", exception))
        self.session = session


class PlainExits(_Recorder):
    """A recorder with plain methods."""

    def begin(self) -> None:
        self.began = True

    def on_exception(self, session: Any, exception: BaseException) -> None:
        self.log.append((self.name, "on_exception", exception))
        self.session = session


def phases(log: list[tuple[str, str, object]]) -> list[tuple[str, str]]:
    return sorted((name, phase) for name, phase, _ in log)


async def test_an_error_in_the_block_calls_on_exception_not_end() -> None:
    """An error in the block: every hook's on_exception gets the session and the error, no end."""
    log: list[tuple[str, str, object]] = []
    hooks = [Exits("a", log), PlainExits("b", log)]
    creator = ScriptedCreator()
    error = Boom("in the block")
    with anyio.fail_after(LIMIT), pytest.raises(Boom) as raised:
        async with MonitoredSession(creator, hooks):
            raise error
    assert raised.value is error
    assert phases(log) == [("a", "on_exception"), ("b", "on_exception")]
    assert all(exception is error for _, _, exception in log)
    assert all(hook.session is creator.sessions[0] for hook in hooks)
    assert creator.sessions[0].closed == 1


@pytest.mark.parametrize("how", ["clean", "out of range"])
async def test_a_clean_exit_calls_end_not_on_exception(how: str) -> None:
    """A clean exit, or a clean-stop exception, calls end and never on_exception."""
    log: list[tuple[str, str, object]] = []
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(ScriptedCreator(), [Exits("a", log), PlainExits("b", log)]):
            if how != "clean":
                raise OutOfRangeError("input exhausted")
    assert phases(log) == [("a", "end"), ("b", "end")]


async def test_a_failing_hook_calls_on_exception_of_every_hook() -> None:
    """A hook's error in after_run: every hook, the failing one too, gets on_exception with it."""
    log: list[tuple[str, str, object]] = []
    failing = Exits("failing", log)
    error = Boom("after_run")

    async def after_run(run_context: Any, run_values: Any) -> None:
        raise error

    failing.after_run = after_run  # type: ignore[method-assign]
    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredSession(ScriptedCreator({"x": 1}), [Exits("a", log), failing]) as sess:
            await sess.run("x")
    assert phases(log) == [("a", "on_exception"), ("failing", "on_exception")]
    assert all(exception is error for _, _, exception in log)


async def test_a_cancellation_gets_the_cancellation_exception_shielded() -> None:
    """A cancellation: on_exception receives the cancellation exception and can still await."""
    log: list[tuple[str, str, object]] = []

    class SlowExit(Exits):
        async def on_exception(self, session: Any, exception: BaseException) -> None:
            for _ in range(5):  # each checkpoint would raise if it were not shielded
                await anyio.lowlevel.checkpoint()
            await super().on_exception(session, exception)

    hooks = [SlowExit("slow", log), SlowExit("slow too", log), PlainExits("plain", log)]
    with anyio.fail_after(LIMIT):
        with anyio.CancelScope() as outer:
            async with MonitoredSession(ScriptedCreator(), hooks):
                outer.cancel()
                await anyio.sleep_forever()
    assert outer.cancelled_caught
    assert phases(log) == [("plain", "on_exception"), ("slow", "on_exception"), ("slow too", "on_exception")]
    assert all(isinstance(exception, anyio.get_cancelled_exc_class()) for _, _, exception in log)


async def test_a_failing_begin_reaches_only_the_hooks_whose_begin_was_called() -> None:
    """A sibling's failing begin: hooks whose begin ran get on_exception; later ones, and
    hooks without begin, do not."""
    log: list[tuple[str, str, object]] = []
    error = Boom("begin")

    class FailingBegin(PlainExits):
        def begin(self) -> None:
            super().begin()
            raise error

    class NoBegin:
        name = "no_begin"

        def on_exception(self, session: Any, exception: BaseException) -> None:
            log.append((self.name, "on_exception", exception))

    first, failing = PlainExits("before", log), FailingBegin("failing", log)
    hooks = [first, failing, PlainExits("after", log), NoBegin()]
    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredSession(ScriptedCreator(), hooks):
            pytest.fail("the body must not run")
    assert phases(log) == [("before", "on_exception"), ("failing", "on_exception")]
    assert all(exception is error for _, _, exception in log)
    assert [first.session, failing.session] == [None, None]


async def test_a_begin_cancelled_by_a_failing_sibling_still_gets_on_exception() -> None:
    """An async begin cancelled while it waits, because a sibling's begin failed, gets on_exception."""
    log: list[tuple[str, str, object]] = []

    class WaitingBegin(Exits):
        async def begin(self) -> None:
            await super().begin()
            await anyio.sleep_forever()

    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredSession(ScriptedCreator(), [WaitingBegin("waiting", log), FaultyHook("begin", Boom)]):
            pytest.fail("the body must not run")
    assert phases(log) == [("waiting", "on_exception")]


async def test_a_failing_creation_at_entry_calls_on_exception_without_a_session() -> None:
    """The first session cannot be created: every hook gets on_exception with session None."""
    log: list[tuple[str, str, object]] = []
    hooks = [Exits("a", log), PlainExits("b", log)]
    creator = ScriptedCreator(errors={0: Boom("create")})
    with anyio.fail_after(LIMIT), pytest.raises(Boom, match="create"):
        async with SingularMonitoredSession(creator, hooks):
            pytest.fail("the body must not run")
    assert phases(log) == [("a", "on_exception"), ("b", "on_exception")]
    assert [hook.session for hook in hooks] == [None, None]


async def test_a_failing_after_create_session_at_entry_calls_on_exception() -> None:
    """after_create_session fails at entry: on_exception gets the error (the session is closed: None)."""
    log: list[tuple[str, str, object]] = []
    error = Boom("after_create_session")
    creator = ScriptedCreator()
    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredSession(creator, [Exits("a", log), FaultyHook("after_create_session", error)]):
            pytest.fail("the body must not run")
    assert log == [("a", "on_exception", error)]
    assert creator.sessions[0].closed == 1


async def test_recovery_giving_up_calls_on_exception_without_a_session() -> None:
    """Re-creating the session fails for good: on_exception gets that error and no session."""
    log: list[tuple[str, str, object]] = []
    hook = Exits("a", log)
    creator = ScriptedCreator({"x": 1}, session_errors={0: {0: UnavailableError("lost")}},
                              errors={1: Boom("cannot re-create")})
    retry = hookrun.RetryPolicy(initial_delay=0.0, jitter=False)
    with anyio.fail_after(LIMIT), pytest.raises(Boom, match="cannot re-create"):
        async with MonitoredSession(creator, [hook], retry=retry) as sess:
            await sess.run("x")
    assert [(name, phase) for name, phase, _ in log] == [("a", "on_exception")]
    assert hook.session is None


async def test_hook_timeout_bounds_each_on_exception_call() -> None:
    """hook_timeout applies to on_exception: a call over it is a HookTimeoutError noted on the error."""
    hooks = [FaultyHook("on_exception", "hang", name="stuck")]
    with anyio.fail_after(LIMIT), pytest.raises(Boom) as raised:
        async with MonitoredSession(ScriptedCreator(), hooks, hook_timeout=0.05):
            raise Boom("in the block")
    assert any("HookTimeoutError" in note and "on_exception" in note for note in raised.value.__notes__)


async def test_a_recovered_error_calls_neither_until_the_end() -> None:
    """A recovered error is no exit: the hooks get end once, never on_exception."""
    log: list[tuple[str, str, object]] = []
    creator = ScriptedCreator({"x": 1}, session_errors={0: {0: UnavailableError("blip")}})
    retry = hookrun.RetryPolicy(initial_delay=0.0, jitter=False)
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(creator, [Exits("a", log)], retry=retry) as sess:
            assert await sess.run("x") == 1
    assert phases(log) == [("a", "end")]


async def test_errors_of_on_exception_are_logged_and_noted_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    """An on_exception that raises: logged, a note on the original error, which propagates;
    the other hooks' on_exception still run to their end."""
    log: list[tuple[str, str, object]] = []
    error = Boom("in the block")
    hooks = [FaultyHook("on_exception", ValueError("cleanup failed"), name="bad"), Exits("good", log)]
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "hookrun"), pytest.raises(Boom) as raised:
        async with MonitoredSession(ScriptedCreator(), hooks):
            raise error
    assert raised.value is error
    assert phases(log) == [("good", "on_exception")]
    assert any("bad.on_exception also failed: ValueError('cleanup failed')" in note for note in error.__notes__)
    assert "hook bad.on_exception failed while the session exits" in caplog.text


async def test_a_hanging_on_exception_is_given_up_after_the_grace_period(caplog: pytest.LogCaptureFixture) -> None:
    """An on_exception that never returns is cancelled after stop_grace_period, logged; the error propagates."""
    hooks = [FaultyHook("on_exception", "hang", name="stuck")]
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, "hookrun"), pytest.raises(Boom):
        async with MonitoredSession(ScriptedCreator(), hooks, stop_grace_period=0.05):
            raise Boom("in the block")
    assert "on_exception took longer than stop_grace_period=0.05s" in caplog.text


async def test_a_duck_typed_hook_with_only_on_exception_is_called() -> None:
    """An object with only on_exception is a hook, and it is called."""
    seen: list[BaseException] = []

    class Duck:
        async def on_exception(self, session: Any, exception: BaseException) -> None:
            seen.append(exception)

    error = Boom("duck")
    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredSession(ScriptedCreator(), [Duck()]):
            raise error
    assert seen == [error]


def test_sessions_whose_hooks_lack_on_exception_wrap_nothing() -> None:
    """No hook has on_exception: nothing is planned for it and begin runs unwrapped."""
    sess = MonitoredSession(ScriptedCreator(), [Exits(), StopAtStepHook(last_step=3)])
    assert [call.name for call in sess._setup.exits._calls] == ["exits"]
    bare = MonitoredSession(ScriptedCreator(), [StopAtStepHook(last_step=3)])
    assert bare._setup.exits._calls == ()
    assert bare._setup.begin is bare._stats.plan("begin")


async def test_sequential_forwards_on_exception_to_every_member() -> None:
    """sequential(...) calls each member's on_exception in order, even after one failed."""
    log: list[tuple[str, str, object]] = []
    bad = PlainExits("bad", log)

    def failing(session: Any, exception: BaseException) -> None:
        log.append(("bad", "on_exception", exception))
        raise ValueError("member failed")

    bad.on_exception = failing  # type: ignore[method-assign]
    error = Boom("in the block")
    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredSession(ScriptedCreator(), [sequential(bad, Exits("after", log))]):
            raise error
    assert [(name, phase) for name, phase, _ in log] == [("bad", "on_exception"), ("after", "on_exception")]
    assert any("member failed" in note for note in error.__notes__)


async def test_in_thread_forwards_on_exception_to_a_worker_thread() -> None:
    """in_thread(hook) runs the hook's plain on_exception in a worker thread."""
    threads: list[int] = []

    class Blocking:
        def on_exception(self, session: Any, exception: BaseException) -> None:
            threads.append(threading.get_ident())

    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredSession(ScriptedCreator(), [in_thread(Blocking())]):
            raise Boom("in the block")
    assert len(threads) == 1 and threads[0] != threading.get_ident()


async def test_a_close_while_entering_tells_the_hooks_with_session_closed_error() -> None:
    """A close from another task while begin runs: the entry raises SessionClosedError, which
    on_exception receives (end is not called)."""
    log: list[tuple[str, str, object]] = []
    entered = anyio.Event()
    release = anyio.Event()

    class SlowBegin(Exits):
        async def begin(self) -> None:
            entered.set()
            await release.wait()

    sess = MonitoredSession(ScriptedCreator(), [SlowBegin("slow", log)])

    async def close_it() -> None:
        await entered.wait()
        await sess.aclose()
        release.set()

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(close_it)
            with pytest.raises(SessionClosedError, match="closed while it was being entered"):
                async with sess:
                    pytest.fail("the body must not run")
    assert [(name, phase) for name, phase, _ in log] == [("slow", "on_exception")]
    assert isinstance(log[0][2], SessionClosedError)


async def test_singular_session_calls_on_exception() -> None:
    """SingularMonitoredSession: a session error reaches on_exception."""
    log: list[tuple[str, str, object]] = []
    creator = ScriptedCreator({"x": 1}, session_errors={0: {0: UnavailableError("gone")}})
    with anyio.fail_after(LIMIT), pytest.raises(UnavailableError):
        async with SingularMonitoredSession(creator, [Exits("a", log)]) as sess:
            await sess.run("x")
    assert [(name, phase) for name, phase, _ in log] == [("a", "on_exception")]


async def test_monitored_training_session_calls_on_exception() -> None:
    """MonitoredTrainingSession: an error in the block reaches on_exception of its user hooks."""
    log: list[tuple[str, str, object]] = []
    error = Boom("training")
    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with MonitoredTrainingSession(lambda: hookrun.StepSession(lambda feeds: {}), hooks=[Exits("a", log)]):
            raise error
    assert log == [("a", "on_exception", error)]


async def test_statistics_count_on_exception_calls() -> None:
    """The statistics have a row for on_exception, with its calls and errors."""
    hooks = [Exits("a"), FaultyHook("on_exception", ValueError("x"), name="bad")]
    sess = MonitoredSession(ScriptedCreator(), hooks)
    with anyio.fail_after(LIMIT), pytest.raises(Boom):
        async with sess:
            raise Boom("in the block")
    stats = sess.statistics()
    assert (stats.hook("a", "on_exception").calls, stats.hook("a", "on_exception").errors) == (1, 0)
    assert (stats.hook("bad", "on_exception").calls, stats.hook("bad", "on_exception").errors) == (1, 1)


async def test_drive_records_on_exception_after_an_error() -> None:
    """The testing kit: drive() runs on_exception as production does, and records what it got."""
    hook = Exits("a")
    record = await drive(hook, 3, errors={1: Boom("step 1")}, raises=Boom, singular=True)
    calls = record.of(hook, "on_exception")
    assert len(calls) == 1 and calls[0].exception is record.error
    assert "end" not in record.phases(hook)


async def test_drive_records_on_exception_after_a_cancellation() -> None:
    """The testing kit: a cancelled drive records on_exception with the cancellation."""
    hook = Exits("a")
    record = await drive(hook, 100, cancel_after=20)
    assert record.cancelled
    calls = record.of(hook, "on_exception")
    assert len(calls) == 1 and isinstance(calls[0].exception, anyio.get_cancelled_exc_class())
    assert calls[0].outcome == "returned"
