"""ProgressBarHook: a tqdm bar on terminals, periodic log lines elsewhere."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from hookrun.hooks import ProgressBarHook, StopAtStepHook

from ._support import FakeClock, context, drive, values


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_validation() -> None:
    """A bad mode, a negative total or a bare-string metrics are rejected."""
    with pytest.raises(ValueError, match="mode must be"):
        ProgressBarHook(mode="fancy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="total must be None or an int >= 0, got -1"):
        ProgressBarHook(-1)
    with pytest.raises(TypeError, match="metrics must be a mapping"):
        ProgressBarHook(metrics="loss")


def test_auto_mode_picks_bar_on_a_terminal_and_log_elsewhere() -> None:
    """auto draws a bar only when the output is a terminal."""
    assert ProgressBarHook(file=Terminal()).mode == "bar"
    assert ProgressBarHook(file=io.StringIO()).mode == "log"


@pytest.mark.anyio
async def test_bar_shows_steps_and_metrics(session_kind: str) -> None:
    """The bar counts global steps to total and shows the fetched metrics."""
    out = Terminal()
    hook = ProgressBarHook(10, metrics={"loss": "loss"}, file=out, desc="train")
    await drive(
        [hook, StopAtStepHook(num_steps=10)], lambda i: {"loss": 0.5 + i}, kind=session_kind
    )
    text = out.getvalue()
    assert "train" in text and "10/10" in text and "loss=9.5" in text and "step/s" in text


@pytest.mark.anyio
async def test_log_mode_logs_periodically_and_at_end(caplog: pytest.LogCaptureFixture) -> None:
    """Off a terminal it logs a line every log_every_secs and a final one at end."""
    clock = FakeClock()
    hook = ProgressBarHook(4, metrics=["loss"], mode="log", log_every_secs=10.0, clock=clock)
    await hook.begin()
    with caplog.at_level(logging.INFO, logger="hookrun"):
        for step in range(4):
            hook.before_run(context(step))
            clock.advance(6.0)
            hook.after_run(context(step), values(step + 1, {"loss": 0.25}))
        await hook.end(None)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "step 2/4 (50.0%), 0.167 steps/s, loss=0.25",
        "step 4/4 (100.0%), 0.167 steps/s, loss=0.25",
    ]


@pytest.mark.anyio
async def test_log_mode_without_total(caplog: pytest.LogCaptureFixture) -> None:
    """Without a total the line has no percentage; the end line is not repeated."""
    clock = FakeClock()
    hook = ProgressBarHook(mode="log", log_every_secs=1.0, desc="etl", clock=clock)
    with caplog.at_level(logging.INFO, logger="hookrun"):
        hook.before_run(context(7))
        clock.advance(2.0)
        hook.after_run(context(7), values(8))
        await hook.end(None)
    assert [r.getMessage() for r in caplog.records] == ["etl: step 8, 0.5 steps/s"]


def test_missing_tqdm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without tqdm an explicit bar is an ImportError naming hookrun[progress], on a terminal
    or not, when the hook is built."""
    monkeypatch.setitem(sys.modules, "tqdm", None)
    for file in (Terminal(), io.StringIO(), None):
        with pytest.raises(ImportError, match=r"pip install 'hookrun\[progress\]'"):
            ProgressBarHook(mode="bar", file=file)
    assert ProgressBarHook(mode="log").mode == "log"


@pytest.mark.anyio
async def test_auto_without_tqdm_logs_lines_everywhere_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, session_kind: str
) -> None:
    """auto without tqdm: the same on a terminal and in a pipe: one warning, then log lines."""
    monkeypatch.setitem(sys.modules, "tqdm", None)
    for file in (Terminal(), io.StringIO()):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="hookrun"):
            hook = ProgressBarHook(4, file=file)
            assert hook.mode == "log"
            await drive([hook, StopAtStepHook(num_steps=4)], lambda i: {}, kind=session_kind)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "hookrun[progress]" in warnings[0]
        lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert lines[-1].startswith("step 4/4 (100.0%)")
        assert file.getvalue() == ""  # no bar drawn


def test_log_mode_without_tqdm_does_not_warn(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)
    with caplog.at_level(logging.INFO, logger="hookrun"):
        ProgressBarHook(mode="log", file=Terminal())
    assert caplog.records == []
