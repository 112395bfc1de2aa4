"""NanTensorHook (trace T39: raise, or warn and request stop), driven with hookrun.testing."""

from __future__ import annotations

import logging
import math

import pytest

from hookrun import HookrunError, SessionRunArgs
from hookrun.hooks import NanLossDuringTrainingError, NanTensorHook
from hookrun.testing import Drive

pytestmark = pytest.mark.anyio


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


async def test_fetches_the_loss_every_step(drive: Drive) -> None:
    """before_run asks for the loss key at every step and receives the loss."""
    hook = NanTensorHook("loss")
    record = await drive(hook, steps=3, values={"loss": lambda step, feed: step / 2})
    assert record.requests(hook) == [SessionRunArgs("loss")] * 3
    assert record.received(hook) == [0.0, 0.5, 1.0]


async def test_nan_loss_raises(drive: Drive, caplog: pytest.LogCaptureFixture) -> None:
    """A NaN loss raises NanLossDuringTrainingError out of run() and logs an error."""
    hook = NanTensorHook("loss")
    with caplog.at_level(logging.ERROR, logger="hookrun"):
        record = await drive(
            hook, steps=[{"loss": 1.0}, {"loss": math.nan}, {"loss": 2.0}],
            raises=NanLossDuringTrainingError,
        )
    assert record.raised(hook) == [record.error] and record.steps == 2
    assert record.stop is None
    assert "Model diverged with loss = NaN." in caplog.text


async def test_nan_loss_stops_without_failing(drive: Drive, caplog: pytest.LogCaptureFixture) -> None:
    """With fail_on_nan_loss=False a NaN logs a warning and stops the session after that step."""
    losses = [{"loss": 1.0}, {"loss": 2.0}, {"loss": math.nan}, {"loss": 3.0}]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        record = await drive(NanTensorHook("loss", fail_on_nan_loss=False), steps=losses)
    assert record.stopped_at == 2 and record.steps == 3
    assert record.phases()[-1] == "after_run"  # NanTensorHook has no end; nothing ran after
    assert "Model diverged with loss = NaN." in caplog.text


async def test_nan_after_a_recovery_still_stops(drive: Drive) -> None:
    """A recovery in between does not change the reaction: the NaN step stops the session."""
    losses = [{"loss": 1.0}, {"loss": 2.0}, {"loss": math.nan}, {"loss": 3.0}]
    record = await drive(
        NanTensorHook("loss", fail_on_nan_loss=False), steps=losses, errors={1: "aborted"}
    )
    assert record.sessions == 2 and record.stopped_at == 2


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
async def test_nan_detection_in_numbers_and_sequences(drive: Drive, loss: object, is_nan: bool) -> None:
    """NaN is found in plain numbers and nested sequences; other values pass."""
    record = await drive(NanTensorHook("loss", fail_on_nan_loss=False), steps=[{"loss": loss}] * 2)
    assert (record.stopped_at == 0) is is_nan
    assert record.steps == (1 if is_nan else 2)


async def test_numpy_values_are_checked(drive: Drive) -> None:
    """numpy scalars and arrays (via float() or iteration) are checked too."""
    np = pytest.importorskip("numpy")
    for loss, expected in (
        (np.float32("nan"), True),
        (np.array([1.0, np.nan]), True),
        (np.array(2.0), False),
    ):
        record = await drive(NanTensorHook("loss", fail_on_nan_loss=False), steps=[{"loss": loss}])
        assert (record.stop is not None) is expected


@pytest.mark.parametrize("loss", [math.inf, -math.inf, [1.0, [2.0, -math.inf]]])
async def test_an_infinite_loss_passes_by_default(drive: Drive, loss: object) -> None:
    """By default, as TensorFlow's NanTensorHook, only NaN counts: an infinite loss passes."""
    record = await drive(NanTensorHook("loss", fail_on_nan_loss=False), steps=[{"loss": loss}] * 2)
    assert record.stop is None and record.steps == 2


@pytest.mark.parametrize(("loss", "word"), [(math.inf, "inf"), (-math.inf, "-inf"), ([1.0, [-math.inf]], "-inf")])
async def test_check_inf_stops_on_an_infinite_loss(
    drive: Drive, caplog: pytest.LogCaptureFixture, loss: object, word: str
) -> None:
    """With check_inf=True an infinite loss stops the session, as Keras' and Ignite's handlers do."""
    losses = [{"loss": 1.0}, {"loss": loss}, {"loss": 2.0}]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        record = await drive(NanTensorHook("loss", fail_on_nan_loss=False, check_inf=True), steps=losses)
    assert record.stopped_at == 1 and record.steps == 2
    assert f"Model diverged with loss = {word}." in caplog.text


async def test_check_inf_raises_naming_the_value(drive: Drive) -> None:
    """With check_inf=True and fail_on_nan_loss, an infinite loss raises saying it was infinite."""
    record = await drive(
        NanTensorHook("loss", check_inf=True), steps=[{"loss": math.inf}], raises=NanLossDuringTrainingError
    )
    assert str(record.error) == "inf loss during training."


async def test_check_inf_still_stops_on_nan(drive: Drive) -> None:
    """check_inf adds infinity: NaN still counts, with TensorFlow's message."""
    record = await drive(NanTensorHook("loss", check_inf=True), steps=[{"loss": math.nan}], raises=NanLossDuringTrainingError)
    assert str(record.error) == "NaN loss during training."


def test_check_inf_must_be_a_bool() -> None:
    """check_inf is a switch: anything but True or False is a TypeError naming it."""
    with pytest.raises(TypeError, match=r"check_inf must be True or False, got 'yes'"):
        NanTensorHook("loss", check_inf="yes")  # type: ignore[arg-type]
    assert repr(NanTensorHook("loss", check_inf=True)) == "NanTensorHook('loss', fail_on_nan_loss=True, check_inf=True)"
