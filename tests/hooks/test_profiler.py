"""ProfilerHook (TF basic_session_run_hooks_test 165-171): Chrome traces of hook calls and runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hookrun import RunMetadata, TimingRecord
from hookrun.hooks import LoggingTensorHook, ProfilerHook, StopAtStepHook, chrome_trace

from ._support import FakeClock, context, drive, values


def timelines(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("timeline-*.json"))


async def run_steps(
    hook: ProfilerHook, count: int, clock: FakeClock, secs: float = 0.0
) -> list[bool]:
    """Drive ``count`` runs by hand; return whether each asked for tracing."""
    traced = []
    for step in range(count):
        ctx = context(step)
        args = await hook.before_run(ctx)
        traced.append(args is not None and args.options is not None and args.options.trace)
        metadata = RunMetadata()
        metadata.timings.append(TimingRecord("run", "run", clock.now, clock.now + 0.001))
        hook.after_run(ctx, values(step + 1, metadata=metadata))
        clock.advance(secs)
    return traced


def test_raise_in_both_secs_and_steps() -> None:
    """Both intervals: TF's timer message."""
    with pytest.raises(ValueError, match=r"Can not provide both every_secs and every_steps\."):
        ProfilerHook(save_secs=10, save_steps=20)


def test_raise_in_none_secs_and_steps() -> None:
    """Neither interval: TF's timer message."""
    with pytest.raises(ValueError, match=r"Either every_secs or every_steps should be provided\."):
        ProfilerHook()


@pytest.mark.anyio
async def test_save_secs_does_not_save_in_first_step(tmp_path: Path) -> None:
    """The very first run is never traced."""
    clock = FakeClock()
    hook = ProfilerHook(save_secs=2, output_dir=tmp_path, clock=clock)
    await hook.begin()
    assert await run_steps(hook, 1, clock) == [False]
    await hook.end(None)
    assert timelines(tmp_path) == []


@pytest.mark.anyio
async def test_save_secs_saves_periodically(tmp_path: Path) -> None:
    """Traces when at least 2 s passed since the previous trace."""
    clock = FakeClock()
    hook = ProfilerHook(save_secs=2, output_dir=tmp_path, clock=clock)
    await hook.begin()
    # The first run (at t=0) starts the count: runs at t=2 and t=4 are traced.
    assert await run_steps(hook, 6, clock, secs=1.0) == [False, False, True, False, True, False]
    await hook.end(None)
    assert timelines(tmp_path) == ["timeline-3.json", "timeline-5.json"]


@pytest.mark.anyio
async def test_save_secs_counts_from_the_first_run_as_tensorflow_does(tmp_path: Path) -> None:
    """TF's own test: runs at +0 (not saved), +2.5 (saved), +2.6, +4.4 (not), +4.5 (saved)."""
    clock = FakeClock()
    hook = ProfilerHook(save_secs=2, output_dir=tmp_path, clock=clock)
    await hook.begin()
    traced = []
    for step, at in enumerate([0.0, 2.5, 2.6, 4.4, 4.5]):
        clock.now = 1000.0 + at
        ctx = context(step)
        args = await hook.before_run(ctx)
        traced.append(args is not None)
        hook.after_run(ctx, values(step + 1))
    assert traced == [False, True, False, False, True]


@pytest.mark.anyio
async def test_save_secs_does_not_trace_the_second_run_right_away(tmp_path: Path) -> None:
    """However little time passed, the second run is not traced (the first one started the count)."""
    clock = FakeClock()
    hook = ProfilerHook(save_secs=60, output_dir=tmp_path, clock=clock)
    await hook.begin()
    assert await run_steps(hook, 3, clock, secs=0.5) == [False, False, False]


@pytest.mark.anyio
async def test_save_steps_three_traces_steps_three_and_six_in_a_session(
    tmp_path: Path, session_kind: str
) -> None:
    """In a real session from step 0, save_steps=3 traces the runs reaching 3 and 6 (TF)."""
    hook = ProfilerHook(save_steps=3, output_dir=tmp_path)
    await drive([StopAtStepHook(num_steps=7), hook], lambda i: {}, kind=session_kind)
    assert timelines(tmp_path) == ["timeline-3.json", "timeline-6.json"]


@pytest.mark.anyio
async def test_the_count_starts_at_the_first_runs_step_after_a_restart(tmp_path: Path) -> None:
    """Resuming at step 100 with save_steps=3: steps 103 and 106 are traced."""
    clock = FakeClock()
    hook = ProfilerHook(save_steps=3, output_dir=tmp_path, clock=clock)
    await hook.begin()
    for step in range(100, 107):
        ctx = context(step)
        await hook.before_run(ctx)
        hook.after_run(ctx, values(step + 1))
    await hook.end(None)
    assert timelines(tmp_path) == ["timeline-103.json", "timeline-106.json"]


@pytest.mark.anyio
async def test_save_steps_does_not_save_in_first_step(tmp_path: Path) -> None:
    """The very first run is never traced with save_steps either."""
    clock = FakeClock()
    hook = ProfilerHook(save_steps=1, output_dir=tmp_path, clock=clock)
    await hook.begin()
    assert await run_steps(hook, 1, clock) == [False]


@pytest.mark.anyio
async def test_save_steps_saves_periodically(tmp_path: Path) -> None:
    """Every 2nd run is traced: steps 2, 4."""
    clock = FakeClock()
    hook = ProfilerHook(save_steps=2, output_dir=tmp_path, clock=clock)
    await hook.begin()
    assert await run_steps(hook, 5, clock) == [False, True, False, True, False]
    await hook.end(None)
    assert timelines(tmp_path) == ["timeline-2.json", "timeline-4.json"]
    assert hook.saved_files == [tmp_path / "timeline-2.json", tmp_path / "timeline-4.json"]


@pytest.mark.anyio
async def test_run_metadata_saves(tmp_path: Path) -> None:
    """The trace of step 2 carries its step and the tag step_2 (TF: run metadata under step_2)."""
    clock = FakeClock()
    hook = ProfilerHook(save_steps=2, output_dir=tmp_path, clock=clock)
    await hook.begin()
    await run_steps(hook, 2, clock)
    assert timelines(tmp_path) == []  # written once the step is complete: next before_run or end
    await hook.end(None)
    trace = json.loads((tmp_path / "timeline-2.json").read_text())
    assert trace["otherData"] == {"step": 2, "tag": "step_2"}


def test_chrome_trace_format() -> None:
    """Complete events in microseconds, one lane per hook and one for the run, named lanes."""
    timings = [
        TimingRecord("before_run", "A", 10.0, 10.001),
        TimingRecord("run", "run", 10.001, 10.004),
        TimingRecord("after_run", "A", 10.004, 10.0045),
        TimingRecord("after_run", "run", 10.004, 10.005),
    ]
    trace: dict[str, Any] = chrome_trace(timings, step=7)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in complete] == ["before_run:A", "run", "after_run:A", "after_run:run"]
    assert complete[1]["ts"] == pytest.approx(1000.0) and complete[1]["dur"] == pytest.approx(
        3000.0
    )
    assert complete[0]["tid"] == complete[2]["tid"] != complete[1]["tid"]
    assert complete[3]["tid"] not in (complete[0]["tid"], complete[1]["tid"])
    lanes = {
        e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"
    }
    assert lanes[complete[1]["tid"]] == "run" and lanes[complete[0]["tid"]] == "A"


@pytest.mark.anyio
async def test_traces_every_hook_call_in_a_session(tmp_path: Path, session_kind: str) -> None:
    """In a session the trace holds the run and every hook's before_run and after_run call, with names."""
    hooks = [
        ProfilerHook(save_steps=2, output_dir=tmp_path),
        LoggingTensorHook(["loss"], every_n_iter=1),
        StopAtStepHook(num_steps=3),
    ]
    await drive(hooks, lambda i: {"loss": 1.0}, kind=session_kind)
    assert timelines(tmp_path) == ["timeline-2.json"]
    trace = json.loads((tmp_path / "timeline-2.json").read_text())
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert "run" in names
    assert {
        "before_run:ProfilerHook",
        "before_run:LoggingTensorHook",
        "before_run:StopAtStepHook",
        "after_run:ProfilerHook",
        "after_run:LoggingTensorHook",
        "after_run:StopAtStepHook",
    } <= names
    assert all(e["dur"] >= 0 for e in trace["traceEvents"] if e["ph"] == "X")
