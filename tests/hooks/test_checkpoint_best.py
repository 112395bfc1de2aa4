"""CheckpointSaverHook with monitor and keep_best: a checkpoint carries the metric fetched at
its own step only, so the save at ``end`` never displaces the checkpoint that was evaluated."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from hookrun import MonitoredSession, StepSession
from hookrun.hooks import CheckpointSaverHook

pytestmark = pytest.mark.anyio


async def train(hook: CheckpointSaverHook, steps: int, losses: Mapping[int, float | None]) -> None:
    """Run ``steps`` steps; the run reaching global step ``n`` fetches ``losses.get(n)``."""
    calls = 0

    async def create() -> StepSession:
        async def step(feed_dict: Mapping[Any, Any]) -> dict[str, float | None]:
            nonlocal calls
            calls += 1
            return {"loss": losses.get(calls)}

        return StepSession(step)

    with anyio.fail_after(20):
        async with MonitoredSession(create, [hook]) as session:
            for _ in range(steps):
                await session.run()


async def test_the_save_at_end_does_not_take_an_earlier_metric(tmp_path: Path) -> None:
    """Evaluated at steps 10/20/30, a run ending at 35 keeps ckpt-30 as the best: ckpt-35
    has no metric (it used to take 30's, win the tie and have ckpt-30 deleted)."""
    hook = CheckpointSaverHook(tmp_path, save_steps=10, monitor="loss", keep_best=1, max_to_keep=1)
    await train(hook, 35, {10: 3.0, 20: 2.0, 30: 1.0})
    assert [(info.step, info.metric) for info in hook.checkpointer.all()] == [(30, 1.0), (35, None)]
    best = hook.checkpointer.best()
    assert best is not None and best.step == 30 and best.metric == 1.0


async def test_a_periodic_save_between_evaluations_has_no_metric(tmp_path: Path) -> None:
    """A save at a step whose run fetched no value carries no metric, even right after one."""
    hook = CheckpointSaverHook(tmp_path, save_steps=5, monitor="loss", max_to_keep=None)
    await train(hook, 20, {4: 9.0, 10: 2.0, 19: 1.0})
    metrics = {info.step: info.metric for info in hook.checkpointer.all()}
    assert metrics == {0: None, 5: None, 10: 2.0, 15: None, 20: None}


async def test_the_save_at_end_keeps_a_metric_fetched_at_its_step(tmp_path: Path) -> None:
    """A metric fetched by the last run is the metric of the checkpoint saved at end."""
    hook = CheckpointSaverHook(tmp_path, save_steps=10, monitor="loss", keep_best=1, max_to_keep=1)
    await train(hook, 12, {10: 5.0, 12: 4.0})
    assert [(info.step, info.metric) for info in hook.checkpointer.all()] == [(12, 4.0)]
