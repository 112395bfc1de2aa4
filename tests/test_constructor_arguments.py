"""Every public constructor refuses each bad argument where it is passed, naming it as the caller
wrote it: a value of the wrong kind is a ``TypeError``, a value out of range a ``ValueError``."""

from __future__ import annotations

import math
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import hookrun
from hookrun import hooks as h

NAN, INF = math.nan, math.inf


def _gen() -> Iterator[int]:
    yield 1


async def _agen() -> AsyncIterator[int]:
    yield 1


class _CallsAGenerator:
    def __call__(self) -> Iterator[int]:
        yield 1


async def _factory() -> hookrun.StepSession:
    return hookrun.StepSession(lambda feeds: {})


class _Writer:
    def add_scalar(self, tag: str, value: float, step: int) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


T, V = TypeError, ValueError
#: Bad values of each kind of argument, with the error each must raise.
_NOT_A_NUMBER = [("5", T), (True, T), (False, T), (_gen, T), ([1], T)]
KINDS: dict[str, list[tuple[object, type[Exception]]]] = {
    # an int >= 1 (None allowed where it is the default)
    "count": [(-1, V), (0, V), (1.5, T), (2.0, T), (NAN, T), (INF, T), *_NOT_A_NUMBER],
    # an int >= 0
    "count0": [(-1, V), (1.5, T), (NAN, T), (INF, T), *_NOT_A_NUMBER],
    # any int
    "int": [(1.5, T), (NAN, T), (INF, T), *_NOT_A_NUMBER],
    # a finite number >= 0
    "seconds": [(-1, V), (-0.5, V), (NAN, V), (INF, V), (-INF, V), *_NOT_A_NUMBER],
    # a finite number > 0
    "seconds>0": [(0, V), (0.0, V), (-1, V), (NAN, V), (INF, V), *_NOT_A_NUMBER],
    # any finite number
    "number": [(NAN, V), (INF, V), (-INF, V), *_NOT_A_NUMBER],
    "flag": [("no", T), (1, T), (0, T), (None, T)],
    "function": [(5, T), (_gen, T), (_agen, T), (_CallsAGenerator(), T)],
    "text": [(5, T), ("a\x00b", V), ("", V)],
    "text-or-empty": [(5, T), ("a\x00b", V)],
    "file-name": [(5, T), ("a\x00b", V), ("", V), ("a/b", V), (".hidden", V)],
    "path": [(5, T), ("a\x00b", V), (b"dir", T)],
    # an iterable of exception classes
    "exception-types": [(5, T), ("x", T), (b"x", T), (KeyError, T), (_gen, T)],
}
REQUIRED = [(None, T)]  # for an argument with no "not given" meaning


@dataclass(frozen=True)
class Arg:
    """One argument of one public constructor: ``make(tmp_path, **{name: value})`` builds it."""

    make: Callable[..., object]
    name: str
    kind: str
    required: bool = False
    extra: tuple[tuple[object, type[Exception]], ...] = ()
    #: A value the argument accepts (by default: leave the argument out).
    good: object = None

    def cases(self) -> list[tuple[object, type[Exception]]]:
        return [*KINDS[self.kind], *(REQUIRED if self.required else ()), *self.extra]


def _ckpt(tmp: Path, **kw: Any) -> object:
    return hookrun.Checkpointer(kw.pop("directory", tmp / "c"), **kw)


def _saver(tmp: Path, **kw: Any) -> object:
    kw.setdefault("checkpoint_dir", tmp / "c")
    if "save_secs" not in kw and "save_steps" not in kw:
        kw["save_steps"] = 1
    return h.CheckpointSaverHook(**kw)


def _trainer(tmp: Path, **kw: Any) -> object:
    return hookrun.MonitoredTrainingSession(_factory, **kw)


def _timed(cls: Any, secs: str, steps: str, **base: Any) -> Callable[..., object]:
    """A timer-based hook given exactly one of its two intervals (the one under test)."""

    def make(tmp: Path, **kw: Any) -> object:
        args = dict(base)
        if secs not in kw and steps not in kw:
            kw[steps] = 1
        return cls(**args, **kw)

    return make


def _call(fn: Callable[..., object], *args: object, **base: Any) -> Callable[..., object]:
    return lambda tmp, **kw: fn(*args, **base, **kw)


def _metrics_file(tmp: Path, **kw: Any) -> object:
    return h.MetricsFileHook(**{"path": tmp / "metrics.csv", "metrics": ["loss"], **kw})


def _decorated(decorator: Callable[..., Any]) -> Callable[..., object]:
    """``decorator(fn)`` or, for a schedule argument, ``decorator(**kw)(a function)``."""

    def make(tmp: Path, **kw: Any) -> object:
        if "fn" in kw:
            return decorator(kw.pop("fn"), **kw)
        return decorator(**kw)(lambda *args: None)

    return make


ARGS = [
    # hookrun
    Arg(_ckpt, "directory", "path", required=True),
    Arg(_ckpt, "max_to_keep", "count"),
    Arg(_ckpt, "keep_best", "count"),
    Arg(_ckpt, "keep_checkpoint_every_n_hours", "seconds>0"),
    Arg(_ckpt, "basename", "file-name", required=True),
    Arg(_ckpt, "write_nice", "count0"),
    Arg(_call(hookrun.ChiefSessionCreator), "factory", "function", required=True, good=_factory),
    Arg(_call(hookrun.ChiefSessionCreator, _factory), "checkpoint_dir", "path"),
    Arg(_call(hookrun.ChiefSessionCreator, _factory), "checkpoint_path", "path"),
    Arg(_call(hookrun.WorkerSessionCreator), "factory", "function", required=True, good=_factory),
    Arg(_call(hookrun.WorkerSessionCreator, _factory), "max_wait_secs", "seconds>0", required=True),
    Arg(_call(hookrun.WorkerSessionCreator, _factory), "checkpoint_dir", "path"),
    Arg(_call(hookrun.Coordinator), "stop_grace_period", "seconds", required=True),
    Arg(_call(hookrun.Coordinator), "clean_stop_exception_types", "exception-types", good=(KeyError,)),
    Arg(_call(hookrun.LocalStepCounter), "initial", "int", required=True),
    *(Arg(_call(kind, _factory), name, k, required=r)
      for kind in (hookrun.MonitoredSession, hookrun.SingularMonitoredSession)
      for name, k, r in (("stop_grace_period", "seconds", True), ("hook_timeout", "seconds>0", False))),
    Arg(_call(hookrun.MonitoredSession, _factory), "recoverable", "exception-types", required=True, good=[KeyError]),
    Arg(_call(hookrun.MonitoredSession, _factory), "retry_on", "exception-types", required=True, good=[KeyError]),
    Arg(_trainer, "retry_on", "exception-types", required=True, good=(KeyError,)),
    Arg(_trainer, "is_chief", "flag"),
    Arg(_trainer, "recoverable", "exception-types", required=True, good=(KeyError,)),
    Arg(_trainer, "checkpoint_dir", "path"),
    Arg(_trainer, "summary_dir", "path"),
    Arg(_trainer, "save_checkpoint_secs", "number"),
    Arg(_trainer, "save_checkpoint_steps", "int"),
    Arg(_trainer, "save_summaries_secs", "number"),
    Arg(_trainer, "save_summaries_steps", "int"),
    Arg(_trainer, "log_step_count_steps", "int"),
    Arg(_trainer, "stop_grace_period_secs", "seconds", required=True),
    Arg(_trainer, "max_wait_secs", "seconds>0", required=True),
    Arg(_call(hookrun.RetryPolicy), "max_attempts", "count"),
    Arg(_call(hookrun.RetryPolicy), "initial_delay", "seconds", required=True),
    Arg(_call(hookrun.RetryPolicy), "max_delay", "seconds", required=True),
    Arg(_call(hookrun.RetryPolicy), "multiplier", "number", required=True, extra=((0.5, V), (0, V))),
    Arg(_call(hookrun.RetryPolicy), "jitter", "flag"),
    Arg(_call(hookrun.RetryPolicy), "max_time", "seconds>0"),
    Arg(_call(hookrun.RetryPolicy), "log_interval", "seconds", required=True),
    Arg(_call(hookrun.RetryPolicy), "clock", "function"),
    Arg(_call(hookrun.RunOptions), "timeout", "seconds>0"),
    Arg(_call(hookrun.RunOptions), "trace", "flag"),
    Arg(_call(hookrun.StatisticsOptions), "enabled", "flag"),
    Arg(_call(hookrun.StatisticsOptions), "sample_every", "count"),
    Arg(_call(hookrun.StatisticsOptions), "slow_hook_share", "seconds>0", extra=((1.5, V),)),
    Arg(_call(hookrun.StatisticsOptions), "slow_hook_seconds", "seconds", required=True),
    Arg(_call(hookrun.SecondOrStepTimer, every_steps=None), "every_secs", "seconds", good=1.0),
    Arg(_call(hookrun.SecondOrStepTimer), "every_steps", "count0", good=1),
    Arg(_call(hookrun.StepSession), "step_fn", "function", required=True, good=lambda feeds: {}),
    Arg(_call(hookrun.every), "steps", "count", good=1),
    Arg(_call(hookrun.every), "seconds", "seconds>0", good=0.5),
    Arg(_call(hookrun.at_step), "step", "int", required=True, good=3),
    Arg(_call(hookrun.when), "predicate", "function", required=True, good=lambda step: True),
    *(Arg(_decorated(decorator), "fn", "function")
      for decorator in (h.on_begin, h.on_after_create_session, h.on_before_run, h.on_after_run, h.on_end)),
    *(Arg(_decorated(decorator), name, kind)
      for decorator in (h.on_before_run, h.on_after_run)
      for name, kind in (("every_n_steps", "count"), ("every_n_secs", "seconds>0"), ("once_at_step", "int"),
                         ("when", "function"))),
    Arg(_decorated(h.on_begin), "name", "text"),
    # hookrun.hooks
    Arg(_saver, "checkpoint_dir", "path"),
    Arg(_saver, "save_secs", "seconds"),
    Arg(_saver, "save_steps", "count0"),
    Arg(_saver, "checkpoint_basename", "file-name", required=True),
    Arg(_saver, "max_to_keep", "count"),
    Arg(_call(h.EarlyStoppingHook, "loss"), "patience_steps", "count0", required=True, good=3),
    *(Arg(_call(h.EarlyStoppingHook, "loss", **base), name, kind, required=required)
      for base, name, kind, required in (
          ({"patience_steps": 1}, "min_delta", "seconds", True),
          ({"patience_steps": 1}, "min_steps", "count0", True),
          ({"patience_steps": 1}, "baseline", "number", False),
          ({"patience_steps": 1}, "run_every_secs", "seconds", False),
          ({"patience_steps": 1}, "run_every_steps", "count0", False))),
    Arg(_call(h.ThresholdStoppingHook, "loss"), "threshold", "number", required=True, good=-0.5),
    Arg(_call(h.ThresholdStoppingHook, "loss", 0.5), "higher", "flag"),
    *(Arg(_call(factory, "loss", **base), name, kind, required=required)
      for factory, base in (
          (h.stop_if_higher_hook, {"threshold": 1.0}),
          (h.stop_if_lower_hook, {"threshold": 1.0}),
          (h.stop_if_no_increase_hook, {"max_steps_without_increase": 3}),
          (h.stop_if_no_decrease_hook, {"max_steps_without_decrease": 3}))
      for name, kind, required in (("min_steps", "count0", True), ("run_every_secs", "seconds", False),
                                   ("run_every_steps", "count0", False))),
    Arg(_call(h.stop_if_no_increase_hook, "loss"), "max_steps_without_increase", "count0", required=True, good=0),
    Arg(_call(h.stop_if_no_decrease_hook, "loss"), "max_steps_without_decrease", "count0", required=True, good=7),
    Arg(_call(h.StopOnPredicateHook), "should_stop_fn", "function", required=True, good=lambda: False),
    Arg(_call(h.StopOnPredicateHook, lambda: False), "run_every_secs", "seconds"),
    Arg(_call(h.StopOnPredicateHook, lambda: False), "run_every_steps", "count0"),
    Arg(_call(h.FeedFnHook), "feed_fn", "function", required=True, good=dict),
    Arg(_call(h.GlobalStepWaiterHook), "wait_until_step", "int", required=True, good=-3),
    Arg(_timed(h.LoggingTensorHook, "every_n_secs", "every_n_iter", tensors=["loss"]), "every_n_iter", "count"),
    Arg(_timed(h.LoggingTensorHook, "every_n_secs", "every_n_iter", tensors=["loss"]), "every_n_secs", "seconds"),
    Arg(_timed(h.LoggingTensorHook, "every_n_secs", "every_n_iter", tensors=["loss"]), "at_end", "flag"),
    Arg(_timed(h.LoggingTensorHook, "every_n_secs", "every_n_iter", tensors=["loss"]), "formatter", "function"),
    Arg(_call(h.NanTensorHook, "loss"), "fail_on_nan_loss", "flag"),
    Arg(_call(h.OpenTelemetryHook), "step_span_name", "text", required=True),
    Arg(_timed(h.ProfilerHook, "save_secs", "save_steps"), "save_steps", "count0"),
    Arg(_timed(h.ProfilerHook, "save_secs", "save_steps"), "save_secs", "seconds"),
    Arg(_timed(h.ProfilerHook, "save_secs", "save_steps"), "output_dir", "path", required=True),
    Arg(_call(h.ProgressBarHook, mode="log"), "total", "count0"),
    Arg(_call(h.ProgressBarHook, mode="log"), "log_every_secs", "seconds", required=True),
    Arg(_call(h.ProgressBarHook, mode="log"), "desc", "text-or-empty"),
    Arg(_call(h.PrometheusHook), "port", "count0", extra=((65536, V),)),
    Arg(_call(h.PrometheusHook), "addr", "text", required=True),
    Arg(_call(h.PrometheusHook), "namespace", "text-or-empty", required=True),
    Arg(_timed(h.StepCounterHook, "every_n_secs", "every_n_steps"), "every_n_steps", "count0"),
    Arg(_call(h.StepCounterHook, every_n_steps=None), "every_n_secs", "seconds", good=2.5),
    Arg(_metrics_file, "path", "path", required=True),
    Arg(_metrics_file, "every_n_steps", "count", required=True),
    Arg(_metrics_file, "flush_secs", "seconds", required=True),
    Arg(_metrics_file, "clock", "function"),
    Arg(_call(h.StepCounterHook), "output_dir", "path"),
    Arg(_call(h.StepCounterHook), "summary_tag", "text", required=True),
    Arg(_call(h.StopAtStepHook), "num_steps", "count0", good=0),
    Arg(_call(h.StopAtStepHook), "last_step", "int", good=10),
    Arg(_timed(h.SummarySaverHook, "save_secs", "save_steps", summary_writer=_Writer(), scalars=["loss"]), "save_steps", "count0"),
    Arg(_timed(h.SummarySaverHook, "save_secs", "save_steps", summary_writer=_Writer(), scalars=["loss"]), "save_secs", "seconds"),
    Arg(_timed(h.SummarySaverHook, "save_secs", "save_steps", scalars=["loss"]), "output_dir", "path", good="summaries"),
    Arg(lambda tmp, **kw: h.TensorBoardWriter(kw.pop("logdir", tmp / "tb"), **kw), "logdir", "path", required=True),
    Arg(lambda tmp, **kw: h.TensorBoardWriter(tmp / "tb", **kw), "flush_secs", "seconds", required=True),
]

#: Internal names a message must never show in place of the caller's argument.
INTERNAL = ("every_steps", "every_secs", "patience_steps", "stop_grace_period", "'>='", "'<'", "'>'")


def _label(arg: Arg) -> str:
    owner = getattr(arg.make, "__qualname__", "")
    return f"{owner.split('.')[0]}:{arg.name}"


def _case_id(i: int, arg: Arg, value: object) -> str:
    """A stable id (the same in every process: no memory address), e.g. ``3-save_steps=1.5``."""
    shown = repr(value)
    if " at 0x" in shown:  # a function or an object without a repr of its own
        shown = getattr(value, "__qualname__", None) or f"<{type(value).__qualname__}>"
    return f"{i}-{arg.name}={shown}".replace("\x00", "NUL")


CASES = [
    pytest.param(arg, value, error, id=_case_id(i, arg, value))
    for i, arg in enumerate(ARGS)
    for value, error in arg.cases()
]


@pytest.mark.parametrize(("arg", "value", "error"), CASES)
def test_a_bad_argument_is_refused_at_construction_naming_it(
    tmp_path: Path, arg: Arg, value: object, error: type[Exception]
) -> None:
    """The constructor raises TypeError/ValueError whose message names the argument and the value."""
    with pytest.raises((TypeError, ValueError)) as caught:
        arg.make(tmp_path, **{arg.name: value})
    message = str(caught.value)
    assert type(caught.value) is error or isinstance(caught.value, error), message
    assert re.search(rf"\b{re.escape(arg.name)}\b", message), message
    for internal in INTERNAL:
        if internal != arg.name:
            assert not re.search(rf"(?<!\w){re.escape(internal)}(?!\w)", message), message
    shown = "NUL" if isinstance(value, str) and "\x00" in value else None
    if shown is None and not callable(value):
        assert repr(value) in message, message


@pytest.mark.parametrize("arg", [pytest.param(arg, id=f"{i}-{arg.name}") for i, arg in enumerate(ARGS)])
def test_every_table_row_builds_with_a_good_value(tmp_path: Path, arg: Arg) -> None:
    """Each row's constructor builds with a good value of the argument, so each refusal is the value's."""
    made = arg.make(tmp_path, **({} if arg.good is None else {arg.name: arg.good}))
    assert made is not None
    close = getattr(made, "close", None)
    if callable(close):
        close()
