"""The examples of docs/testing.md: each code block there after its imports is copied from
this file (``test_every_docs_example_is_a_test_here`` checks it), so every example is
type-checked; the page's blocks, read top to bottom, are also run as the module they make."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from hookrun import (
    AbortedError,
    Coordinator,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from hookrun.hooks import NanLossDuringTrainingError, NanTensorHook
from hookrun.testing import Drive, FaultyHook, MockClock, drive

pytestmark = pytest.mark.anyio

DOCS = Path(__file__).parents[2] / "docs" / "testing.md"


# --8<-- [start:hook]
class LossLogger(SessionRunHook):
    """Fetches the loss every N steps or every N seconds and keeps what it saw."""

    def __init__(
        self,
        *,
        every_steps: int | None = None,
        every_secs: float | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.timer = SecondOrStepTimer(every_secs, every_steps, clock=clock)
        self.seen: list[float] = []

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        if self.timer.should_trigger_for_step(run_context.global_step):
            return SessionRunArgs("loss")
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_values.results is not None:
            self.timer.update_last_triggered_step(run_context.global_step)
            self.seen.append(run_values.results)
# --8<-- [end:hook]


# --8<-- [start:every-100-steps]
async def test_fires_every_100_steps(drive: Drive) -> None:
    hook = LossLogger(every_steps=100)
    record = await drive(hook, steps=350, values={"loss": 0.5})
    assert record.requested_at(hook) == [0, 100, 200, 300]
# --8<-- [end:every-100-steps]


# --8<-- [start:every-60-seconds]
async def test_fires_every_60_seconds(mock_clock: MockClock, drive: Drive) -> None:
    hook = LossLogger(every_secs=60, clock=mock_clock)
    record = await drive(hook, steps=10, values={"loss": 0.5}, tick=25)  # t = 0, 25, 50, ...
    assert record.requested_at(hook) == [0, 3, 6, 9]  # t = 0, 75, 150, 225
# --8<-- [end:every-60-seconds]


# --8<-- [start:recovery]
async def test_state_survives_a_recovery(drive: Drive) -> None:
    hook = LossLogger(every_steps=1)
    losses = [{"loss": 1.0}, {"loss": 2.0}, {"loss": 3.0}]
    record = await drive(hook, steps=losses, errors={1: AbortedError("preempted")})
    assert record.sessions == 2  # step 1 failed once, on a new session it ran again
    assert hook.seen == [1.0, 2.0, 3.0]
# --8<-- [end:recovery]


# --8<-- [start:nan]
async def test_requests_stop_on_nan(drive: Drive) -> None:
    hook = NanTensorHook("loss", fail_on_nan_loss=False)
    losses = [{"loss": 1.0}, {"loss": math.nan}, {"loss": 2.0}]
    record = await drive(hook, steps=losses)
    assert record.stopped_at == 1 and record.steps == 2
# --8<-- [end:nan]


# --8<-- [start:nan-raises]
async def test_raises_on_nan(drive: Drive) -> None:
    record = await drive(
        NanTensorHook("loss"), steps=[{"loss": math.nan}], raises=NanLossDuringTrainingError
    )
    assert record.raised() == [record.error]
# --8<-- [end:nan-raises]


# --8<-- [start:record]
async def test_what_the_record_holds(drive: Drive) -> None:
    hook = LossLogger(every_steps=2)
    record = await drive(hook, steps=[{"loss": 0.9}, {"loss": 0.8}, {"loss": 0.7}])
    assert record.phases(hook) == ["before_run", "after_run"] * 3
    assert record.requests(hook) == [SessionRunArgs("loss"), None, SessionRunArgs("loss")]
    assert record.received(hook) == [0.9, None, 0.7]
    assert [run.fetches for run in record.runs] == [["loss"], [], ["loss"]]
# --8<-- [end:record]


# --8<-- [start:faults]
async def test_a_failing_sibling_and_a_flaky_creator(drive: Drive) -> None:
    hook = LossLogger(every_steps=1)
    sibling = FaultyHook("after_run", "aborted", at=1)  # its second after_run raises
    losses = {"loss": lambda step, feed: float(step)}
    record = await drive([hook, sibling], steps=3, values=losses, creation_errors=["unavailable"] * 2)
    assert record.creation_attempts == 4 and record.sessions == 2
    assert [type(error) for error in record.raised(sibling)] == [AbortedError]
    assert hook.seen == [0.0, 1.0, 2.0]
# --8<-- [end:faults]


# --8<-- [start:cancellation]
async def test_cancelled_at_every_schedule_point(drive: Drive) -> None:
    for points in range(1000):
        record = await drive(LossLogger(every_steps=1), steps=3, values={"loss": 1.0},
                             errors={1: "aborted"}, cancel_after=points)
        if not record.cancelled:  # drive() checked: every session closed, no call running
            break
    assert points > 5  # the life has that many points at least: the sweep went through them
# --8<-- [end:cancellation]


# --8<-- [start:loop]
class Heartbeat(SessionRunHook):
    """Beats every 60 seconds in the background, from session creation until stop."""

    def __init__(self, clock: Any = None) -> None:
        self.clock, self.beats = clock, 0

    def after_create_session(self, session: object, coord: Coordinator) -> None:
        coord.loop(60, self.beat, clock=self.clock)

    def beat(self) -> None:
        self.beats += 1


async def test_heartbeat_follows_the_clock() -> None:
    clock = MockClock()
    hook = Heartbeat(clock)
    await drive(hook, steps=5, clock=clock, tick=30)  # the steps start at t = 0, 30, ..., 120
    assert hook.beats == 3  # t = 0, 60, 120
# --8<-- [end:loop]


# --8<-- [start:in-flight]
class EveryTenth(SessionRunHook):
    """Fetches the loss on every tenth step; what a step decided travels in its step_state."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        due = run_context.global_step % 10 == 0
        run_context.step_state[self] = due
        return SessionRunArgs("loss") if due else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_context.step_state[self]:
            self.seen.append((run_context.global_step, run_values.results))


LOSSES = [{"loss": float(step)} for step in range(30)]
SLOW_DUE_STEPS = {0: 5, 10: 5, 20: 5}  # the runs of the due steps end after the next ones


async def test_right_with_steps_in_flight(drive: Drive) -> None:
    hook = EveryTenth()
    record = await drive(hook, steps=LOSSES, max_in_flight=4, lags=SLOW_DUE_STEPS)
    calls = [(call.phase, call.step) for call in record.of(hook)]
    assert calls.index(("before_run", 1)) < calls.index(("after_run", 0))  # they overlapped
    assert hook.seen == [(0, 0.0), (10, 10.0), (20, 20.0)]


class EveryTenthOnSelf(EveryTenth):
    """The same, keeping the decision on the hook: wrong once steps overlap."""

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self.due = run_context.global_step % 10 == 0
        return SessionRunArgs("loss") if self.due else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self.due:  # by now, the decision of a later step
            self.seen.append((run_context.global_step, run_values.results))


async def test_state_on_the_hook_is_caught(drive: Drive) -> None:
    hook = EveryTenthOnSelf()
    await drive(hook, steps=LOSSES, max_in_flight=1)
    assert hook.seen == [(0, 0.0), (10, 10.0), (20, 20.0)]  # one step at a time: right
    hook = EveryTenthOnSelf()
    await drive(hook, steps=LOSSES, max_in_flight=4, lags=SLOW_DUE_STEPS)
    assert (0, 0.0) not in hook.seen  # after_run(0) read the decision of a later step
# --8<-- [end:in-flight]


def page_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", DOCS.read_text(), flags=re.DOTALL | re.MULTILINE)


def test_every_docs_example_is_a_test_here() -> None:
    """Every Python block of docs/testing.md after its imports is a snippet of this file, verbatim."""
    source = Path(__file__).read_text()
    snippets = dict(re.findall(r"# --8<-- \[start:(\S+)\]\n(.*?)# --8<-- \[end:\1\]", source, re.S))
    imports, *blocks = page_blocks("python")
    assert imports.startswith("import math\n") and "def " not in imports
    assert len(blocks) >= 4
    for block in blocks:
        assert block in snippets.values(), f"docs/testing.md has an example not in {__file__}:\n{block}"


def test_the_pages_blocks_run_as_one_test_module_on_both_backends(tmp_path: Path) -> None:
    """The page's configuration and Python blocks, as printed, make a project whose tests pass."""
    (config,) = page_blocks("toml")
    (tmp_path / "pyproject.toml").write_text(config)
    module = "\n\n".join(page_blocks("python"))
    (tmp_path / "test_loss_logger.py").write_text(module)
    tests = len(re.findall(r"^async def test_", module, flags=re.MULTILINE))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "test_loss_logger.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{2 * tests} passed" in done.stdout  # every test on asyncio and on trio
    assert tests >= 9


async def test_simulated_time_needs_no_sleeping() -> None:
    """A hundred simulated minutes pass without sleeping: only the mock clock moves."""
    clock = MockClock()
    with anyio.fail_after(5):
        record = await drive(LossLogger(every_secs=60, clock=clock), steps=100, clock=clock,
                             values={"loss": 1.0}, tick=60)
    assert len(record.requested_at()) == 100
    assert clock() == 6000
