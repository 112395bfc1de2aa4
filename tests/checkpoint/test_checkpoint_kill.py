"""Saving runs killed with SIGKILL at random points, many times: a valid latest checkpoint
always exists, each restart resumes exactly from it, and no output before it is lost.

8 kills per backend by default (the README's test command), 60 with
``HYPOTHESIS_PROFILE=deep`` (the deeper pass CI adds), 300 with ``HYPOTHESIS_PROFILE=long``;
``HOOKRUN_KILLS=N`` sets the number directly.
"""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hookrun import MsgpackCodec, latest_checkpoint
from hookrun._checkpoint._checkpointer import read_checkpoint

from .checkpoint_worker import output

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

KILLS = int(os.environ.get("HOOKRUN_KILLS", {"long": 300, "deep": 60}.get(os.environ.get("HYPOTHESIS_PROFILE", ""), 8)))
#: The killed runs never write coverage data: they are not measured (a measured start costs
#: more than a kill's whole run).
WORKER_ENV = {key: value for key, value in os.environ.items() if not key.startswith("COVERAGE_")}
ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One run of tests/checkpoint/checkpoint_worker.py, with its output read line by line."""

    def __init__(self, directory: Path, backend: str, last_step: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.checkpoint.checkpoint_worker", str(directory), backend, str(last_step)],
            cwd=ROOT, env=WORKER_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.buffer = b""

    def line(self, timeout: float = 60.0) -> str:
        """The next line the run printed (bounded by ``timeout``)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    self.kill()
                    raise AssertionError(f"the worker printed no line in {timeout}s")
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    self.proc.wait(timeout)
                    raise AssertionError(f"the worker exited early: {self.stderr()}")
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(60)
        self.close()

    def stderr(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def close(self) -> None:
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def check_checkpoint(directory: Path) -> int:
    """The latest checkpoint is valid and consistent, and every output before it exists; its step."""
    path = latest_checkpoint(directory / "ckpt")  # a corrupt file would warn, which fails the test
    assert path is not None, "no valid checkpoint after a kill"
    restored = read_checkpoint(path, MsgpackCodec())
    step = restored.step
    state: dict[str, Any] = restored.state["session"]
    assert restored.state["global_step"] == step == state["offset"]
    assert state["total"] == sum(range(step))
    assert (state["weights"] == float(step)).all()
    for item in range(step):
        assert (directory / "out" / f"item-{item}").read_bytes() == output(item), f"output of item {item} lost"
    return step


def test_sigkill_at_random_points_never_loses_a_checkpoint(tmp_path: Path, anyio_backend: str) -> None:
    """Killed KILLS times at random points, every restart resumes from the latest valid checkpoint."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    far = 10**9
    worker = Worker(tmp_path, anyio_backend, far)
    assert worker.line().startswith("resumed 0")
    assert worker.line() == "ready"
    latest = 0
    for kill in range(KILLS):
        time.sleep(rng.uniform(0.0, 0.25))  # a random point in the run: what is being tested
        worker.proc.send_signal(signal.SIGKILL)
        worker.kill()
        step = check_checkpoint(tmp_path)
        assert step >= latest, f"kill {kill} (seed {seed}): the latest checkpoint went back from {latest} to {step}"
        latest = step
        worker = Worker(tmp_path, anyio_backend, far)
        assert worker.line() == f"resumed {latest}", f"kill {kill} (seed {seed}): did not resume from {latest}"
    worker.kill()
    latest = check_checkpoint(tmp_path)
    final = Worker(tmp_path, anyio_backend, latest + 10)
    assert final.line() == f"resumed {latest}"
    assert final.line() == "ready"
    assert final.line() == f"done {latest + 10}"
    assert final.proc.wait(60) == 0, final.stderr()
    final.close()
    assert check_checkpoint(tmp_path) == latest + 10
    outputs = sorted(name for name in os.listdir(tmp_path / "out") if not name.endswith(".tmp"))
    assert outputs == sorted(f"item-{item}" for item in range(latest + 10)), "an item is missing or extra"
