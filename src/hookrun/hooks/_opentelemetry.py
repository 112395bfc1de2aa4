"""``OpenTelemetryHook``: one span per step, child spans per hook call and for the run.

The hook asks for a trace of every step (``RunOptions(trace=True)``, and
``traces_before_run``), so the step's ``RunMetadata.timings`` holds a record per
hook call and for the session run; the child spans are created from the records,
with their recorded start and end times. A step span is made one of two ways:

* through ``step_context``, when the session enters it (one step at a time): entered
  around the whole step in the calling task, the span is current (an OpenTelemetry
  context attached) while every hook runs, so spans a hook starts nest under it; it is
  detached when the step ends, whether it returned or raised, and the error is
  recorded on the step span and on the span of the call that raised it;
* through the hook's own ``before_run`` and ``after_run`` when it is not (steps in
  flight): the span starts in ``before_run``, travels in ``run_context.step_state`` and
  ends in ``after_run``; a step given up without its ``after_run`` (``OpenSteps``) has
  its span ended with status ERROR as soon as the hook learns it is over.

Needs ``hookrun[otel]``.

Invariants: every span started is ended exactly once, on every exit (``end`` and
``on_exception`` end the spans of the steps still open); a timing record becomes one
child span: on the second path the records of a step's ``after_run`` phase that come
after this hook's call become children at the hook's next call (``_tail``: state only
``after_run`` sets, read once that phase is over, since phases never overlap).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import anyio

from .._dispatch._plan import hook_name
from .._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    TimingRecord,
)
from .._validate import check_text
from ._common import import_optional
from ._open_steps import OpenSteps

__all__ = ["OpenTelemetryHook"]

_TRACE = SessionRunArgs(options=RunOptions(trace=True))
#: What ``step_context`` leaves in a step's ``step_state``: the step's span is made there.
_IN_CONTEXT = object()


class _StepSpan(NamedTuple):
    """A step's span and the clocks its children's times are mapped with."""

    span: Any
    step: int
    wall_ns: int  # time.time_ns() when the span started ...
    now: float  # ... and anyio.current_time() then


class OpenTelemetryHook(SessionRunHook):
    """Spans for every step: ``hookrun.step`` with a child per hook call
    (``hookrun.<phase> <hook>``) and one for the session run (``hookrun.run``).

    ``tracer_provider``: the provider to get the tracer from (default: the global
    one). Attributes: ``hookrun.step`` (the global step the step started at) on
    every span, ``hookrun.hook`` and ``hookrun.phase`` on the children, and
    ``attributes`` (a mapping) on the step span.

    One step at a time, the session enters the hook's ``step_context`` around each
    step: the step span is current while every hook of the step runs (spans a hook
    starts nest under it) and is gone when ``run()`` returns; a step that raises has
    the error recorded on its span (status ERROR, an exception event), and so has the
    span of the hook call that raised it. A step re-run after a recovery has one span
    per attempt.

    With steps in flight (``overlapping_steps = True``) every step still has one span,
    with its own ``hookrun.step``, started in this hook's ``before_run`` and ended in
    its ``after_run`` (it travels in ``run_context.step_state``). A step given up
    without its ``after_run`` (failed, cancelled, or re-run after its lane's recovery)
    has its span ended with status ERROR once the hook learns it is over: at its next
    ``before_run`` or ``after_run``, or when the session exits. There the step span is
    not current while the other hooks run (a step's hook calls then run in several
    tasks), the error of a given-up step is not known to it (its span says it was given
    up, or the error the session exited with), and a step whose ``after_run`` phase
    fails after this hook's call keeps status UNSET.

    Args:
        tracer_provider: The OpenTelemetry ``TracerProvider`` to get the tracer from.
            ``None``: the global one.
        step_span_name: The name of each step's span.
        attributes: More attributes of each step's span. ``None``: none.
    """

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    traces_before_run = True

    #: Right with steps in flight: a step's span lives in its ``step_state``.
    overlapping_steps = True

    def __init__(
        self,
        tracer_provider: Any = None,
        *,
        step_span_name: str = "hookrun.step",
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        check_text("OpenTelemetryHook(step_span_name=...)", step_span_name)
        if attributes is not None and not isinstance(attributes, Mapping):
            raise TypeError(f"OpenTelemetryHook(attributes=...) must be a mapping, got {attributes!r}")
        trace = import_optional("opentelemetry.trace", "otel", "OpenTelemetryHook")
        self._tracer = trace.get_tracer("hookrun", tracer_provider=tracer_provider)
        self._name = step_span_name
        self._attributes = dict(attributes or {})
        self._open = OpenSteps(self)
        #: The last step whose span ``after_run`` ended on the second path, its records
        #: and how many became children (the calls after this hook's in its phase come later).
        self._tail: tuple[_StepSpan, RunMetadata, int] | None = None

    async def begin(self) -> None:
        """Start clean: what an earlier session left open (nothing, once it exited) is ended."""
        self._settle(None)
        self._tail = None

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Ask for a trace of the step; start its span unless its ``step_context`` did."""
        if run_context.step_state.get(self) is not _IN_CONTEXT:
            self._settle(run_context)
            step = run_context.global_step
            span = self._tracer.start_span(self._name, attributes={**self._attributes, "hookrun.step": step})
            self._open.open(run_context, _StepSpan(span, step, time.time_ns(), anyio.current_time()))
        return _TRACE

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """End the step's span with a child per record so far, unless ``step_context`` does."""
        opened: _StepSpan | None = self._open.close(run_context)
        if opened is None:
            return
        self._settle(run_context)
        metadata = run_values.run_metadata
        tail = self._tail
        self._tail = (opened, metadata, tail[2] if tail is not None and tail[1] is metadata else 0)
        self._children_of_tail()
        opened.span.end()

    def _settle(self, run_context: SessionRunContext | None, exception: BaseException | None = None) -> None:
        """What is over: the last step's remaining records, the steps given up."""
        self._children_of_tail()
        gone: list[_StepSpan] = self._open.drain() if run_context is None else self._open.over(run_context)
        if gone:
            from opentelemetry.trace import Status, StatusCode

            why = "step given up without its after_run (failed, cancelled, or re-run after a recovery)"
            if exception is not None:
                why = f"step given up: the session exited with {type(exception).__name__}: {exception}"
            for opened in gone:
                opened.span.set_status(Status(StatusCode.ERROR, why))
                opened.span.end()

    def _children_of_tail(self) -> None:
        tail = self._tail
        if tail is not None:
            opened, metadata, first = tail
            records = metadata.timings
            self._children(opened, records[first:], None)
            self._tail = (opened, metadata, len(records))

    @contextlib.contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: RunMetadata) -> Iterator[Any]:
        """The step span, current for the whole step; its children when it ends."""
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode

        run_context.step_state[self] = _IN_CONTEXT
        step = run_context.global_step
        span = self._tracer.start_span(self._name, attributes={**self._attributes, "hookrun.step": step})
        token = context.attach(trace.set_span_in_context(span))
        first = len(run_metadata.timings)
        opened = _StepSpan(span, step, time.time_ns(), anyio.current_time())
        error: BaseException | None = None
        try:
            yield span
        except BaseException as exc:
            error = exc
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            context.detach(token)
            self._children(opened, run_metadata.timings[first:], error)
            span.end()

    def _children(self, opened: _StepSpan, records: Sequence[TimingRecord], error: BaseException | None) -> None:
        """A child span of ``opened`` per record; ``error`` is recorded on the call that raised it."""
        if not records:
            return
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        parent = trace.set_span_in_context(opened.span)
        failing = _failing_call(error)
        step, wall_ns, now = opened.step, opened.wall_ns, opened.now

        def at(seconds: float) -> int:
            return wall_ns + int((seconds - now) * 1e9)

        for record in records:
            if record.phase == "run":
                name, attributes = "hookrun.run", {"hookrun.step": step, "hookrun.phase": "run"}
            else:
                name = f"hookrun.{record.phase} {record.name}"
                attributes = {"hookrun.step": step, "hookrun.hook": record.name, "hookrun.phase": record.phase}
            child = self._tracer.start_span(name, context=parent, attributes=attributes, start_time=at(record.start))
            if error is not None and (record.phase, record.name) == failing:
                child.record_exception(error)
                child.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            child.end(end_time=at(record.end))

    async def end(self, session: Any) -> None:
        """End the spans of the steps still open (given up) and make the last children."""
        self._settle(None)

    async def on_exception(self, session: Any, exception: BaseException) -> None:
        """End the spans of the steps still open, saying the session exited with ``exception``."""
        self._settle(None, exception)


def _failing_call(error: BaseException | None) -> tuple[str, str] | None:
    """``(phase, hook name)`` of the hook method the error was raised in, if it was."""
    if error is None:
        return None
    phase = getattr(error, "phase", None)
    hook = getattr(error, "hook", None)
    if isinstance(phase, str) and hook is not None:  # HookTimeoutError
        return phase, hook_name(hook)
    tb = error.__traceback__
    found = None
    while tb is not None:
        frame = tb.tb_frame
        name = frame.f_code.co_name
        if name in ("before_run", "after_run") and "self" in frame.f_locals and found is None:
            found = (name, hook_name(frame.f_locals["self"]))
        tb = tb.tb_next
    return found
