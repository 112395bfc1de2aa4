"""ProgressBarHook: while the bar is shown, console log lines are written above it (through
``tqdm.write``), and the logging handlers are put back when it closes, on every exit."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from _pytest.logging import LogCaptureHandler

from hookrun import MonitoredSession
from hookrun.hooks import ProgressBarHook, StopAtStepHook
from hookrun.testing import ScriptedCreator

from ._support import context, drive

pytestmark = pytest.mark.anyio

tqdm = pytest.importorskip("tqdm").tqdm
LIMIT = 20.0


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


Console = tuple[Terminal, "logging.StreamHandler[Any]"]


class Boom(Exception):
    """The error the tests raise."""


@pytest.fixture
def console(monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:
    """``sys.stderr`` is a terminal, and the root logger logs INFO to it as ``basicConfig`` would.

    Each test puts the terminal in ``sys.stderr`` itself (``on_terminal``): pytest puts its
    own capturing stream there between the fixtures' set-up and the test."""
    terminal = Terminal()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    handler = logging.StreamHandler(terminal)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    try:
        yield terminal, handler
    finally:
        root.handlers, root.level = handlers, level


def ours(handlers: list[logging.Handler]) -> list[logging.Handler]:
    """The handlers of ``handlers`` that are not pytest's own (it adds capturing ones)."""
    return [h for h in handlers if not isinstance(h, LogCaptureHandler)]


def on_terminal(monkeypatch: pytest.MonkeyPatch, console: Console) -> None:
    monkeypatch.setattr(sys, "stderr", console[0])


class Talker:
    """A hook that logs a line after each step and notes the root logger's handlers."""

    def __init__(self) -> None:
        self.seen: list[list[logging.Handler]] = []

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.seen.append(ours(logging.getLogger().handlers))
        logging.getLogger("hookrun").info("said at step %d", run_values.global_step)


async def test_a_log_line_during_the_run_is_written_above_the_bar(
    console: Console, monkeypatch: pytest.MonkeyPatch, session_kind: str
) -> None:
    """Each log line is a terminal line of its own, written by tqdm.write: no fragment in the bar."""
    on_terminal(monkeypatch, console)
    terminal, _ = console
    written: list[str] = []
    real_write = tqdm.write

    def write(text: str, **kwargs: Any) -> None:
        written.append(text)
        real_write(text, **kwargs)

    monkeypatch.setattr(tqdm, "write", write)
    hooks = [ProgressBarHook(4, mode="bar", desc="train"), Talker(), StopAtStepHook(num_steps=4)]
    await drive(hooks, lambda i: {}, kind=session_kind)
    expected = [f"INFO hookrun: said at step {step}" for step in range(1, 5)]
    assert written == expected
    # What the terminal shows of each line is what it holds after its last carriage return.
    shown = [line.rsplit("\r", 1)[-1] for line in terminal.getvalue().split("\n")]
    assert [line for line in shown if "said at" in line] == expected
    assert any("train" in line and "4/4" in line for line in terminal.getvalue().split("\n"))


async def run_then_exit(how: str, hooks: list[object]) -> None:
    """Run two steps with ``hooks``, then leave cleanly, with an error or by a cancellation."""
    with anyio.fail_after(LIMIT), anyio.CancelScope() as outer:
        try:
            async with MonitoredSession(ScriptedCreator({"loss": 0.5}), hooks) as sess:
                for _ in range(2):
                    await sess.run(["loss"])
                if how == "error":
                    raise Boom("in the block")
                if how == "cancellation":
                    outer.cancel()
                    await anyio.sleep_forever()
        except Boom:
            assert how == "error"
    assert outer.cancelled_caught == (how == "cancellation")


@pytest.mark.parametrize("how", ["end", "error", "cancellation"])
async def test_the_handlers_are_swapped_while_the_bar_is_open_and_put_back_after(
    console: Console, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """While the bar is open the console handler is stood in for; after any exit it is back."""
    on_terminal(monkeypatch, console)
    _, handler = console
    talker = Talker()
    await run_then_exit(how, [ProgressBarHook(10, mode="bar"), talker])
    assert len(talker.seen) == 2
    for handlers in talker.seen:
        assert handler not in handlers and len(handlers) == 1
        assert getattr(handlers[0], "handler", None) is handler
    assert ours(logging.getLogger().handlers) == [handler]
    assert not tqdm._instances


async def test_a_failed_begin_leaves_the_handlers_as_they_were(
    console: Console, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sibling's begin fails: the bar never opened, the handlers were never touched."""
    on_terminal(monkeypatch, console)
    _, handler = console

    class FailingBegin:
        async def begin(self) -> None:
            raise Boom("in begin")

    hook = ProgressBarHook(10, mode="bar")
    with anyio.fail_after(LIMIT), pytest.raises(Boom, match="in begin"):
        async with MonitoredSession(ScriptedCreator({}), [hook, FailingBegin()]):
            pass
    assert ours(logging.getLogger().handlers) == [handler]
    assert not tqdm._instances


async def test_bars_closing_in_any_order_put_the_handlers_back_once_the_last_closes(
    console: Console, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two sessions' bars: the first to close leaves the lines routed around the other one."""
    on_terminal(monkeypatch, console)
    _, handler = console
    first, second = ProgressBarHook(10, mode="bar"), ProgressBarHook(10, mode="bar")
    first.before_run(context(0))
    second.before_run(context(0))
    await first.end(None)
    assert handler not in logging.getLogger().handlers
    await second.on_exception(None, Boom("second"))
    assert ours(logging.getLogger().handlers) == [handler]


async def test_each_console_handler_keeps_its_level_and_filters(
    console: Console, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A WARNING console handler still drops INFO lines, and its filters still apply."""
    on_terminal(monkeypatch, console)
    terminal, handler = console
    handler.setLevel(logging.WARNING)
    handler.addFilter(lambda record: "secret" not in record.getMessage())
    hook = ProgressBarHook(10, mode="bar")
    hook.before_run(context(0))
    log = logging.getLogger("hookrun")
    log.info("an info line")
    log.warning("a secret warning")
    log.warning("a warning line")
    await hook.end(None)
    text = terminal.getvalue()
    assert "WARNING hookrun: a warning line\n" in text
    assert "info line" not in text and "secret" not in text


async def test_a_logger_without_a_console_handler_is_left_alone(
    console: Console, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Logs that go to a file only do not start showing on the terminal while a bar is open."""
    on_terminal(monkeypatch, console)
    elsewhere = logging.StreamHandler(io.StringIO())
    logging.getLogger().handlers = [elsewhere]
    hook = ProgressBarHook(10, mode="bar")
    hook.before_run(context(0))
    assert ours(logging.getLogger().handlers) == [elsewhere]
    await hook.end(None)
    assert ours(logging.getLogger().handlers) == [elsewhere]


async def test_log_mode_leaves_the_handlers_alone(console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a bar nothing is drawn, so nothing is routed."""
    on_terminal(monkeypatch, console)
    _, handler = console
    talker = Talker()
    await run_then_exit("end", [ProgressBarHook(10, mode="log"), talker])
    assert talker.seen == [[handler], [handler]]


async def test_a_console_handler_on_the_hookrun_logger_is_routed_too(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler put on the ``hookrun`` logger itself writes above the bar as well."""
    on_terminal(monkeypatch, console)
    terminal, _ = console
    log = logging.getLogger("hookrun")
    own = logging.StreamHandler(sys.stderr)
    monkeypatch.setattr(log, "handlers", [own])
    monkeypatch.setattr(log, "propagate", False)
    hook = ProgressBarHook(10, mode="bar")
    hook.before_run(context(0))
    assert getattr(log.handlers[0], "handler", None) is own
    log.warning("above the bar")
    await hook.end(None)
    assert log.handlers == [own]
    assert "\nabove the bar\n" in terminal.getvalue().replace("\r", "\n")
