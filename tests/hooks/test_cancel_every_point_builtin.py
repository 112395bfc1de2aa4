"""The testing guide's strongest check, over every built-in hook: cancel the whole life
after N schedule points, for N = 0, 1, 2, ... until it completes; ``drive`` checks that
nothing was left running and that every session was closed, and nothing but the
cancellation may escape."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hookrun import SessionRunHook
from hookrun.hooks import (
    CheckpointSaverHook,
    EarlyStoppingHook,
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    MetricsFileHook,
    NanTensorHook,
    ProfilerHook,
    ProgressBarHook,
    StepCounterHook,
    StopAtStepHook,
    StopOnPredicateHook,
    SummarySaverHook,
    ThresholdStoppingHook,
    on_after_run,
)
from hookrun.testing import drive

from ._support import ListWriter

pytestmark = pytest.mark.anyio

#: Enough steps for every hook to do its work at least once, with a recovery in between.
STEPS = 3
#: A bound on the schedule points tried per hook: every life completes well before.
MAX_POINTS = 1500
#: A hook waiting on a worker thread lets the canceller spin meanwhile, so its life
#: takes as many schedule points as the thread takes time (thousands on a loaded
#: machine): every point up to ``DENSE``, then every ``STRIDE``-th, up to ``FILE_IO_POINTS``.
DENSE, STRIDE, FILE_IO_POINTS = 400, 37, 60_000


def _after_run(run_context: Any, run_values: Any) -> None:
    """A function hook's body."""


def _opentelemetry(tmp: Path) -> SessionRunHook:
    pytest.importorskip("opentelemetry.trace")
    from hookrun.hooks import OpenTelemetryHook

    return OpenTelemetryHook()


def _prometheus(tmp: Path) -> SessionRunHook:
    pytest.importorskip("prometheus_client")
    from hookrun.hooks import PrometheusHook

    return PrometheusHook()


BUILT_IN: dict[str, Callable[[Path], SessionRunHook]] = {
    # Saves at creation (step 0), after step 2's run and at end (step 3): every kind of
    # save, each a few hundred schedule points of file I/O, so no recovery on top.
    "CheckpointSaverHook": lambda tmp: CheckpointSaverHook(tmp / "ckpt", save_steps=2),
    "EarlyStoppingHook": lambda tmp: EarlyStoppingHook("loss", patience_steps=10, run_every_steps=1),
    "FeedFnHook": lambda tmp: FeedFnHook(lambda: {"lr": 0.1}),
    "FinalOpsHook": lambda tmp: FinalOpsHook("loss"),
    "FunctionHook": lambda tmp: on_after_run(_after_run),
    "GlobalStepWaiterHook": lambda tmp: GlobalStepWaiterHook(0),
    "LoggingTensorHook": lambda tmp: LoggingTensorHook(["loss"], every_n_iter=1, at_end=True),
    "MetricsFileHook": lambda tmp: MetricsFileHook(tmp / "metrics.csv", ["loss"], flush_secs=0),
    "NanTensorHook": lambda tmp: NanTensorHook("loss"),
    "OpenTelemetryHook": _opentelemetry,
    "ProfilerHook": lambda tmp: ProfilerHook(save_steps=1, output_dir=tmp / "prof"),
    "PrometheusHook": _prometheus,
    "ProgressBarHook": lambda tmp: ProgressBarHook(STEPS, metrics=["loss"], file=io.StringIO(), mode="log"),
    "StepCounterHook": lambda tmp: StepCounterHook(every_n_steps=1, summary_writer=ListWriter()),
    "StopAtStepHook": lambda tmp: StopAtStepHook(num_steps=STEPS + 10),
    "StopOnPredicateHook": lambda tmp: StopOnPredicateHook(lambda: False, run_every_steps=1),
    "SummarySaverHook": lambda tmp: SummarySaverHook(save_steps=1, summary_writer=ListWriter(), scalars=["loss"]),
    "ThresholdStoppingHook": lambda tmp: ThresholdStoppingHook("loss", 1e9, run_every_steps=1),
}

#: Hooks whose every save is file I/O in worker threads: run without the recovery.
FILE_IO = {"CheckpointSaverHook"}


@pytest.mark.parametrize("name", sorted(BUILT_IN))
async def test_cancelled_at_every_schedule_point(name: str, tmp_path: Path) -> None:
    """For every N, cancelling the life after N schedule points only cancels it."""
    sweep = range(MAX_POINTS) if name not in FILE_IO else [*range(DENSE), *range(DENSE, FILE_IO_POINTS, STRIDE)]
    for points in sweep:
        hook = BUILT_IN[name](tmp_path / str(points))
        errors = None if name in FILE_IO else {1: "aborted"}
        record = await drive(hook, steps=STEPS, values={"loss": 1.0}, errors=errors, cancel_after=points)
        if not record.cancelled:
            break
    else:
        pytest.fail(f"{name}: the life was still cancelled after {sweep[-1]} schedule points")
    assert points > 5  # the life has that many points at least: the sweep went through them
