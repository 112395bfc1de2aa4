"""The example pipeline runs on both backends and produces TensorBoard events and Chrome traces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from examples import hooks_pipeline

from hookrun.hooks import read_eval_metrics


@pytest.mark.anyio
async def test_pipeline_writes_tensorboard_events_and_traces(tmp_path: Path) -> None:
    """Forty steps: scalars every 5 steps, steps/sec every 10, traces at steps 10..40."""
    report = await hooks_pipeline.run_pipeline(tmp_path, steps=40)
    assert report.steps == 40 and report.processed == 40 * 32
    events = list(report.tensorboard_dir.glob("events.out.tfevents.*"))
    assert len(events) == 2
    metrics = read_eval_metrics(report.tensorboard_dir)
    assert {1, 6, 11, 36} <= set(metrics)
    assert set(metrics[1]) == {"loss", "accuracy"}
    assert "global_step/sec" in metrics[11]
    assert sorted(p.name for p in report.traces) == sorted(
        f"timeline-{step}.json" for step in (10, 20, 30, 40)
    )
    for path in report.traces:
        trace = json.loads(path.read_text())
        complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        assert any(e["name"] == "run" for e in complete)
        assert all({"ts", "dur", "pid", "tid"} <= set(e) for e in complete)


def test_command_line_on_trio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line runs the pipeline on the chosen backend."""
    report = hooks_pipeline.main([str(tmp_path), "--steps", "12", "--backend", "trio"])
    assert report.steps == 12
    assert "12 steps, 384 items" in capsys.readouterr().out
    assert (tmp_path / "traces" / "timeline-10.json").exists()
