"""aclose() from another task while the session is being entered: the close wins, and
nothing created during the entry is left open."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from hookrun import MonitoredSession, SessionClosedError, SessionRunHook, SingularMonitoredSession
from hookrun.testing import RecordingHook

pytestmark = pytest.mark.anyio

LIMIT = 10.0
SESSION_TYPES = [MonitoredSession, SingularMonitoredSession]


class _Session:
    def __init__(self) -> None:
        self.closed = False

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        return [1 for _ in fetches]

    async def close(self) -> None:
        self.closed = True


class _GatedCreator:
    """Creating a session waits for ``gate`` (``creating`` says it started)."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.creating = anyio.Event()
        self.sessions: list[_Session] = []

    async def create_session(self) -> _Session:
        self.creating.set()
        await self.gate.wait()
        session = _Session()
        self.sessions.append(session)
        return session


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
    open), its ``after_create_session`` ran but no ``end``; entering raises."""
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
    assert hook.count("begin") == 1 and hook.count("after_create_session") == 1 and hook.count("end") == 0
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
