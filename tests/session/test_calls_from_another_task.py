"""Calls from another task. aclose(): while the session is being entered the close
wins and nothing created during the entry is left open; while a step runs, the close
waits for it, then ends and closes (``end`` after ``after_run``, never a session closed
under its run); from inside its own step it is refused. run(): refused while the
session is being entered."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    RetryPolicy,
    SessionClosedError,
    SessionRunHook,
    SingularMonitoredSession,
    StepContext,
    UnavailableError,
)
from hookrun.testing import RecordingHook

pytestmark = pytest.mark.anyio

LIMIT = 10.0
SESSION_TYPES = [MonitoredSession, SingularMonitoredSession]


class _Session:
    """Runs return one value per fetch, or raise ``UnavailableError`` when ``fail``."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.closed = False

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        if self.fail:
            raise UnavailableError("worker lost")
        return [1 for _ in fetches]

    async def close(self) -> None:
        self.closed = True


class _GatedCreator:
    """Creating the session waits for ``gate`` (``creating`` says it started), from the
    ``gated_from``-th creation on; the first ``failing`` sessions fail their runs."""

    def __init__(self, *, gated_from: int = 0, failing: int = 0) -> None:
        self.gate = anyio.Event()
        self.creating = anyio.Event()
        self.sessions: list[_Session] = []
        self.gated_from, self.failing = gated_from, failing

    async def create_session(self) -> _Session:
        if len(self.sessions) >= self.gated_from:
            self.creating.set()
            await self.gate.wait()
        session = _Session(fail=len(self.sessions) < self.failing)
        self.sessions.append(session)
        return session


async def _run_expecting_close(sess: Any, outcome: list[BaseException]) -> None:
    """One step; the ``SessionClosedError`` it raises goes to ``outcome``."""
    try:
        await sess.run(["x"])
    except SessionClosedError as exc:
        outcome.append(exc)


class _GatedBegin(SessionRunHook):
    """``begin`` waits for ``gate`` (``beginning`` says it started)."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.beginning = anyio.Event()

    async def begin(self) -> None:
        self.beginning.set()
        await self.gate.wait()


async def _enter(sess: Any, outcome: list[BaseException], body: list[str]) -> None:
    try:
        async with sess:
            body.append("ran")
    except SessionClosedError as exc:
        outcome.append(exc)


@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_closing_while_the_first_session_is_created_closes_it(
    session_type: type[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """The session the creator returns after the close is closed at once (never left
    open) and no hook sees it (no ``after_create_session``, no ``end``); entering raises."""
    creator = _GatedCreator()
    hook = RecordingHook()
    sess = session_type(creator, [hook])
    outcome: list[BaseException] = []
    body: list[str] = []
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_enter, sess, outcome, body)
            await creator.creating.wait()  # __aenter__ is creating the first session
            await sess.aclose()
            creator.gate.set()
    assert len(outcome) == 1 and "was closed while it was being entered" in str(outcome[0])
    assert body == []
    assert [s.closed for s in creator.sessions] == [True]
    assert sess.raw_session() is None and sess.should_stop()
    assert "closing without a session (it is being created)" in caplog.text
    assert hook.count("begin") == 1 and hook.count("after_create_session") == 0 and hook.count("end") == 0
    with pytest.raises(SessionClosedError):
        await sess.run(["x"])


@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_closing_while_begin_runs_creates_no_session(session_type: type[Any]) -> None:
    """Closed while the hooks' ``begin`` runs: no session is created at all."""
    creator = _GatedCreator()
    creator.gate.set()
    gated = _GatedBegin()
    hook = RecordingHook()
    sess = session_type(creator, [gated, hook])
    outcome: list[BaseException] = []
    body: list[str] = []
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_enter, sess, outcome, body)
            await gated.beginning.wait()
            await sess.aclose()
            gated.gate.set()
    assert len(outcome) == 1 and "was closed while it was being entered" in str(outcome[0])
    assert body == [] and creator.sessions == [] and not creator.creating.is_set()
    assert hook.count("after_create_session") == 0 and hook.count("end") == 0
    await sess.aclose()  # closing twice does nothing


class _GatedSession:
    """``run`` waits for ``gate`` (``running`` says a run started), then returns or raises
    ``error``; it records when it was closed relative to its runs."""

    def __init__(self, log: list[str], error: BaseException | None = None) -> None:
        self.gate = anyio.Event()
        self.running = anyio.Event()
        self.log, self.error = log, error
        self.closed = False

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.running.set()
        await self.gate.wait()
        self.log.append("run")
        if self.error is not None:
            raise self.error
        return [1 for _ in fetches]

    async def close(self) -> None:
        self.closed = True
        self.log.append("close")


class _Logging(SessionRunHook):
    """Logs every step phase and ``end``; ``kind`` "plain" or "async" methods."""

    def __init__(self, log: list[str], kind: str) -> None:
        self.log, self.kind = log, kind

    def before_run(self, run_context: Any) -> Any:
        return self._log("before_run")

    def after_run(self, run_context: Any, run_values: Any) -> Any:
        return self._log("after_run")

    def end(self, session: Any) -> Any:
        return self._log("end")

    def _log(self, what: str) -> Any:
        self.log.append(what)
        if self.kind == "async":
            return anyio.lowlevel.checkpoint()
        return None


class _Creator:
    def __init__(self, session: _GatedSession) -> None:
        self.session, self.created = session, 0

    async def create_session(self) -> _GatedSession:
        self.created += 1
        return self.session


def _hooks(log: list[str], kind: str) -> list[Any]:
    if kind == "plain":
        return [_Logging(log, "plain")]
    return [_AsyncLogging(log), _AsyncLogging(log)]  # two async hooks: the dispatcher's path


class _AsyncLogging(SessionRunHook):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def before_run(self, run_context: Any) -> None:
        await anyio.lowlevel.checkpoint()
        self.log.append("before_run")

    async def after_run(self, run_context: Any, run_values: Any) -> None:
        await anyio.lowlevel.checkpoint()
        self.log.append("after_run")

    async def end(self, session: Any) -> None:
        self.log.append("end")


@pytest.mark.parametrize("session_type", SESSION_TYPES)
@pytest.mark.parametrize("kind", ["plain", "async"])
async def test_closing_while_a_step_runs_waits_for_the_step(session_type: type[Any], kind: str) -> None:
    """The step finishes (its after_run included) before any end or close; a step asked
    for once the close began is refused at once; should_stop() is true from then on."""
    log: list[str] = []
    raw = _GatedSession(log)
    sess = session_type(_Creator(raw), _hooks(log, kind))
    results: list[Any] = []
    refused: list[BaseException] = []
    with anyio.fail_after(LIMIT):
        async with sess:

            async def step() -> None:
                results.append(await sess.run(["x"]))
                log.append("run returned")

            async def close() -> None:
                await sess.aclose()
                log.append("aclose returned")

            async with anyio.create_task_group() as tg:
                tg.start_soon(step)
                await raw.running.wait()
                tg.start_soon(close)
                await anyio.sleep(0.01)  # the close is waiting for the step
                assert sess.should_stop() and not raw.closed and "end" not in log
                with pytest.raises(SessionClosedError, match="called after the session closed") as info:
                    await sess.run(["x"])
                refused.append(info.value)
                raw.gate.set()
    assert results == [[1]] and len(refused) == 1
    ends = log.count("end")
    assert log[-(3 + ends):] == ["run returned", *["end"] * ends, "close", "aclose returned"]
    assert log.index("after_run") < log.index("end") and raw.closed


@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_closing_while_a_step_fn_runs_waits_for_it(session_type: type[Any]) -> None:
    log: list[str] = []
    raw = _GatedSession(log)
    sess = session_type(_Creator(raw), [_Logging(log, "plain")])
    gate, inside = anyio.Event(), anyio.Event()

    async def step_fn(step_context: StepContext) -> str:
        inside.set()
        await gate.wait()
        log.append("step_fn returned")
        return "done"

    with anyio.fail_after(LIMIT):
        async with sess, anyio.create_task_group() as tg:
            tg.start_soon(sess.run_step_fn, step_fn)
            await inside.wait()
            tg.start_soon(sess.aclose)
            await anyio.sleep(0.01)
            assert not raw.closed
            gate.set()
    assert log == ["step_fn returned", "end", "close"]


async def test_a_step_that_loses_its_session_while_closing_is_not_recovered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A recoverable error of the step the close waits for: no new session is created,
    run() says the session was closed (the error as its cause); end then receives that
    session, as it receives a failed session still waiting to be replaced."""
    log: list[str] = []
    raw = _GatedSession(log, error=UnavailableError("worker lost"))
    creator = _Creator(raw)
    outcome: list[BaseException] = []
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with MonitoredSession(creator, [_Logging(log, "plain")]) as sess, anyio.create_task_group() as tg:
            tg.start_soon(_run_expecting_close, sess, outcome)
            await raw.running.wait()
            tg.start_soon(sess.aclose)
            await anyio.sleep(0.01)
            raw.gate.set()
    assert len(outcome) == 1 and "was closed while its step failed" in str(outcome[0])
    assert isinstance(outcome[0].__cause__, UnavailableError)
    assert creator.created == 1 and raw.closed
    assert log == ["before_run", "run", "end", "close"] and "closing without a session" not in caplog.text


async def test_a_close_cancelled_while_it_waits_for_the_step_still_closes() -> None:
    """Cancelled while it waits for the step: the session is closed all the same (no end)."""
    log: list[str] = []
    raw = _GatedSession(log)
    sess = MonitoredSession(_Creator(raw), [_Logging(log, "plain")])
    with anyio.fail_after(LIMIT):
        async with sess, anyio.create_task_group() as tg:
            tg.start_soon(sess.run, ["x"])
            await raw.running.wait()
            with anyio.move_on_after(0.01) as waited:
                await sess.aclose()
            assert waited.cancelled_caught
            assert raw.closed and sess.raw_session() is None and "end" not in log
            raw.gate.set()  # the step's run returns on the closed session
    assert log[:3] == ["before_run", "close", "run"] and "end" not in log


#: A back-off far longer than ``LIMIT``: a test that waited it out would fail.
LONG_BACKOFF = RetryPolicy(initial_delay=10 * LIMIT, jitter=False)


async def test_closing_while_a_step_waits_to_re_create_the_session_creates_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closed while run() waits to retry after losing its session: the close does not wait
    for it (end receives the failed session, still there); run() stops waiting at once and
    raises, from the error it waited after, and creates no new session."""
    log: list[str] = []
    raw = _GatedSession(log, error=UnavailableError("worker lost"))
    raw.gate.set()
    creator = _Creator(raw)
    outcome: list[BaseException] = []
    sess = MonitoredSession(creator, [_Logging(log, "plain")], retry=LONG_BACKOFF)
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with sess, anyio.create_task_group() as tg:
            tg.start_soon(_run_expecting_close, sess, outcome)
            await raw.running.wait()
            await _until_logged(caplog, "recovering: re-creating the session")  # run() waits to retry
            await sess.aclose()
    assert len(outcome) == 1 and "was closed while it waited to retry" in str(outcome[0])
    assert isinstance(outcome[0].__cause__, UnavailableError)
    assert creator.created == 1 and raw.closed
    assert log == ["before_run", "run", "end", "close"] and "closing without a session" not in caplog.text
    assert sess.statistics().recoveries == 0


async def _until_logged(caplog: pytest.LogCaptureFixture, text: str) -> None:
    """Wait until a record with ``text`` is logged (at once if one already was)."""
    logged = anyio.Event()

    class _Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                logged.set()

    watch = _Watch()
    logging.getLogger("hookrun").addHandler(watch)
    try:
        if text not in caplog.text:
            await logged.wait()
    finally:
        logging.getLogger("hookrun").removeHandler(watch)


class _FailingCreator:
    """Creating a session fails with ``UnavailableError`` from the ``failing_from``-th
    creation on; the ones before succeed and their runs fail the same way."""

    def __init__(self, failing_from: int) -> None:
        self.failing_from = failing_from
        self.attempts = 0
        self.sessions: list[_Session] = []

    async def create_session(self) -> _Session:
        self.attempts += 1
        if self.attempts > self.failing_from:
            raise UnavailableError("no worker")
        session = _Session(fail=True)
        self.sessions.append(session)
        return session


async def test_closing_while_the_entry_waits_to_retry_creating_stops_the_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closed while the entry waits to retry creating the first session: the entry stops
    waiting at once and raises; nothing is created, the body never runs."""
    creator = _FailingCreator(failing_from=0)
    hook = RecordingHook()
    sess = MonitoredSession(creator, [hook], retry=LONG_BACKOFF)
    outcome: list[BaseException] = []
    body: list[str] = []
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_enter, sess, outcome, body)
            await _until_logged(caplog, "creating the session failed; retrying")
            await sess.aclose()
    assert len(outcome) == 1 and "was closed while it waited to retry" in str(outcome[0])
    assert isinstance(outcome[0].__cause__, UnavailableError)
    assert body == [] and creator.attempts == 1 and sess.raw_session() is None
    assert hook.count("begin") == 1 and hook.count("after_create_session") == 0 and hook.count("end") == 0


async def test_closing_while_recovery_waits_to_retry_creating_stops_the_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closed while run() waits to retry re-creating a lost session (the first attempt
    failed): run() stops waiting at once and raises; no session is left open."""
    creator = _FailingCreator(failing_from=1)
    hook = RecordingHook()
    outcome: list[BaseException] = []
    # then 100 s; every retry logged in full (the test waits for the second one's line)
    retry = RetryPolicy(initial_delay=0.001, multiplier=1e6, max_delay=10 * LIMIT, jitter=False, log_interval=0)
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with MonitoredSession(creator, [hook], retry=retry) as sess, anyio.create_task_group() as tg:
            tg.start_soon(_run_expecting_close, sess, outcome)
            await _until_logged(caplog, "creating the session failed; retrying")
            await sess.aclose()
    assert len(outcome) == 1 and "was closed while it waited to retry" in str(outcome[0])
    assert isinstance(outcome[0].__cause__, UnavailableError)
    assert creator.attempts == 2 and [s.closed for s in creator.sessions] == [True]
    assert sess.raw_session() is None
    assert hook.count("after_create_session") == 1 and hook.count("end") == 0


async def test_closing_while_a_step_re_creates_the_session_closes_the_new_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Closed while run() re-creates a lost session: the close does not wait for it; the
    session created after the close is closed at once (never left open), and run() says
    the session was closed."""
    creator = _GatedCreator(gated_from=1, failing=1)
    hook = RecordingHook()
    outcome: list[BaseException] = []
    no_wait = RetryPolicy(initial_delay=0.0, jitter=False)
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with MonitoredSession(creator, [hook], retry=no_wait) as sess, anyio.create_task_group() as tg:
            tg.start_soon(_run_expecting_close, sess, outcome)
            await creator.creating.wait()  # run() is re-creating the session
            await sess.aclose()
            creator.gate.set()
    assert len(outcome) == 1 and "closed while it re-created its session" in str(outcome[0])
    assert [s.closed for s in creator.sessions] == [True, True]
    assert sess.raw_session() is None
    assert "closing without a session (it is being re-created)" in caplog.text
    assert hook.count("end") == 0 and hook.count("after_create_session") == 1  # not for the new one


class _ClosesItsSession(SessionRunHook):
    """after_run awaits ``aclose()`` of the monitored session it runs in (``suspend_first``:
    after suspending once); what that raised goes to ``raised``."""

    def __init__(self, suspend_first: bool) -> None:
        self.sess: Any = None
        self.suspend_first = suspend_first
        self.raised: list[BaseException] = []

    async def after_run(self, run_context: Any, run_values: Any) -> None:
        if self.suspend_first:
            await anyio.lowlevel.checkpoint()
        try:
            await self.sess.aclose()
        except RuntimeError as exc:
            self.raised.append(exc)


class _Suspends(SessionRunHook):
    async def after_run(self, run_context: Any, run_values: Any) -> None:
        await anyio.sleep(0.01)


@pytest.mark.parametrize(
    "where",
    ["alone", "alone after suspending", "first of two", "in a worker"],
)
async def test_closing_from_inside_its_own_step_is_refused_not_a_hang(where: str) -> None:
    """A hook awaiting aclose() of its own session would wait for its own step: refused
    with a RuntimeError saying what to do, whichever task runs the hook (the caller's,
    or a worker's when a sibling before it waits); the session stays usable."""
    closer = _ClosesItsSession(suspend_first=where == "alone after suspending")
    by_place: dict[str, list[Any]] = {
        "alone": [closer],
        "alone after suspending": [closer],
        "first of two": [closer, _Suspends()],
        "in a worker": [_Suspends(), closer],
    }
    hooks = by_place[where]
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(_Creator(_GatedSession([])), hooks) as sess:
            closer.sess = sess
            sess_raw = sess.raw_session()
            sess_raw.gate.set()
            assert await sess.run(["x"]) == [1]
            assert len(closer.raised) == 1 and "from inside one of its own steps" in str(closer.raised[0])
            assert "request_stop()" in str(closer.raised[0])
            assert not sess.should_stop() and await sess.run(["x"]) == [1]


async def test_closing_from_inside_its_own_step_fn_is_refused() -> None:
    raw = _GatedSession([])
    raw.gate.set()
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(_Creator(raw), [_Logging([], "plain")]) as sess:

            async def step_fn(step_context: StepContext) -> None:
                await sess.aclose()

            with pytest.raises(RuntimeError, match="from inside one of its own steps"):
                await sess.run_step_fn(step_fn)
            assert not sess.should_stop()
    assert raw.closed


@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_a_step_while_the_session_is_being_entered_is_refused(session_type: type[Any]) -> None:
    """run() from another task while ``async with`` creates the first session: refused at
    once (it used to create a second session beside the entry's); should_stop() is true
    until the entry is done; the entry then opens normally with its one session."""
    creator = _GatedCreator()
    sess = session_type(creator, [RecordingHook()])
    entered = anyio.Event()
    with anyio.fail_after(LIMIT):

        async def enter() -> None:
            async with sess:
                entered.set()
                assert await sess.run(["x"]) == [1]

        async with anyio.create_task_group() as tg:
            tg.start_soon(enter)
            await creator.creating.wait()
            assert sess.should_stop()
            with pytest.raises(SessionClosedError, match="called while the session is being entered"):
                await sess.run(["x"])
            with pytest.raises(SessionClosedError, match="being entered"):
                sess.iterate(["x"])
            creator.gate.set()
            await entered.wait()
    assert len(creator.sessions) == 1 and creator.sessions[0].closed


async def test_a_second_close_returns_once_the_first_is_done() -> None:
    """Two tasks close while a step runs: neither returns before the session is closed,
    and end runs once; leaving the block meanwhile waits for that close too."""
    log: list[str] = []
    raw = _GatedSession(log)
    sess = MonitoredSession(_Creator(raw), [_Logging(log, "plain")])
    returned: list[bool] = []

    async def close() -> None:
        await sess.aclose()
        returned.append(raw.closed)

    with anyio.fail_after(LIMIT):
        async with sess, anyio.create_task_group() as tg:
            tg.start_soon(sess.run, ["x"])
            await raw.running.wait()
            tg.start_soon(close)
            await anyio.sleep(0.01)
            tg.start_soon(close)
            await anyio.sleep(0.01)
            assert returned == [] and not raw.closed
            raw.gate.set()
    assert returned == [True, True] and log.count("end") == 1 and log.count("close") == 1
