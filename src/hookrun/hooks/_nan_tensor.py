"""``NanTensorHook``: stop (or fail) when the fetched loss is NaN."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable

from .._errors import HookrunError
from .._hooks import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._validate import check_flag
from ._common import fields, logger

__all__ = ["NanLossDuringTrainingError", "NanTensorHook"]

_DIVERGED = "Model diverged with loss = NaN."


class NanLossDuringTrainingError(HookrunError, RuntimeError):
    """The loss watched by a :class:`NanTensorHook` became NaN."""

    def __init__(self, message: str = "NaN loss during training.") -> None:
        super().__init__(message)


class NanTensorHook(SessionRunHook):
    """Fetches ``loss_key`` every step; on NaN raises or requests stop.

    With ``fail_on_nan_loss=True`` (the default) ``after_run`` logs an error and
    raises :class:`NanLossDuringTrainingError`; otherwise it logs a warning and
    requests stop. The value may be a number, anything ``float()`` accepts
    (a numpy scalar or 0-d array), or a nested sequence of those (NaN if any
    element is).
    """

    def __init__(self, loss_key: Hashable, fail_on_nan_loss: bool = True) -> None:
        try:
            hash(loss_key)
        except TypeError:
            raise TypeError(f"NanTensorHook: loss_key must be hashable, got {loss_key!r}") from None
        if loss_key is None:
            raise ValueError("NanTensorHook: loss_key must be a fetch key, got None")
        check_flag("NanTensorHook: fail_on_nan_loss", fail_on_nan_loss)
        self._loss_key = loss_key
        self._fail_on_nan_loss = fail_on_nan_loss
        self._request = SessionRunArgs(loss_key)

    def __repr__(self) -> str:
        return f"NanTensorHook({self._loss_key!r}, fail_on_nan_loss={self._fail_on_nan_loss})"

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Fetch the loss."""
        return self._request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Raise or request stop if the loss is NaN."""
        if not _has_nan(run_values.results):
            return
        if self._fail_on_nan_loss:
            logger.error(_DIVERGED, extra=fields(run_values.global_step, "NanTensorHook", "after_run"))
            raise NanLossDuringTrainingError()
        logger.warning(_DIVERGED, extra=fields(run_values.global_step, "NanTensorHook", "after_run"))
        run_context.request_stop()


def _has_nan(value: object) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    try:
        return math.isnan(float(value))  # type: ignore[arg-type]
    except TypeError:
        pass
    except ValueError:  # e.g. a multi-element array refusing float()
        pass
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        return any(_has_nan(item) for item in value)
    return False
