"""LoggingTensorHook (TF basic_session_run_hooks_test 111-118)."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Any

import anyio
import pytest

import hookrun
from hookrun.hooks import LoggingTensorHook, StopAtStepHook

from ._support import FakeClock, context, drive, make_session, values


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "hookrun" and r.levelno == logging.INFO
    ]


def run_iterations(hook: LoggingTensorHook, count: int, value: Any = 7) -> None:
    """Call before_run/after_run ``count`` times, answering any fetch with ``value``."""
    for i in range(count):
        ctx = context(i)
        args = hook.before_run(ctx)
        results = None if args is None else {key: value for key in args.fetches}
        hook.after_run(ctx, values(i + 1, results))


def test_illegal_args() -> None:
    """Zero/negative every_n_iter and both-or-neither frequencies are ValueErrors (TF's words)."""
    with pytest.raises(ValueError, match="invalid every_n_iter"):
        LoggingTensorHook(["t"], every_n_iter=0)
    with pytest.raises(ValueError, match="invalid every_n_iter"):
        LoggingTensorHook(["t"], every_n_iter=-10)
    with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
        LoggingTensorHook(["t"], every_n_iter=5, every_n_secs=5)
    with pytest.raises(ValueError, match="exactly one of every_n_iter and every_n_secs"):
        LoggingTensorHook(["t"])


def test_tensors_must_be_a_mapping_or_list() -> None:
    """A bare string is not a list of keys."""
    with pytest.raises(TypeError, match="tensors must be a mapping"):
        LoggingTensorHook("loss", every_n_iter=1)


@pytest.mark.anyio
async def test_print_at_end_only(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing is logged during runs; the last step's values are logged at end."""
    hook = LoggingTensorHook({"foo": "foo"}, at_end=True)
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        run_iterations(hook, 9)
        run_iterations(hook, 1, value=42)
        assert messages(caplog) == []
        await hook.end(make_session("sync", lambda i: {"foo": -1}))
    assert messages(caplog) == ["foo = 42"]


@pytest.mark.anyio
async def test_print_every_n_steps(caplog: pytest.LogCaptureFixture) -> None:
    """Logged on the first iteration and every 10th after; again after a new begin."""
    hook = LoggingTensorHook(["foo"], every_n_iter=10, clock=FakeClock())
    with caplog.at_level(logging.INFO, logger="hookrun"):
        await hook.begin()
        run_iterations(hook, 1)
        assert len(messages(caplog)) == 1
        run_iterations(hook, 9)
        assert len(messages(caplog)) == 1
        run_iterations(hook, 1)
        assert len(messages(caplog)) == 2
        await hook.begin()
        run_iterations(hook, 1)
        assert len(messages(caplog)) == 3


@pytest.mark.anyio
async def test_print_every_n_steps_and_end(caplog: pytest.LogCaptureFixture) -> None:
    """As above, plus one log at end."""
    hook = LoggingTensorHook(["foo"], every_n_iter=10, at_end=True, clock=FakeClock())
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        run_iterations(hook, 10)
        run_iterations(hook, 1, value=1)
        assert len(messages(caplog)) == 2
        await hook.end(make_session("sync", lambda i: {"foo": -1}))
    assert len(messages(caplog)) == 3
    assert messages(caplog)[-1].startswith("foo = 1")


@pytest.mark.anyio
async def test_print_first_step(caplog: pytest.LogCaptureFixture) -> None:
    """The first line has no elapsed-seconds suffix; the next one has it."""
    clock = FakeClock()
    hook = LoggingTensorHook({"foo": "f", "bar": "b"}, every_n_iter=1, clock=clock)
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        run_iterations(hook, 1, value=3)
        clock.advance(1.25)
        run_iterations(hook, 1, value=4)
    assert messages(caplog) == ["bar = 3, foo = 3", "bar = 4, foo = 4 (1.250 sec)"]


@pytest.mark.anyio
async def test_print_every_n_secs(caplog: pytest.LogCaptureFixture) -> None:
    """Logged on the first run, then only after the interval has passed."""
    clock = FakeClock()
    hook = LoggingTensorHook(["foo"], every_n_secs=1.0, clock=clock)
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        run_iterations(hook, 1)
        assert len(messages(caplog)) == 1
        clock.advance(0.5)
        run_iterations(hook, 1)
        assert len(messages(caplog)) == 1
        clock.advance(0.5)
        run_iterations(hook, 1)
        assert len(messages(caplog)) == 2


@pytest.mark.anyio
async def test_print_every_n_secs_and_end(caplog: pytest.LogCaptureFixture) -> None:
    """Time-based logs plus one at end."""
    clock = FakeClock()
    hook = LoggingTensorHook(["foo"], every_n_secs=1.0, at_end=True, clock=clock)
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        run_iterations(hook, 3)
        await hook.end(make_session("remote", lambda i: {"foo": 9}))
    assert len(messages(caplog)) == 2


@pytest.mark.anyio
async def test_print_formatter(caplog: pytest.LogCaptureFixture) -> None:
    """The formatter's output is the logged message."""

    def formatter(found: dict[Hashable, Any]) -> str:
        return f"foo={found['foo']} bar={found['bar']}"

    hook = LoggingTensorHook(["foo", "bar"], every_n_iter=1, formatter=formatter, clock=FakeClock())
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        run_iterations(hook, 1, value=2)
    assert messages(caplog) == ["foo=2 bar=2"]


def test_list_tags_keep_their_order(caplog: pytest.LogCaptureFixture) -> None:
    """Tags given as a list are logged in that order; a mapping's in sorted order."""
    hook = LoggingTensorHook(["z", "a"], every_n_iter=1, clock=FakeClock())
    with caplog.at_level(logging.INFO, logger="hookrun"):
        run_iterations(hook, 1)
    assert messages(caplog) == ["z = 7, a = 7"]


@pytest.mark.anyio
async def test_in_a_monitored_session(session_kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """In a session the values come from fetches by key, on local iterations 0, 2, 4."""
    hook = LoggingTensorHook({"loss": "loss"}, every_n_iter=2)
    with caplog.at_level(logging.INFO, logger="hookrun"):
        await drive(
            [hook, StopAtStepHook(num_steps=5)], lambda i: {"loss": i * 10}, kind=session_kind
        )
    assert [m.split(" (")[0] for m in messages(caplog)] == ["loss = 0", "loss = 20", "loss = 40"]


@pytest.mark.anyio
async def test_at_end_logs_the_last_step_without_running_the_session_again(
    session_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With StopAtStepHook(num_steps=3) the step function runs 3 times, not 4, and the last
    step's values are logged at end."""
    calls: list[int] = []

    def produce(i: int) -> dict[str, int]:
        calls.append(i)
        return {"loss": 100 + i}

    hook = LoggingTensorHook({"loss": "loss"}, at_end=True)
    with caplog.at_level(logging.INFO, logger="hookrun"):
        await drive([StopAtStepHook(num_steps=3), hook], produce, kind=session_kind)
    assert calls == [0, 1, 2]
    assert messages(caplog) == ["loss = 102"]


class _EndOfInput:
    """A session over three batches: the fourth run is the end of the input."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.runs += 1
        if self.runs > 3:
            raise StopAsyncIteration
        return [self.runs for _ in fetches]


@pytest.mark.anyio
async def test_at_end_after_the_end_of_the_input_is_a_clean_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The input ends (StopAsyncIteration): the block ends cleanly and end logs the last batch."""
    session = _EndOfInput()

    async def create() -> _EndOfInput:
        return session

    hook = LoggingTensorHook(["batch"], at_end=True)
    with caplog.at_level(logging.INFO, logger="hookrun"), anyio.fail_after(10):
        async with hookrun.MonitoredSession(create, [hook]) as sess:
            while not sess.should_stop():
                await sess.run()
    assert session.runs == 4
    assert messages(caplog) == ["batch = 3"]


@pytest.mark.anyio
async def test_at_end_without_any_completed_step_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = LoggingTensorHook(["x"], at_end=True)
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        await hook.end(None)
    assert messages(caplog) == []
