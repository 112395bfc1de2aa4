"""Closing raw sessions: the async way, the TensorFlow way, and while recovering."""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    RunMetadata,
    RunOptions,
    SingularMonitoredSession,
    UnavailableError,
)
from hookrun.testing import RecordingHook

pytestmark = pytest.mark.anyio

LIMIT = 10.0
MAIN_THREAD = threading.get_ident()


class Base:
    """Answers every fetch with the session's number; fails ``fail_at`` (0-based run)."""

    def __init__(self, number: int, fail_at: int | None = None) -> None:
        self.number = number
        self.fail_at = fail_at
        self.runs = 0
        self.closed_in: list[str] = []

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any],
        options: RunOptions, run_metadata: RunMetadata,
    ) -> list[Any]:
        run, self.runs = self.runs, self.runs + 1
        if run == self.fail_at:
            raise UnavailableError(f"session {self.number} lost")
        return [self.number for _ in fetches]

    def _closed(self) -> None:
        self.closed_in.append("main" if threading.get_ident() == MAIN_THREAD else "worker")


class SyncClose(Base):
    """TensorFlow's way: a plain, possibly blocking close()."""

    def close(self) -> None:
        self._closed()


class AsyncClose(Base):
    async def close(self) -> None:
        self._closed()


class FailingAclose(Base):
    async def aclose(self) -> None:
        self._closed()
        raise OSError(f"connection of session {self.number} already gone")


class PlainAclose(Base):
    def aclose(self) -> None:
        self._closed()


class Creator:
    def __init__(self, kind: type[Base], fail_first_at: int | None = None) -> None:
        self.kind = kind
        self.fail_first_at = fail_first_at
        self.sessions: list[Base] = []

    async def create_session(self) -> Base:
        session = self.kind(len(self.sessions), self.fail_first_at if not self.sessions else None)
        self.sessions.append(session)
        return session


@pytest.mark.parametrize("session_type", [MonitoredSession, SingularMonitoredSession])
async def test_a_sync_close_is_called_once_in_a_worker_thread(session_type: type[Any]) -> None:
    creator = Creator(SyncClose)
    with anyio.fail_after(LIMIT):
        async with session_type(creator) as sess:
            assert await sess.run("x") == 0
    assert creator.sessions[0].closed_in == ["worker"]


async def test_an_async_close_is_awaited() -> None:
    creator = Creator(AsyncClose)
    with anyio.fail_after(LIMIT):
        async with SingularMonitoredSession(creator) as sess:
            await sess.run("x")
    assert creator.sessions[0].closed_in == ["main"]


async def test_a_sync_close_is_called_after_an_error_exit_and_on_recovery() -> None:
    creator = Creator(SyncClose, fail_first_at=1)
    with anyio.fail_after(LIMIT), pytest.raises(KeyError):
        async with MonitoredSession(creator) as sess:
            assert await sess.run("x") == 0
            assert await sess.run("x") == 1  # recovered on session 1
            raise KeyError("the caller's own error")
    assert [s.closed_in for s in creator.sessions] == [["worker"], ["worker"]]


async def test_a_plain_aclose_is_refused_at_creation_naming_the_session() -> None:
    creator = Creator(PlainAclose)
    with anyio.fail_after(LIMIT), pytest.raises(TypeError) as caught:
        async with MonitoredSession(creator):
            pass
    message = str(caught.value)
    assert "the session PlainAclose has an 'aclose' that is a plain function" in message
    assert "'async def aclose()'" in message and "close()" in message
    assert creator.sessions[0].closed_in == ["worker"]  # the refused session is still closed


async def test_an_error_closing_the_failed_session_does_not_stop_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Recovery logs the failed session's close error and goes on with a new session."""
    creator = Creator(FailingAclose, fail_first_at=1)
    hook = RecordingHook()
    closing_at_exit = pytest.raises(OSError, match="session 1")  # the last session's, at exit
    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(LIMIT), closing_at_exit:
        async with MonitoredSession(creator, [hook]) as sess:
            assert await sess.run("x") == 0
            assert await sess.run("x") == 1  # re-created and re-run
            assert hook.count("after_create_session") == 2
    assert [s.closed_in for s in creator.sessions] == [["main"], ["main"]]
    assert any(
        "closing the session (recovery goes on)" in r.getMessage()
        and "session 0" in r.getMessage()
        for r in caplog.records
    )
