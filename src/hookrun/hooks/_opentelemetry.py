"""``OpenTelemetryHook``: one span per step, child spans per hook call and for the run.

The hook asks for a trace of every step (``RunOptions(trace=True)``, and
``traces_before_run``), so the step's ``RunMetadata.timings`` holds a record per
hook call and for the session run. Through ``step_context`` the session enters
the step span around each attempt of each step (at every ``max_in_flight``), in
the task and context the step runs in: it is current (an OpenTelemetry context
attached) while every hook of that step runs, so spans a hook starts nest under
it, and it is detached when the attempt ends, whether it returned or raised. The
child spans are created from the records when the attempt ends, with their
recorded start and end times. Needs ``hookrun[otel]``.

Invariant: every span started is ended once, in the ``step_context`` that started
it, on every exit of the attempt; a step's span and records live in that frame,
never on the hook, so steps in flight each have their own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import anyio

from .._dispatch._plan import hook_name
from .._hook_protocol import (
    RunMetadata,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    TimingRecord,
)
from .._validate import check_text
from ._common import TRACE_STEP, import_optional

__all__ = ["OpenTelemetryHook"]



class OpenTelemetryHook(SessionRunHook):
    """Spans for every step: ``hookrun.step`` with a child per hook call
    (``hookrun.<phase> <hook>``) and one for the session run (``hookrun.run``).

    ``tracer_provider``: the provider to get the tracer from (default: the global
    one). Attributes: ``hookrun.step`` (the global step the step started at) on
    every span, ``hookrun.hook`` and ``hookrun.phase`` on the children, and
    ``attributes`` (a mapping) on the step span.

    Each attempt of a step has one span, at every ``max_in_flight``: the session enters
    the hook's ``step_context`` around it, so the step span is current while that
    step's hooks run (spans a hook starts nest under it) and is ended when the attempt
    ends. An attempt that raises or is cancelled has the error recorded on its span
    (status ERROR, an exception event), and so has the span of the hook call that raised
    it; a step re-run after a recovery has one span per attempt.

    Args:
        tracer_provider: The OpenTelemetry ``TracerProvider`` to get the tracer from.
            ``None``: the global one.
        step_span_name: The name of each step's span.
        attributes: More attributes of each step's span. ``None``: none.
    """

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    traces_before_run = True

    #: Right with steps in flight: a step's span lives in its ``step_context``'s frame.
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

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Ask for a trace of the step (the records the child spans are made from)."""
        return TRACE_STEP

    @contextlib.contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: RunMetadata) -> Iterator[Any]:
        """The step span, current for the whole step; its children when it ends."""
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode

        step = run_context.global_step
        span = self._tracer.start_span(self._name, attributes={**self._attributes, "hookrun.step": step})
        token = context.attach(trace.set_span_in_context(span))
        first = len(run_metadata.timings)
        wall_ns, now = time.time_ns(), anyio.current_time()
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
            parent = trace.set_span_in_context(span)
            failing = _failing_call(error)
            for record in run_metadata.timings[first:]:
                self._child(record, parent, step, wall_ns, now, error if (record.phase, record.name) == failing else None)
            span.end()

    def _child(
        self, record: TimingRecord, parent: Any, step: int, wall_ns: int, now: float, error: BaseException | None
    ) -> None:
        from opentelemetry.trace import Status, StatusCode

        def at(seconds: float) -> int:
            return wall_ns + int((seconds - now) * 1e9)

        if record.phase == "run":
            name, attributes = "hookrun.run", {"hookrun.step": step, "hookrun.phase": "run"}
        else:
            name = f"hookrun.{record.phase} {record.name}"
            attributes = {"hookrun.step": step, "hookrun.hook": record.name, "hookrun.phase": record.phase}
        child = self._tracer.start_span(name, context=parent, attributes=attributes, start_time=at(record.start))
        if error is not None:
            child.record_exception(error)
            child.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        child.end(end_time=at(record.end))


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
