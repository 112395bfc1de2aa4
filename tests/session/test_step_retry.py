"""``retry_on``: an error of the raw run that the user names (a transient one, an HTTP 503
say) is retried on the same session, as the retry policy says, without a new session and
with the hooks seeing the step once; at every ``max_in_flight`` and for every kind of hook."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    RetryPolicy,
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

pytestmark = pytest.mark.anyio

NO_WAIT = RetryPolicy(initial_delay=0.0, max_delay=0.0, jitter=False, log_interval=0)


class Busy(Exception):
    """A transient error of the service (a 503)."""


class Flaky:
    """A raw session whose run of item ``i`` fails ``failures[i]`` times with ``Busy``."""

    made = 0

    def __init__(self, failures: dict[int, int]) -> None:
        Flaky.made += 1
        self.failures = failures
        self.runs: list[int] = []

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any], options: RunOptions, run_metadata: RunMetadata
    ) -> list[Any]:
        i = feed_dict["i"]
        self.runs.append(i)
        await anyio.lowlevel.checkpoint()
        if self.failures.get(i, 0) > 0:
            self.failures[i] -= 1
            raise Busy(f"503 for item {i}")
        return [i if key == "y" else key for key in fetches]


class Counts(SessionRunHook):
    overlapping_steps = True

    def __init__(self) -> None:
        self.before: list[int] = []
        self.after: list[int] = []
        self.created = 0

    async def after_create_session(self, session: object, coord: object) -> None:
        self.created += 1


class PlainCounts(Counts):
    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self.before.append(run_context.global_step)
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.after.append(run_values.global_step)


class AsyncCounts(Counts):
    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self.before.append(run_context.global_step)
        await anyio.lowlevel.checkpoint()
        return SessionRunArgs("y")

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.after.append(run_values.global_step)


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("kind", ["plain", "async"])
async def test_a_named_error_is_retried_on_the_same_session_and_hooks_see_the_step_once(n: int, kind: str) -> None:
    """Items 2 and 5 fail twice with Busy: their runs are retried on the same session; no
    session is re-created, every hook sees each step once, the statistics count the retries."""
    Flaky.made = 0
    hook = PlainCounts() if kind == "plain" else AsyncCounts()
    with anyio.fail_after(10):
        async with MonitoredSession(
            lambda: Flaky({2: 2, 5: 2}), [hook], retry=NO_WAIT, retry_on=(Busy,), max_in_flight=n
        ) as sess:
            got = [y async for y in sess.iterate("y", ({"i": i} for i in range(8)))]
            stats = sess.statistics()
    assert got == list(range(8))
    assert Flaky.made == n and hook.created == n  # no session re-created
    assert sorted(hook.before) == list(range(8)) and hook.after == list(range(1, 9))
    assert stats.step_retries == 4 and stats.recoveries == 0 and stats.failed_steps == 0
    assert "4 runs retried" in stats.format()


async def test_run_without_hooks_retries_too() -> None:
    """A bare step (no hooks) retries its run the same way."""
    raw = Flaky({0: 3})
    async with MonitoredSession(lambda: raw, retry=NO_WAIT, retry_on=[Busy]) as sess:
        assert await sess.run("y", {"i": 0}) == 0
        assert sess.statistics().step_retries == 3
    assert raw.runs == [0, 0, 0, 0]


async def test_the_budget_gives_up_and_the_error_is_raised(caplog: pytest.LogCaptureFixture) -> None:
    """max_attempts=3: the run fails three times, the policy gives up and the error
    propagates (not a recoverable one: the block ends with it); each retry was logged."""
    policy = RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=False, log_interval=0)
    with caplog.at_level(logging.WARNING, logger="hookrun"), pytest.raises(Busy, match="503 for item 0"):
        async with MonitoredSession(lambda: Flaky({0: 5}), retry=policy, retry_on=(Busy,)) as sess:
            await sess.run("y", {"i": 0})
    retries = [r.getMessage() for r in caplog.records if "retrying the step's run" in r.getMessage()]
    assert len(retries) == 2


async def test_an_error_not_named_is_not_retried() -> None:
    """Only the types named are retried: another error propagates at once."""
    class Other(Exception):
        pass

    class Raises:
        runs = 0

        async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
            Raises.runs += 1
            raise Other("no")

    with pytest.raises(Other):
        async with MonitoredSession(Raises, retry=NO_WAIT, retry_on=(Busy,)) as sess:
            await sess.run("y")
    assert Raises.runs == 1


async def test_a_retry_wait_is_cancelled_with_the_step() -> None:
    """Cancelling the caller while the run waits to be retried ends the step at once."""
    slow = RetryPolicy(initial_delay=30.0, max_delay=30.0, jitter=False, log_interval=0)
    async with MonitoredSession(lambda: Flaky({0: 1}), retry=slow, retry_on=(Busy,)) as sess:
        with anyio.move_on_after(0.05) as scope:
            await sess.run("y", {"i": 0})
        assert scope.cancelled_caught
        assert await sess.run("y", {"i": 1}) == 1  # still usable


def test_retry_on_is_checked_naming_it() -> None:
    """A bad retry_on is refused at construction, naming the argument."""
    with pytest.raises(TypeError, match="retry_on must be an iterable of exception classes"):
        MonitoredSession(lambda: Flaky({}), retry_on=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"retry_on must be an iterable .* wrap it in a tuple: \(Busy,\)"):
        MonitoredSession(lambda: Flaky({}), retry_on=Busy)  # type: ignore[arg-type]
