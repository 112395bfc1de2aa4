"""examples/observability.py runs on both backends, prints the statistics table and logs
the slow hook once, as a JSON line with its structured fields."""

from __future__ import annotations

import io
import json
import logging

import pytest
from examples import observability

pytestmark = pytest.mark.anyio


async def test_observability_example_prints_the_table_and_names_the_slow_hook(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = io.StringIO()
    handler = observability.configure_logging(stream)
    try:
        stats = await observability.main(steps=12)
    finally:
        logging.getLogger("hookrun").removeHandler(handler)
    out = capsys.readouterr().out
    assert out.startswith("hookrun statistics: 12 steps (0 failed), 1 session created, 0 recoveries")
    assert "#1 upload.after_run" in out and "#0 StepCounterHook.after_run" in out
    assert stats.steps == 12 and stats.hook("upload", "after_run").calls == 12
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    slow = [line for line in lines if line["message"].startswith("slow hook")]
    assert len(slow) == 1
    assert (slow[0]["hook"], slow[0]["phase"], slow[0]["level"]) == ("upload", "after_run", "WARNING")
    assert isinstance(slow[0]["step"], int)
