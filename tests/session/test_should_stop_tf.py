"""``should_stop()`` as TensorFlow's: False before the block is entered (nothing asked
to stop yet), and a recoverable error a background task recorded, which ``should_stop()``
cannot recover from (it is not async), never ends a block whose work is done."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from hookrun import (
    AbortedError,
    MonitoredSession,
    SessionRunHook,
    SingularMonitoredSession,
    StepSession,
)

pytestmark = pytest.mark.anyio


def _creator() -> StepSession:
    return StepSession(lambda feed: {"y": 1})


@pytest.mark.parametrize("n", [1, 3])
def test_should_stop_is_false_before_the_block_is_entered(n: int) -> None:
    """Before 'async with' nothing asked to stop: should_stop() is False, as TensorFlow's."""
    assert MonitoredSession(_creator, max_in_flight=n).should_stop() is False
    assert SingularMonitoredSession(_creator).should_stop() is False


class _FailsInBackground(SessionRunHook):
    """Starts, in after_run of step ``at``, a coordinator task that fails with AbortedError."""

    overlapping_steps = True

    def __init__(self, at: int) -> None:
        self.at = at
        self.coord: Any = None
        self.failed = anyio.Event()

    async def after_create_session(self, session: object, coord: Any) -> None:
        self.coord = coord

    async def after_run(self, run_context: Any, run_values: Any) -> None:
        if run_values.global_step == self.at:

            async def lose_worker() -> None:
                try:
                    raise AbortedError("worker lost")
                finally:
                    self.failed.set()

            self.coord.start_soon(lose_worker)


@pytest.mark.parametrize("n", [1, 3])
async def test_a_recoverable_background_error_does_not_end_a_finished_block(
    n: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A background task's AbortedError recorded after the last step: should_stop() is
    False (the next run() would recover), and leaving the block, the work done, is clean:
    end is called and the error is logged as a warning, not raised."""
    hook = _FailsInBackground(at=3)
    ends: list[object] = []

    class End(SessionRunHook):
        overlapping_steps = True

        def end(self, session: object) -> None:
            ends.append(session)

    with caplog.at_level(logging.WARNING, logger="hookrun"), anyio.fail_after(10):
        async with MonitoredSession(_creator, [hook, End()], max_in_flight=n) as sess:
            for _ in range(3):
                await sess.run("y")
            await hook.failed.wait()
            await anyio.wait_all_tasks_blocked()
            assert not sess.should_stop()
    assert len(ends) == 1
    assert any("worker lost" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


async def test_a_singular_session_still_raises_a_background_error_at_exit() -> None:
    """A SingularMonitoredSession never recovers: the recorded error is raised as before."""
    hook = _FailsInBackground(at=1)
    with anyio.fail_after(10), pytest.raises(AbortedError, match="worker lost"):
        async with SingularMonitoredSession(_creator, [hook]) as sess:
            await sess.run("y")
            await hook.failed.wait()
