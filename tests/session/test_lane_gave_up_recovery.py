"""A session that failed with a recoverable error is never stepped again, also when the
retry policy gives up: the caller gets the error and the next ``run()`` closes the failed
session and creates a new one. Each test runs with one lane and with two."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from hookrun import AbortedError, MonitoredSession, RetryPolicy, SessionRunContext, StepSession

pytestmark = pytest.mark.anyio


class Sessions:
    """A creator whose raw sessions record their own name in ``ran`` at each run."""

    def __init__(self) -> None:
        self.made: list[StepSession] = []
        self.ran: list[int] = []

    def __call__(self) -> StepSession:
        name = len(self.made)

        async def run(feeds: Mapping[Any, Any]) -> dict[str, Any]:
            self.ran.append(name)
            return {"y": name}

        session = StepSession(run)
        self.made.append(session)
        return session


class FailsFirstBeforeRun:
    """The first ``before_run`` raises ``AbortedError``; records the session it failed on."""

    overlapping_steps = True

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.failed_on: int | None = None

    def before_run(self, run_context: SessionRunContext) -> None:
        if self.failed_on is None:
            self.failed_on = self.sessions.made.index(run_context.session)
            raise AbortedError("lost")


@pytest.mark.parametrize(
    "n",
    [
        1,
        pytest.param(2, marks=pytest.mark.xfail(
            strict=True, reason="with lanes, a lane whose recovery the retry policy gave up keeps its failed session",
        )),
    ],
)
async def test_a_session_whose_recovery_was_given_up_is_never_stepped_again(n: int) -> None:
    sessions = Sessions()
    hook = FailsFirstBeforeRun(sessions)
    async with MonitoredSession(sessions, [hook], max_in_flight=n, retry=RetryPolicy(max_attempts=1)) as sess:
        with pytest.raises(AbortedError):
            await sess.run("y")
        for _ in range(2 * n):  # every lane serves a step
            await sess.run("y")
    assert hook.failed_on is not None
    assert hook.failed_on not in sessions.ran
    assert len(sessions.ran) == 2 * n
