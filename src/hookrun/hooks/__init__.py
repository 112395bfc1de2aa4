"""Built-in hooks: every TensorFlow basic session-run hook, early stopping, a progress
bar, a metrics file, and decorators that turn functions into hooks.

One hook per private module; this package re-exports the public names. Hooks
read the global step from the runtime's step counter, never from a fetch, and
values from fetches by key. Optional dependencies are imported lazily:
TensorBoard writing needs ``hookrun[tensorboard]``, the progress bar
``hookrun[progress]``, ``OpenTelemetryHook`` ``hookrun[otel]`` and ``PrometheusHook``
``hookrun[prometheus]`` (those two modules are imported on first use of the name).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._public import publish, publish_loaded
from .._timer import NeverTriggerTimer, SecondOrStepTimer
from ._checkpoint_saver import CheckpointSaverHook, CheckpointSaverListener
from ._early_stopping import EarlyStoppingHook, StopOnPredicateHook, ThresholdStoppingHook
from ._events import read_eval_metrics
from ._feed_fn import FeedFnHook
from ._final_ops import FinalOpsHook
from ._function_hooks import (
    FunctionHook,
    on_after_create_session,
    on_after_run,
    on_before_run,
    on_begin,
    on_end,
)
from ._global_step_waiter import GlobalStepWaiterHook
from ._logging_tensor import LoggingTensorHook
from ._metrics_file import MetricsFileHook
from ._nan_tensor import NanLossDuringTrainingError, NanTensorHook
from ._profiler import ProfilerHook, chrome_trace
from ._progress import ProgressBarHook
from ._step_counter import StepCounterHook
from ._stop_at_step import StopAtStepHook
from ._stop_if import (
    stop_if_higher_hook,
    stop_if_lower_hook,
    stop_if_no_decrease_hook,
    stop_if_no_increase_hook,
)
from ._summary_saver import SummarySaverHook
from ._summary_writer import SummaryWriter, TensorBoardWriter
from ._triggers import Trigger, at_step, every, when

if TYPE_CHECKING:
    from ._opentelemetry import OpenTelemetryHook
    from ._prometheus import PrometheusHook

_LAZY = {"OpenTelemetryHook": "._opentelemetry", "PrometheusHook": "._prometheus"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    publish(__name__, globals(), [name])
    return value

__all__ = [
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "EarlyStoppingHook",
    "FeedFnHook",
    "FinalOpsHook",
    "FunctionHook",
    "GlobalStepWaiterHook",
    "LoggingTensorHook",
    "MetricsFileHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "NeverTriggerTimer",
    "OpenTelemetryHook",
    "ProfilerHook",
    "ProgressBarHook",
    "PrometheusHook",
    "SecondOrStepTimer",
    "StepCounterHook",
    "StopAtStepHook",
    "StopOnPredicateHook",
    "SummarySaverHook",
    "SummaryWriter",
    "TensorBoardWriter",
    "ThresholdStoppingHook",
    "Trigger",
    "at_step",
    "chrome_trace",
    "every",
    "on_after_create_session",
    "on_after_run",
    "on_before_run",
    "on_begin",
    "on_end",
    "read_eval_metrics",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
    "when",
]

publish(__name__, globals(), __all__)
publish_loaded()  # the checkpoint classes these hooks imported, under ``hookrun``
