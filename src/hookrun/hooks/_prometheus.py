"""``PrometheusHook``: counters and histograms of steps, hook calls and recoveries.

Like ``OpenTelemetryHook`` it asks for a trace of every step and reads the step's
``RunMetadata.timings``, so every hook call is observed, not a sample. A step is
observed once, one of two ways: through ``step_context`` when the session enters it
(one step at a time: the step's error, whatever raised it, is seen as it propagates),
or, when it does not (steps in flight), through the hook's own ``before_run`` and
``after_run``, with the step's start in ``run_context.step_state`` and the steps given
up without their ``after_run`` found by ``OpenSteps`` and counted as errors. Metrics
live in a registry of the hook's own unless one is given; ``port`` serves them on
``http://addr:port/metrics`` from ``begin`` until the session exits, whichever way
(``end``, ``on_exception``, or ``close()``). Needs ``hookrun[prometheus]``.

Invariants: a server started is always recorded on the hook, even when the ``begin``
that started it is cancelled while waiting for the thread, so every exit stops it. A
timing record is observed once: on the second path the records of a step's
``after_run`` phase that come after this hook's call are observed at the hook's next
call (``_tail``: state only ``after_run`` sets, read once that phase is over, since
phases never overlap).
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator, Sequence
from typing import Any

import anyio

from .._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    TimingRecord,
)
from .._validate import check_int, check_text
from ._common import check_address, import_optional
from ._open_steps import OpenSteps

__all__ = ["PrometheusHook"]

_TRACE = SessionRunArgs(options=RunOptions(trace=True))
#: What ``step_context`` leaves in a step's ``step_state``: the step is observed there.
_IN_CONTEXT = object()
#: Latency buckets (seconds): 50 us to 60 s.
DEFAULT_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)


class PrometheusHook(SessionRunHook):
    """Prometheus metrics of a monitored session (``prometheus-client``).

    Metrics (``namespace`` prefixes them, default ``hookrun``):
    ``hookrun_steps_total{outcome="ok"|"error"}``, ``hookrun_step_seconds``,
    ``hookrun_run_seconds`` (the session's own run), ``hookrun_hook_seconds{hook,
    phase}`` (``before_run`` / ``after_run`` calls), ``hookrun_sessions_created_total``
    and ``hookrun_recoveries_total`` (sessions created after the first one).

    ``registry``: a ``prometheus_client.CollectorRegistry`` (pass
    ``prometheus_client.REGISTRY`` to join the process-wide one); ``None`` makes
    one for this hook, :attr:`registry`. ``port``: serve ``/metrics`` there while
    the session runs (``0`` picks a free port, see :attr:`port`), bound to ``addr``
    (an IP address or a host name; loopback by default: pass ``"0.0.0.0"`` to expose
    it). The server stops on every exit of the session: a clean end, an error or a
    cancellation (in ``on_exception``), so the port can be served again at once. A port
    that cannot be served (already taken, say) is an ``OSError`` from ``begin`` naming
    the hook, the address and the port, with the original error's ``errno``.

    Every step is counted once, with its outcome. One step at a time, the session
    enters the hook's ``step_context`` around each step: a step that raises (its run
    or any hook call) counts ``outcome="error"``, and a step re-run after a recovery
    counts once per attempt. With steps in flight (``overlapping_steps = True``) the
    hook times each step from its own ``before_run`` to its own ``after_run`` (kept in
    ``run_context.step_state``); a step given up without its ``after_run`` (failed,
    cancelled, or re-run after its lane's recovery) counts ``outcome="error"`` once the
    hook learns it is over: at its next ``before_run`` or ``after_run``, or when the
    session exits. There, a step whose ``after_run`` phase fails after this hook's call
    was already counted ``ok``, and the timing records of a step given up are not seen
    (only ``after_run`` receives them).

    Args:
        registry: The ``prometheus_client.CollectorRegistry`` to register with. ``None``:
            one of its own.
        port: The port to serve ``/metrics`` on while the session runs (0: a free one).
            ``None``: none.
        addr: The address to serve on.
        namespace: The metrics' prefix.
        buckets: The bounds, in seconds, of the duration histograms' buckets.
    """

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    traces_before_run = True

    #: Right with steps in flight: what a step carries lives in its ``step_state``.
    overlapping_steps = True

    def __init__(
        self,
        registry: Any = None,
        port: int | None = None,
        addr: str = "127.0.0.1",
        *,
        namespace: str = "hookrun",
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> None:
        client = import_optional("prometheus_client", "prometheus", "PrometheusHook")
        check_int("PrometheusHook(port=...)", port, optional=True)
        if port is not None and port > 65535:
            raise ValueError(f"PrometheusHook(port=...) must be None or a port number 0..65535, got {port!r}")
        check_address("PrometheusHook(addr=...)", addr)
        check_text("PrometheusHook(namespace=...)", namespace, empty=True)
        self.registry = registry if registry is not None else client.CollectorRegistry()
        self._port, self._addr = port, addr
        self._server: Any = None
        self._thread: Any = None
        self.port: int | None = None  # the bound port while serving
        kw: dict[str, Any] = {"namespace": namespace, "registry": self.registry}
        self.steps = client.Counter("steps", "Steps run, by outcome", ["outcome"], **kw)
        self.step_seconds = client.Histogram("step_seconds", "Step latency", buckets=buckets, **kw)
        self.run_seconds = client.Histogram("run_seconds", "Session run latency", buckets=buckets, **kw)
        self.hook_seconds = client.Histogram(
            "hook_seconds", "Hook call latency", ["hook", "phase"], buckets=buckets, **kw
        )
        self.sessions = client.Counter("sessions_created", "Sessions created", **kw)
        self.recoveries = client.Counter("recoveries", "Sessions re-created after a failure", **kw)
        self._created = 0
        self._open = OpenSteps(self)
        #: The last step closed by ``after_run`` on the second path: its records and how
        #: many were observed (the calls after this hook's in its phase come later).
        self._tail: tuple[RunMetadata, int] | None = None

    async def begin(self) -> None:
        """Start serving ``/metrics`` when a port was given."""
        self._settle(None)  # what an earlier session left open (nothing, once it exited)
        self._tail = None
        if self._port is not None and self._server is None:
            # Not abandoned if cancelled: the thread's server is recorded before it returns.
            await anyio.to_thread.run_sync(self._serve, self._port)

    def _serve(self, port: int) -> None:
        """Start the server (in a worker thread) and record it on the hook at once."""
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(port, addr=self._addr, registry=self.registry)
        except OSError as exc:
            taken = " (another server listens there)" if exc.errno == errno.EADDRINUSE else ""
            raise OSError(
                exc.errno, f"PrometheusHook could not serve /metrics on {self._addr}:{port}: {exc}{taken}"
            ) from exc
        self.port = self._server.server_address[1]

    async def after_create_session(self, session: Any, coord: Any) -> None:
        """Count the session; every one after the first is a recovery."""
        self.sessions.inc()
        if self._created:
            self.recoveries.inc()
        self._created += 1

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Ask for a trace of the step; time it unless its ``step_context`` does."""
        state = run_context.step_state
        if state.get(self) is not _IN_CONTEXT:
            self._settle(run_context)
            self._open.open(run_context, anyio.current_time())
        return _TRACE

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Count the step and observe its records so far, unless its ``step_context`` does."""
        started = self._open.close(run_context)
        if started is None:
            return
        self._settle(run_context)
        self.steps.labels(outcome="ok").inc()
        self.step_seconds.observe(anyio.current_time() - started)
        metadata = run_values.run_metadata
        tail = self._tail
        self._tail = (metadata, tail[1] if tail is not None and tail[0] is metadata else 0)
        self._observe_tail()

    def _settle(self, run_context: SessionRunContext | None) -> None:
        """Observe what is over: the last step's remaining records, the steps given up."""
        self._observe_tail()
        gone = self._open.drain() if run_context is None else self._open.over(run_context)
        if gone:
            self.steps.labels(outcome="error").inc(len(gone))

    def _observe_tail(self) -> None:
        tail = self._tail
        if tail is not None:
            metadata, first = tail
            records = metadata.timings
            self._observe(records[first:])
            self._tail = (metadata, len(records))

    @contextlib.contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: RunMetadata) -> Iterator[None]:
        """Time the step; observe its hook calls and run when it ends."""
        run_context.step_state[self] = _IN_CONTEXT
        first = len(run_metadata.timings)
        started = anyio.current_time()
        try:
            yield
        except BaseException:
            self.steps.labels(outcome="error").inc()
            raise
        else:
            self.steps.labels(outcome="ok").inc()
            self.step_seconds.observe(anyio.current_time() - started)
        finally:
            self._observe(run_metadata.timings[first:])

    def _observe(self, records: Sequence[TimingRecord]) -> None:
        for record in records:
            took = max(record.end - record.start, 0.0)
            if record.phase == "run":
                self.run_seconds.observe(took)
            else:
                self.hook_seconds.labels(hook=record.name, phase=record.phase).observe(took)

    async def end(self, session: Any) -> None:
        """Count the steps still open as given up; stop serving."""
        self._settle(None)
        await anyio.to_thread.run_sync(self.close)

    async def on_exception(self, session: Any, exception: BaseException) -> None:
        """Count the steps still open as given up; stop serving: a session that failed or
        was cancelled answers no more scrapes."""
        self._settle(None)
        await anyio.to_thread.run_sync(self.close)

    def close(self) -> None:
        """Stop the ``/metrics`` server, if any (idempotent)."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is not None:
            server.shutdown()
            server.server_close()
            thread.join()
        self.port = None
