"""Every example runs, on both backends, and does what its docstring says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from examples import (
    evaluation_pass,
    flaky_recovery,
    minimal_hook,
    pipeline,
    quickstart,
    resumable_pipeline,
)

import hookrun

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


async def test_evaluation_pass_leaves_the_training_session_open(capsys: pytest.CaptureFixture[str]) -> None:
    """Every second training step an evaluation pass runs over the borrowed session; training goes on to step 6."""
    assert await evaluation_pass.main() == [(2, 0.61), (4, 0.71), (6, 0.81)]
    assert capsys.readouterr().out.splitlines()[-1] == "step 6: accuracy 0.810"


async def test_flaky_recovery_recreates_sessions() -> None:
    """Two lost workers: three sessions, every step answered, the step counter intact."""
    answers, created, step = await flaky_recovery.main(steps=8)
    assert len(answers) == 8 and created == 3 and step == 8


@pytest.mark.parametrize("in_flight", [1, 4])
async def test_resumable_pipeline_writes_every_output_once(tmp_path: Path, in_flight: int) -> None:
    """Run to the end, then again: the second run resumes at the end and changes nothing."""
    outputs = await resumable_pipeline.main(tmp_path, items=12, in_flight=in_flight)
    expected = {f"item-{i:05d}": f"item-{i:05d}".upper()[::-1] for i in range(12)}
    assert outputs == expected
    assert await resumable_pipeline.main(tmp_path, items=12, in_flight=in_flight) == expected
    latest = hookrun.latest_checkpoint(tmp_path / "checkpoints")
    assert latest is not None and latest.endswith("ckpt-12")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_resumable_pipeline_killed_and_restarted(tmp_path: Path, anyio_backend: str) -> None:
    """Killed with SIGKILL mid-run with four items in flight and restarted, the pipeline ends
    with every item's output exactly once; the checkpoint it resumes from never runs ahead
    of the outputs written (its step counts items whose outputs are all there)."""
    command = [
        sys.executable, "-m", "examples.resumable_pipeline", str(tmp_path),
        "--items", "40", "--delay", "0.01", "--backend", anyio_backend,
    ]
    root = Path(__file__).resolve().parent.parent
    first = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None
    assert first.stdout.readline().strip() == "resumed at offset 0"
    for i in range(10):
        assert first.stdout.readline().strip() == f"processed item-{i:05d}"  # in feed order
    first.send_signal(signal.SIGKILL)
    first.wait(60)
    first.stdout.close()
    outputs = tmp_path / "outputs"
    saved = hookrun.Checkpointer(tmp_path / "checkpoints").all()
    assert saved, "no checkpoint survived the kill"
    written = {name for name in os.listdir(outputs) if not name.startswith(".")}
    assert {f"item-{i:05d}" for i in range(saved[-1].step)} <= written
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120, check=True)
    resumed = int(done.stdout.splitlines()[0].removeprefix("resumed at offset "))
    # Step 10's checkpoint may still have been in the background write; step 9's was durable.
    assert 9 <= resumed < 40
    assert resumed == saved[-1].step
    assert done.stdout.splitlines()[1] == f"processed item-{resumed:05d}"
    assert done.stdout.splitlines()[-1] == "finished: 40 outputs"
    names = sorted(name for name in os.listdir(outputs) if not name.startswith("."))
    assert names == [f"item-{i:05d}" for i in range(40)]
    for name in names:
        assert (outputs / name).read_text() == name.upper()[::-1]


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: Examples that take arguments: run with the arguments given (``{tmp}``: a fresh folder).
ARGUMENTS = {
    "hooks_pipeline": ["{tmp}/out"],
    "metrics_file": ["{tmp}/run", "--steps", "6"],
    "resumable_pipeline": ["{tmp}/run", "--items", "5"],
}
#: Examples that start a Ray or Dask cluster: as scripts, only their ``--help`` is run.
ENGINES = {"dask_pipeline", "dask_steps", "ray_steps", "ray_workers"}


@pytest.mark.parametrize(
    "name",
    [  # the engine examples import Ray or Dask: with the engine suites' extra only
        pytest.param(name, marks=pytest.mark.engine) if name in ENGINES else name
        for name in sorted(path.stem for path in EXAMPLES.glob("*.py") if not path.stem.startswith("_"))
    ],
)
def test_every_example_runs_as_a_script(name: str, tmp_path: Path) -> None:
    """`python examples/NAME.py` works from any folder, as `python -m examples.NAME` does."""
    arguments = ["--help"] if name in ENGINES else [arg.format(tmp=tmp_path) for arg in ARGUMENTS.get(name, [])]
    src = str(Path(hookrun.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *arguments],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).strip(), f"{name} printed nothing"
    if name in ENGINES:
        assert done.stdout.startswith(f"usage: {name}.py")
