"""``NanTensorHook``: stop (or fail) when the fetched loss is NaN (or, with ``check_inf``,
infinite)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable

from .._errors import HookrunError
from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._validate import check_flag
from ._common import fields, logger

__all__ = ["NanLossDuringTrainingError", "NanTensorHook"]

class NanLossDuringTrainingError(HookrunError, RuntimeError):
    """The loss watched by a :class:`NanTensorHook` became NaN (or infinite, with ``check_inf``)."""

    def __init__(self, message: str = "NaN loss during training.") -> None:
        super().__init__(message)


class NanTensorHook(SessionRunHook):
    """Fetches ``loss_key`` every step; on NaN raises or requests stop.

    With ``fail_on_nan_loss=True`` (the default) ``after_run`` logs an error and
    raises :class:`NanLossDuringTrainingError`; otherwise it logs a warning and
    requests stop. The value may be a number, anything ``float()`` accepts
    (a numpy scalar or 0-d array), or a nested sequence of those (NaN if any
    element is). With ``check_inf=True`` an infinite loss (``inf`` or ``-inf``)
    counts as diverged too, as in Keras' ``TerminateOnNaN`` and Ignite's
    ``TerminateOnNan``; by default only NaN does, as in TensorFlow.

    Args:
        loss_key: The fetch key of the loss.
        fail_on_nan_loss: Raise ``NanLossDuringTrainingError`` on a NaN (``True``), or
            request stop.
        check_inf: Treat an infinite loss as diverged too.
    """

    overlapping_steps = True

    def __init__(self, loss_key: Hashable, fail_on_nan_loss: bool = True, *, check_inf: bool = False) -> None:
        try:
            hash(loss_key)
        except TypeError:
            raise TypeError(f"NanTensorHook: loss_key must be hashable, got {loss_key!r}") from None
        if loss_key is None:
            raise ValueError("NanTensorHook: loss_key must be a fetch key, got None")
        check_flag("NanTensorHook: fail_on_nan_loss", fail_on_nan_loss)
        self._loss_key = loss_key
        if not isinstance(check_inf, bool):
            raise TypeError(f"NanTensorHook: check_inf must be True or False, got {check_inf!r}")
        self._fail_on_nan_loss = fail_on_nan_loss
        self._check_inf = check_inf
        self._request = SessionRunArgs(loss_key)

    def __repr__(self) -> str:
        inf = ", check_inf=True" if self._check_inf else ""
        return f"NanTensorHook({self._loss_key!r}, fail_on_nan_loss={self._fail_on_nan_loss}{inf})"

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Fetch the loss."""
        return self._request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Raise or request stop if the loss is NaN (or infinite, with ``check_inf``)."""
        bad = _diverged(run_values.results, self._check_inf)
        if bad is None:
            return
        word = "NaN" if math.isnan(bad) else str(bad)  # TensorFlow's words for NaN
        extra = fields(run_values.global_step, "NanTensorHook", "after_run")
        if self._fail_on_nan_loss:
            logger.error("Model diverged with loss = %s.", word, extra=extra)
            raise NanLossDuringTrainingError(f"{word} loss during training.")
        logger.warning("Model diverged with loss = %s.", word, extra=extra)
        run_context.request_stop()


def _diverged(value: object, check_inf: bool) -> float | None:
    """The first NaN (or, with ``check_inf``, infinite) number in ``value``, or ``None``."""
    if isinstance(value, float):
        number = value
    else:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):  # not a number; ValueError: e.g. a multi-element array
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
                for item in value:
                    bad = _diverged(item, check_inf)
                    if bad is not None:
                        return bad
            return None
    if math.isnan(number) or (check_inf and math.isinf(number)):
        return number
    return None
