"""CheckpointSaverHook(restore_best=True): Keras' restore_best_weights on the checkpoints'
best-k. At end, after the last save, the session's state comes back from the best checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from examples import keras_early_stopping

from hookrun import Checkpointer, CorruptCheckpointError, MonitoredSession, StepSession
from hookrun.hooks import CheckpointSaverHook, EarlyStoppingHook, on_after_run

pytestmark = pytest.mark.anyio

#: One loss per step: the best (0.5) at step 3, no improvement after it.
LOSSES = [0.9, 0.7, 0.5, 0.6, 0.8, 0.9, 0.95, 0.99]


class Model:
    """A checkpointable session: its weight is the number of steps run, its loss scripted."""

    def __init__(self, losses: Sequence[float | None]) -> None:
        self.weight = 0
        self.losses = losses

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.weight += 1
        produced = {"loss": self.losses[self.weight - 1]}
        return [produced[key] for key in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"weight": self.weight}

    async def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weight = state["weight"]


def saver(directory: Path, **kwargs: Any) -> CheckpointSaverHook:
    """A saver keeping the newest and the best checkpoint of every step, handing the best back."""
    return CheckpointSaverHook(
        directory, save_steps=1, monitor="loss", keep_best=1, max_to_keep=1, restore_best=True, **kwargs
    )


async def train(model: Model, hooks: Sequence[object], steps: int) -> None:
    """Run until the hooks stop the session or ``steps`` steps are done."""
    with anyio.fail_after(20):
        async with MonitoredSession(lambda: model, list(hooks)) as session:
            for _ in range(steps):
                if session.should_stop():
                    break
                await session.run()


async def test_early_stopping_hands_back_the_best_state(tmp_path: Path) -> None:
    """Stopped 3 steps after the best (step 3), the session ends with step 3's weight."""
    model = Model(LOSSES)
    early_stopping = EarlyStoppingHook("loss", patience_steps=3)
    hook = saver(tmp_path)
    await train(model, [early_stopping, hook], steps=len(LOSSES))
    assert early_stopping.stopped_at_step == 6 and early_stopping.best_step == 3
    assert model.weight == 3 and hook.restored_step == 3


async def test_the_last_checkpoint_keeps_the_last_state(tmp_path: Path) -> None:
    """The save at the end is of the last step, before the best state is handed back."""
    model = Model(LOSSES)
    hook = saver(tmp_path)
    await train(model, [EarlyStoppingHook("loss", patience_steps=3), hook], steps=len(LOSSES))
    latest = await hook.checkpointer.restore()
    assert latest is not None and latest.step == 6 and latest.state["session"] == {"weight": 6}
    assert [info.step for info in hook.checkpointer.all()] == [3, 6]


async def test_listeners_end_sees_the_restored_state(tmp_path: Path) -> None:
    """A listener's end (exporting the model, say) runs after the best state is back."""
    model = Model(LOSSES)
    seen: list[int] = []

    class Export:
        def end(self, session: Model, global_step_value: int) -> None:
            seen.append(session.weight)

    await train(model, [saver(tmp_path, listeners=[Export()])], steps=5)
    assert seen == [3]


async def test_without_a_metric_the_session_keeps_its_last_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No checkpoint has a metric (no evaluation fetched): a warning, and nothing restored."""
    model = Model([None] * 4)
    hook = saver(tmp_path)
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await train(model, [hook], steps=4)
    assert model.weight == 4 and hook.restored_step is None
    assert "no checkpoint has a value of 'loss'; the session keeps its last state" in caplog.text


async def test_a_session_without_state_is_refused_when_created(tmp_path: Path) -> None:
    """restore_best needs a session that can load a state: a TypeError at session creation."""

    async def step(feed_dict: Mapping[Any, Any]) -> dict[str, float]:
        return {"loss": 1.0}

    expected = "restore_best loads the best state into the session"
    with anyio.fail_after(20), pytest.raises(TypeError, match=expected):
        async with MonitoredSession(lambda: StepSession(step), [saver(tmp_path)]) as session:
            await session.run()


@pytest.mark.parametrize(
    "kwargs",
    [{"restore_best": True}, {"monitor": "loss", "restore_best": True}],
)
def test_restore_best_needs_a_monitor_and_a_kept_best(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    """Without monitor= and keep_best >= 1 no best checkpoint is sure to be kept: a ValueError."""
    expected = "restore_best hands back the best checkpoint, which needs monitor= and keep_best="
    with pytest.raises(ValueError, match=expected):
        CheckpointSaverHook(tmp_path, save_steps=1, **kwargs)


def test_restore_best_must_be_a_bool(tmp_path: Path) -> None:
    """A string such as "no" would be true: restore_best takes True or False only."""
    expected = "CheckpointSaverHook: restore_best must be True or False, got 'no'"
    with pytest.raises(TypeError, match=expected):
        CheckpointSaverHook(
            tmp_path, save_steps=1, monitor="loss", keep_best=1, restore_best="no"  # type: ignore[arg-type]
        )


async def test_the_keras_example_stops_at_kerass_evaluation_and_hands_back_the_best(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The docs' example: patience 2, baseline 0.5, stop at the 4th evaluation, the 3rd's state back."""
    assert await keras_early_stopping.main(str(tmp_path / "checkpoints")) == (16, 12)
    assert capsys.readouterr().out == (
        "stopped after step 16, best val_loss 0.7 at step 12; the model is back at step 12\n"
    )


async def test_a_corrupt_best_checkpoint_is_raised_at_end(tmp_path: Path) -> None:
    """A best checkpoint damaged on disk is an error at exit, not another state handed back."""

    @on_after_run(when=lambda step: step == 5)
    def damage(run_context: Any, run_values: Any) -> None:
        path = tmp_path / "ckpt-3"
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    model = Model(LOSSES)
    with pytest.raises(CorruptCheckpointError, match="ckpt-3"):
        await train(model, [saver(tmp_path), damage], steps=6)
    assert model.weight == 6


async def test_a_checkpointer_keeping_the_best_is_enough(tmp_path: Path) -> None:
    """With a Checkpointer of its own (keep_best set there), the best state comes back too."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=1, keep_best=1)
    hook = CheckpointSaverHook(save_steps=1, checkpointer=checkpointer, monitor="loss", restore_best=True)
    model = Model(LOSSES)
    await train(model, [hook], steps=5)
    assert model.weight == 3 and hook.restored_step == 3
