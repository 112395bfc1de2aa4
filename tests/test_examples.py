"""Every example runs, on both backends, and does what its docstring says."""

from __future__ import annotations

import pytest
from examples import flaky_recovery, minimal_hook, pipeline, quickstart

pytestmark = pytest.mark.anyio


async def test_quickstart_runs_three_steps(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's quick start prints three losses and stops after three steps."""
    assert await quickstart.main() == [0.0, 2.0, 4.0]
    assert capsys.readouterr().out.splitlines() == ["step 1: loss 1.000", "step 2: loss 0.500", "step 3: loss 0.333"]


async def test_minimal_hook_stops_after_three_steps() -> None:
    """The minimal hook stops the loop at step 3."""
    assert await minimal_hook.main() == [1, 4, 9]


async def test_pipeline_ends_cleanly_on_exhausted_input() -> None:
    """The pipeline processes every batch and end() runs when the input is exhausted."""
    written, total = await pipeline.main(batches=5)
    assert len(written) == 5
    assert total == sum(sum(batch) for batch in written)


async def test_flaky_recovery_recreates_sessions() -> None:
    """Two lost workers: three sessions, every step answered, the step counter intact."""
    answers, created, step = await flaky_recovery.main(steps=8)
    assert len(answers) == 8 and created == 3 and step == 8
