"""Timeouts bound work that runs in a worker thread: a plain ``def`` step function under
``RunOptions(timeout=...)`` and an ``in_thread`` hook under ``hook_timeout``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    DeadlineExceededError,
    HookTimeoutError,
    RunOptions,
    SingularMonitoredSession,
    StepSession,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event the blocked thread waits on; set when the test ends, so the thread ends too."""
    event = threading.Event()
    yield event
    event.set()


async def test_a_plain_step_function_is_bounded_by_the_run_timeout(release: threading.Event) -> None:
    """A plain step still running in its thread at the deadline raises DeadlineExceededError then."""
    started = threading.Event()

    def step(feeds: object) -> dict[str, int]:
        started.set()
        release.wait(5)
        return {"x": 1}

    async def create() -> StepSession:
        return StepSession(step)

    async with SingularMonitoredSession(create) as sess:
        with anyio.fail_after(2), pytest.raises(DeadlineExceededError, match=r"RunOptions.timeout=0.05s"):
            await sess.run("x", options=RunOptions(timeout=0.05))
        assert started.is_set() and not release.is_set()  # the caller was freed, the thread still runs


async def test_an_in_thread_hook_is_bounded_by_hook_timeout(release: threading.Event) -> None:
    """An in_thread hook still blocking at hook_timeout raises HookTimeoutError then."""

    class Blocking:
        def before_run(self, run_context: object) -> None:
            release.wait(5)

    async def create() -> StepSession:
        return StepSession(lambda feeds: {"x": 1})

    async with SingularMonitoredSession(create, [hookrun.in_thread(Blocking())], hook_timeout=0.05) as sess:
        with anyio.fail_after(2), pytest.raises(HookTimeoutError, match=r"Blocking took longer than hook_timeout=0.05s"):
            await sess.run("x")
        assert not release.is_set()


async def test_a_run_that_returns_past_the_deadline_still_times_out() -> None:
    """A raw run that holds the caller past RunOptions.timeout raises DeadlineExceededError when it returns."""

    class Stubborn:
        async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[int]:
            with anyio.CancelScope(shield=True):  # does not let the timeout in
                await anyio.sleep(0.1)
            return [1 for _ in fetches]

    async def create() -> Stubborn:
        return Stubborn()

    async with SingularMonitoredSession(create) as sess:
        with pytest.raises(DeadlineExceededError, match=r"returned late; its values are discarded"):
            await sess.run("x", options=RunOptions(timeout=0.01))
        assert await sess.run("x") == 1  # the session goes on
