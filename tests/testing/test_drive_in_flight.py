"""``drive(..., max_in_flight=N)``: the script run with steps in flight, runs that end out
of order (``lags``), each step answered from its own script step, and the hooks' views
of a step in flight's context; on both backends."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hookrun import RunOptions, SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from hookrun._hook_protocol import InFlightRunContext
from hookrun.testing import RecordingHook, drive

pytestmark = pytest.mark.anyio

LOSSES = [{"loss": float(step)} for step in range(12)]


class Fetches(SessionRunHook):
    """Fetches the loss every step and keeps what each step got, by step."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.got: list[tuple[int, Any]] = []
        self.contexts: list[SessionRunContext] = []

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        self.contexts.append(run_context)
        run_context.step_state[self] = run_context.global_step
        return SessionRunArgs("loss")

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        assert run_context.step_state[self] == run_context.global_step
        self.got.append((run_context.global_step, run_values.results))


async def test_before_run_of_later_steps_comes_before_a_steps_after_run() -> None:
    """With lags on step 0, steps 1..3 are admitted before after_run(0); after_run keeps step order."""
    hook = Fetches()
    record = await drive(hook, steps=LOSSES, max_in_flight=4, lags={0: 5})
    calls = [(call.phase, call.step) for call in record.of(hook)]
    assert calls[:4] == [("before_run", 0), ("before_run", 1), ("before_run", 2), ("before_run", 3)]
    assert [step for phase, step in calls if phase == "after_run"] == list(range(12))
    assert hook.got == [(step, float(step)) for step in range(12)]


async def test_runs_end_out_of_order_and_results_come_in_step_order() -> None:
    """The runs answer in another order than they started; record.results is in step order."""
    answered: list[int] = []

    def loss(step: int, feeds: object) -> float:
        answered.append(step)
        return float(step)

    record = await drive([], steps=6, values={"loss": loss}, fetches=["loss"], max_in_flight=3, lags=[4, 2, 0, 4, 2, 0])
    assert answered != sorted(answered) and sorted(answered) == list(range(6))
    assert record.results == [[float(step)] for step in range(6)]
    assert [run.index for run in record.runs] == list(range(6))  # started in step order


@pytest.mark.parametrize("n", [1, 4, 16])
async def test_a_step_rerun_after_its_lanes_recovery_gets_its_own_values(n: int) -> None:
    """Step 5 fails once with a recoverable error; its re-run is answered from script step 5."""
    hook = Fetches()
    record = await drive(hook, steps=LOSSES, errors={5: "unavailable"}, max_in_flight=n, lags={5: 3})
    assert hook.got == [(step, float(step)) for step in range(12)]
    assert [(run.index, run.outcome) for run in record.runs if run.index == 5] == [(5, "raised"), (5, "returned")]
    assert record.sessions == n + 1 and record.recoveries == 1 and record.closed == record.sessions


async def test_a_hook_sees_a_step_in_flights_context() -> None:
    """Each hook gets an InFlightRunContext whose ended turns True, sharing the step's step_state."""
    first, second = Fetches(), RecordingHook()
    await drive([first, second], steps=LOSSES, max_in_flight=4)
    assert all(isinstance(ctx, InFlightRunContext) for ctx in first.contexts)
    assert all(ctx.ended for ctx in first.contexts if isinstance(ctx, InFlightRunContext))
    seen = [call.args["run_context"] for call in second.calls if call.phase == "before_run"]
    assert [ctx.step_state[first] for ctx in seen] == list(range(12))  # the step's own dict


async def test_one_step_at_a_time_the_context_is_a_plain_one() -> None:
    """max_in_flight=1 (the default) drives one step at a time, as before."""
    hook = Fetches()
    await drive(hook, steps=LOSSES)
    assert not any(isinstance(ctx, InFlightRunContext) for ctx in hook.contexts)


async def test_an_end_of_input_and_an_error_with_steps_in_flight() -> None:
    """'oor' after the script stops cleanly; a non-recoverable error escapes as raises= expects
    (the steps in flight with the failing one are given up: only steps before it are done)."""
    hook = Fetches()
    record = await drive(hook, steps=LOSSES, errors={12: "oor"}, max_in_flight=4)
    assert len(hook.got) == 12 and record.error is None
    hook = Fetches()
    record = await drive(hook, steps=LOSSES, errors={6: ValueError("bad batch")}, max_in_flight=4, raises=ValueError)
    assert [step for step, _ in hook.got] == list(range(len(hook.got))) and len(hook.got) <= 6
    assert isinstance(record.error, ValueError)


async def test_cancelled_at_every_schedule_point_with_steps_in_flight() -> None:
    """Wherever the life is cancelled, every lane's session is closed once and no call runs."""
    for points in range(400):
        with anyio.fail_after(30):
            record = await drive(Fetches(), steps=LOSSES[:6], errors={2: "aborted"}, max_in_flight=3,
                                 lags=[2, 0, 1, 0, 0, 0], cancel_after=points)
        if not record.cancelled:  # drive() checked: every session closed, no call running
            break
    assert 10 < points < 399


async def test_a_hook_that_does_not_declare_overlapping_steps_is_refused() -> None:
    """The session refuses it when built, naming it."""

    class Plain(SessionRunHook):
        def before_run(self, run_context: SessionRunContext) -> None:
            return None

    with pytest.raises(TypeError, match=r"hooks\[0\] \(Plain\) does not declare overlapping_steps = True"):
        await drive(Plain(), steps=2, max_in_flight=2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_in_flight": 0}, ValueError, r"drive\(max_in_flight=\.\.\.\) must be an int >= 1, got 0"),
        ({"max_in_flight": True}, TypeError, r"drive\(max_in_flight=\.\.\.\) must be an int >= 1, got True"),
        ({"max_in_flight": "2"}, TypeError, r"drive\(max_in_flight=\.\.\.\) must be an int >= 1, got '2'"),
        ({"max_in_flight": 2, "options": RunOptions(timeout=1.0)}, ValueError, r"takes no options: drop options="),
        ({"lags": {5: 1}}, ValueError, r"drive\(lags=\.\.\.\) keys are script steps 0\.\.3, got 5"),
        ({"lags": [1, -1]}, ValueError, r"drive\(lags=\.\.\.\) counts are ints >= 0 .* got -1 for step 1"),
        ({"lags": "12"}, TypeError, r"drive\(lags=\.\.\.\) must be a list"),
    ],
)
async def test_bad_in_flight_arguments_are_named(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    """max_in_flight, options with it, and lags are checked before anything runs."""
    with pytest.raises(error, match=match):
        await drive(Fetches(), steps=3, **kwargs)


async def test_each_call_names_its_steps_lane_session() -> None:
    """With lanes, a call's session is the one its step ran on (the re-created one after a recovery)."""
    hook = Fetches()
    record = await drive(hook, steps=LOSSES, errors={5: "unavailable"}, max_in_flight=4)
    ran_on = {run.index: run.session for run in record.runs if run.outcome == "returned"}
    assert {call.step: call.session for call in record.of(hook, "after_run")} == ran_on
    assert ran_on[5] == 4  # step 5 ran again on its lane's new session
