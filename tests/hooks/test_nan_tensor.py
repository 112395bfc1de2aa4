"""NanTensorHook (trace T39: raise, or warn and request stop)."""

from __future__ import annotations

import logging
import math

import pytest

from hookrun import HookrunError
from hookrun.hooks import NanLossDuringTrainingError, NanTensorHook

from ._support import context, drive, values


def test_error_is_a_runtime_error_with_tf_message() -> None:
    """NanLossDuringTrainingError is a RuntimeError (and HookrunError) saying TF's words."""
    error = NanLossDuringTrainingError()
    assert isinstance(error, RuntimeError) and isinstance(error, HookrunError)
    assert str(error) == "NaN loss during training."


def test_loss_key_must_be_hashable() -> None:
    """An unhashable or None loss key is rejected at construction."""
    with pytest.raises(TypeError, match="loss_key must be hashable"):
        NanTensorHook(["loss"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="loss_key must be a fetch key"):
        NanTensorHook(None)


def test_fetches_the_loss() -> None:
    """before_run asks for the loss key."""
    assert NanTensorHook("loss").before_run(context()).fetches == "loss"


@pytest.mark.anyio
async def test_nan_loss_raises(session_kind: str, caplog: pytest.LogCaptureFixture) -> None:
    """A NaN loss raises NanLossDuringTrainingError out of run() and logs an error."""
    losses = [1.0, math.nan]
    with (
        caplog.at_level(logging.ERROR, logger="hookrun"),
        pytest.raises(NanLossDuringTrainingError),
    ):
        await drive([NanTensorHook("loss")], lambda i: {"loss": losses[i]}, kind=session_kind)
    assert "Model diverged with loss = NaN." in caplog.text


@pytest.mark.anyio
async def test_nan_loss_stops_without_failing(
    session_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With fail_on_nan_loss=False a NaN logs a warning and stops the session after that step."""
    losses = [1.0, 2.0, math.nan, 3.0]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        results = await drive(
            [NanTensorHook("loss", fail_on_nan_loss=False)],
            lambda i: {"loss": losses[i]},
            kind=session_kind,
        )
    assert len(results) == 3
    assert "Model diverged with loss = NaN." in caplog.text


@pytest.mark.parametrize(
    ("loss", "is_nan"),
    [
        (1.0, False),
        (math.nan, True),
        (3, False),
        ([1.0, [2.0, math.nan]], True),
        ((1.0, 2.0), False),
        ("x", False),
    ],
)
def test_nan_detection_in_numbers_and_sequences(loss: object, is_nan: bool) -> None:
    """NaN is found in plain numbers and nested sequences; other values pass."""
    hook = NanTensorHook("loss", fail_on_nan_loss=False)
    ctx = context()
    hook.after_run(ctx, values(1, loss))
    assert ctx.stop_requested is is_nan


def test_numpy_values_are_checked() -> None:
    """numpy scalars and arrays (via float() or iteration) are checked too."""
    np = pytest.importorskip("numpy")
    hook = NanTensorHook("loss", fail_on_nan_loss=False)
    for loss, expected in (
        (np.float32("nan"), True),
        (np.array([1.0, np.nan]), True),
        (np.array(2.0), False),
    ):
        ctx = context()
        hook.after_run(ctx, values(1, loss))
        assert ctx.stop_requested is expected
