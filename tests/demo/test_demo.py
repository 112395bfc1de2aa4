"""``hookrun demo``: the pipeline it runs, what it writes, and its command line."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hookrun
import hookrun.__main__ as cli
from hookrun._demo import _demo_hooks
from hookrun._demo._pipeline import run_demo, statistics_summary
from hookrun.hooks import read_eval_metrics


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookrun", *args], capture_output=True, text=True, timeout=120, check=False
    )


# -- the pipeline, in process, on both backends ---------------------------------------------


@pytest.mark.anyio
async def test_demo_recovers_once_and_writes_summaries_and_traces(tmp_path: Path) -> None:
    said: list[str] = []
    report = await run_demo(30, tmp_path, say=said.append, delay=0.0)
    assert report.steps == 30 and report.sessions == 2 and report.recoveries == 1
    assert said == [
        "worker 1 ready",
        "worker 2 ready (the session was re-created: every hook's after_create_session ran again)",
    ]
    # The lost worker lost no batch: the model saw all 30 and fits the data.
    assert abs(report.model.w - 3.0) < 0.2 and abs(report.model.b - 1.0) < 0.1
    assert report.summaries == tmp_path / "tensorboard"
    scalars = read_eval_metrics(report.summaries)
    assert sorted(step for step, tags in scalars.items() if "loss" in tags) == [1, 6, 11, 16, 21, 26]
    assert {"loss", "w", "b"} <= set(scalars[26]) and "global_step/sec" in scalars[21]
    assert [path.name for path in report.traces] == ["timeline-10.json", "timeline-20.json", "timeline-30.json"]
    for path in report.traces:
        trace = json.loads(path.read_text())
        names = {event["name"] for event in trace["traceEvents"]}
        assert "run" in names and any(name.startswith("after_run:") for name in names)
    # Checkpoints: at each creation, every 10 steps, at the end; the newest five are kept.
    assert report.checkpoint_dir == tmp_path / "checkpoints"
    steps = [info.step for info in report.checkpoints]
    assert steps == sorted(steps) and steps[-1] == 30 and len(steps) == 5
    assert sorted(path.name for path in report.checkpoint_dir.glob("ckpt-*")) == sorted(f"ckpt-{s}" for s in steps)
    restored = await hookrun.Checkpointer(report.checkpoint_dir).restore()
    assert restored is not None and restored.step == 30
    assert restored.state["session"] == {"w": report.model.w, "b": report.model.b}
    stats = report.statistics
    assert stats is not None
    assert (stats.steps, stats.failed_steps, stats.sessions_created, stats.recoveries) == (30, 1, 2, 1)
    assert stats.hook("ProfilerHook", "before_run").calls == 31


@pytest.mark.anyio
async def test_demo_without_a_failure_reports_no_recovery(tmp_path: Path) -> None:
    report = await run_demo(2, tmp_path, say=lambda line: None, delay=0.0)
    assert (report.steps, report.sessions, report.recoveries) == (2, 1, 0)
    assert [info.step for info in report.checkpoints] == [0, 2]  # at the creation and at the end


@pytest.mark.anyio
async def test_demo_writes_json_lines_when_tensorboardx_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_demo_hooks, "have", lambda module: module != "tensorboardX")
    report = await run_demo(12, tmp_path, say=lambda line: None, delay=0.0)
    assert report.summaries == tmp_path / "summaries.jsonl"
    assert "hookrun[tensorboard]" in report.summary_format
    assert "(" not in report.summary_format  # printed in brackets: none nested inside
    records = [json.loads(line) for line in report.summaries.read_text().splitlines()]
    assert [r["step"] for r in records if r["tag"] == "loss"] == [1, 6, 11]
    assert any(r["tag"] == "global_step/sec" and r["step"] == 11 for r in records)
    assert not (tmp_path / "tensorboard").exists()


@pytest.mark.anyio
async def test_the_statistics_show_the_five_slowest_hooks_and_say_how_to_see_the_rest(tmp_path: Path) -> None:
    """After the story: the step, the session run and the 5 slowest hook rows, slowest first."""
    report = await run_demo(12, tmp_path, say=lambda line: None, delay=0.0)
    assert report.statistics is not None
    stats = report.statistics
    lines = statistics_summary(stats).splitlines()
    assert lines[0].startswith("hookrun statistics: 12 steps (1 failed), 2 sessions created, 1 recovery taking ")
    assert re.search(r"1 recovery taking [\d.]+[mun]?s in all, [\d.]+[mun]?s of it waiting to retry$", lines[0])
    assert lines[1] == "the step, the session run and the 5 slowest hooks (a row per phase, by mean):"
    assert lines[3].startswith("step ") and lines[4].startswith("session run ")
    rows = lines[5:-1]
    slowest = sorted(stats.hooks, key=lambda entry: entry.latency.mean or 0.0, reverse=True)[:5]
    assert [row.split()[1] for row in rows] == [f"{entry.hook}.{entry.phase}" for entry in slowest]
    assert lines[-1] == (
        f"{len(stats.hooks) - 5} more rows not shown: in a program, print(session.statistics()) prints every one"
    )


def test_the_statistics_of_a_session_without_recovery_say_no_more() -> None:
    """No recovery: no figures to explain; few hooks: no line about rows not shown."""
    from hookrun._observe._histogram import Latency
    from hookrun._observe._report import HookStatistics, SessionStatistics

    hook = HookStatistics(0, "Mine", "after_run", 2, 0, Latency(2, 0.002, 0.0015, 0.001, 0.0015, 0.0015))
    stats = SessionStatistics(2, 0, 1, 0, 0.0, 0.0, 2, Latency(), Latency(), (hook,))
    lines = statistics_summary(stats).splitlines()
    assert lines[0] == "hookrun statistics: 2 steps (0 failed), 1 session created, 0 recoveries"
    assert lines[1] == "the step, the session run and the 1 slowest hooks (a row per phase, by mean):"
    assert lines[-1].startswith("#0 Mine.after_run ")


# -- the command line -----------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_demo_command_runs_and_says_what_it_did(backend: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli("demo", "--backend", backend, "--steps", "30", "--out", str(out))
    assert done.returncode == 0, done.stderr
    stdout, stderr = done.stdout, done.stderr
    assert f"30 steps on the {backend} backend; outputs in {out}" in stdout
    assert "the input ended after 30 steps: the pipeline ended cleanly (2 sessions created, one recovery)" in stdout
    assert f"backend:   {backend}" in stdout
    assert "hookrun statistics: 30 steps (1 failed), 2 sessions created, 1 recovery" in stdout
    assert "the step, the session run and the 5 slowest hooks (a row per phase, by mean):" in stdout
    assert "25 more rows not shown: in a program, print(session.statistics()) prints every one" in stdout
    assert f"summaries: {out / 'tensorboard'}" in stdout and f"traces:    {out / 'traces'}" in stdout
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert len(list((out / "traces").glob("timeline-*.json"))) == 3
    # Every checkpoint on disk, by name: the timer restarts at the re-creation (step 14).
    kept = "ckpt-0, ckpt-10, ckpt-14, ckpt-24, ckpt-30"
    assert f"checkpoints: {out / 'checkpoints'} (5 kept: {kept}; the latest holds step 30" in stdout
    on_disk = sorted((path.name for path in (out / "checkpoints").glob("ckpt-*")), key=lambda n: int(n[5:]))
    assert ", ".join(on_disk) == kept
    # The hooks' log lines show: the demo configures logging.
    assert "re-creating the session after UnavailableError('worker 1 lost (simulated)')" in stderr
    assert "hookrun: loss = " in stderr and "global_step/sec" in stderr and "step 30/30" in stderr
    assert "Traceback" not in stderr
    assert not re.search(r"\b_[A-Za-z]\w*", stdout), "a private name is printed"


def test_demo_with_zero_steps_claims_no_recovery(tmp_path: Path) -> None:
    done = run_cli("demo", "--steps", "0", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "(1 session created, no recovery)" in done.stdout
    assert "one recovery" not in done.stdout


def test_a_second_run_into_the_same_out_is_refused_and_leaves_the_first_run_whole(tmp_path: Path) -> None:
    """--out DIR again: a one-line error naming DIR; the first run's files are untouched."""
    out = tmp_path / "out"
    assert run_cli("demo", "--steps", "12", "--out", str(out)).returncode == 0
    before = {path: path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}
    again = run_cli("demo", "--steps", "12", "--out", str(out))
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.splitlines() == [
        f"hookrun demo: error: --out {out} is not empty: the demo writes only into a new or empty "
        "directory (so an earlier run's outputs are never overwritten); give another one, or leave "
        "out --out for a new temporary one (see: hookrun demo --help)"
    ]
    assert {path: path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()} == before


def test_an_existing_empty_out_is_used(tmp_path: Path) -> None:
    """An empty directory given as --out is where the outputs go."""
    done = run_cli("demo", "--steps", "2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "checkpoints" / "ckpt-2").is_file()


def test_demo_without_out_uses_a_new_directory_and_names_it() -> None:
    done = run_cli("demo", "--steps", "1")
    assert done.returncode == 0, done.stderr
    match = re.search(r"outputs in (\S+)", done.stdout)
    assert match is not None and "hookrun-demo-" in match.group(1)
    where = Path(match.group(1))
    assert (where / "tensorboard").is_dir()
    for path in sorted(where.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    where.rmdir()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "-3"], "hookrun demo: error: argument --steps: expected 0 to 100,000 batches, got -3"),
        (["--steps", "ten"], "hookrun demo: error: argument --steps: expected a whole number of batches, got 'ten'"),
        (["--backend", "uv"], "hookrun demo: error: argument --backend: invalid choice: 'uv'"),
        (["--out", "{file}"], "hookrun demo: error: --out {file} exists and is not a directory"),
        (["--bogus"], "hookrun: error: unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_are_a_one_line_error(args: list[str], message: str, tmp_path: Path) -> None:
    file = tmp_path / "a-file"
    file.write_text("")
    done = run_cli("demo", *[arg.format(file=file) for arg in args])
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message.format(file=file)), done.stderr
    assert lines[0].endswith("--help)")


def test_a_missing_trio_is_named_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trio" else real(name, *a))
    with pytest.raises(SystemExit) as exited:
        cli.main(["demo", "--backend", "trio"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("hookrun demo: error: --backend trio needs trio, which is not installed: pip install 'hookrun[trio]'")
    assert len(err.splitlines()) == 1


def test_on_a_terminal_lines_go_through_the_progress_bar_writer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with cli._console() as say:
        assert say is not print
        say("worker 1 ready")
    assert capsys.readouterr().out == "worker 1 ready\n"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    with cli._console() as say:
        assert say is print


def test_the_hookrun_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("hookrun")
    assert script.exists(), "pip install . should install the 'hookrun' command"
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == f"hookrun {hookrun.__version__}"
    helped = subprocess.run([str(script), "demo", "--help"], capture_output=True, text=True, timeout=60, check=True)
    assert "--backend {asyncio,trio}" in helped.stdout and "--steps N" in helped.stdout and "--out DIR" in helped.stdout
    assert "a new or empty directory" in " ".join(helped.stdout.split())


def _normalized(line: str, out: str) -> str:
    """A line of demo output without what changes from run to run: the output folder and
    the measured figures (the model's figures are fixed by the seed, but normalised too)."""
    line = line.replace(out, "OUT")
    line = re.sub(r"(?:/[\w.-]+)*/hookrun-demo-\w+", "OUT", line)
    return re.sub(r"\d+\.\d+", "F", line)


def test_the_demo_output_quoted_in_getting_started_is_the_real_one(tmp_path: Path) -> None:
    """Every line the guide quotes (``...`` stands for lines that vary) is printed, in that
    order, by `hookrun demo --backend trio` on the default install (no tensorboardX)."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "getting-started.md").read_text()
    match = re.search(r"```text\n(hookrun \S+ demo:.*?)```", guide, re.DOTALL)
    assert match is not None, "the demo's output is no longer quoted in getting-started.md"
    quoted = match.group(1).splitlines()
    code = (
        "import sys\n"
        "sys.modules['tensorboardX'] = None  # the default install has no tensorboardX\n"
        "from hookrun.__main__ import main\n"
        f"sys.exit(main(['demo', '--backend', 'trio', '--out', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-u", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout
    real = [_normalized(line, str(tmp_path)) for line in done.stdout.splitlines()]
    at = 0
    for block in "\n".join(quoted).split("\n...\n"):
        lines = [_normalized(line, str(tmp_path)) for line in block.splitlines()]
        found = next((i for i in range(at, len(real)) if real[i : i + len(lines)] == lines), None)
        assert found is not None, f"not printed as quoted (after line {at}):\n" + "\n".join(lines)
        at = found + len(lines)
