"""``PrometheusHook``: counters and histograms of steps, hook calls and recoveries.

Like ``OpenTelemetryHook`` it asks for a trace of every step and reads the step's
``RunMetadata.timings`` when the step ends (``step_context``), so every hook call
is observed, not a sample. Metrics live in a registry of the hook's own unless
one is given; ``port`` serves them on ``http://addr:port/metrics`` from
``begin`` until the session exits, whichever way (``end``, ``on_exception``, or
``close()``). Needs ``hookrun[prometheus]``.

Invariants: a server started is always recorded on the hook, even when the ``begin``
that started it is cancelled while waiting for the thread, so every exit stops it. What
a step needs (its start, its first record) lives in the frame of its ``step_context``,
never on the hook, so steps in flight are observed apart, each once.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anyio

from .._hook_protocol import (
    RunMetadata,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
)
from .._validate import check_int, check_text
from ._common import TRACE_STEP, check_address, import_optional

__all__ = ["PrometheusHook"]

#: Latency buckets (seconds): 50 us to 60 s.
DEFAULT_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)


class PrometheusHook(SessionRunHook):
    """Prometheus metrics of a monitored session (``prometheus-client``).

    Metrics (``namespace`` prefixes them, default ``hookrun``):
    ``hookrun_steps_total{outcome="ok"|"error"}``, ``hookrun_step_seconds``,
    ``hookrun_run_seconds`` (the session's own run), ``hookrun_hook_seconds{hook,
    phase}`` (``before_run`` / ``after_run`` calls), ``hookrun_sessions_created_total``
    and ``hookrun_recoveries_total`` (sessions re-created after a failure: created after
    the first one of each lane).

    ``registry``: a ``prometheus_client.CollectorRegistry`` (pass
    ``prometheus_client.REGISTRY`` to join the process-wide one); ``None`` makes
    one for this hook, :attr:`registry`. ``port``: serve ``/metrics`` there while
    the session runs (``0`` picks a free port, see :attr:`port`), bound to ``addr``
    (an IP address or a host name; loopback by default: pass ``"0.0.0.0"`` to expose
    it). The server stops on every exit of the session: a clean end, an error or a
    cancellation (in ``on_exception``), so the port can be served again at once. A port
    that cannot be served (already taken, say) is an ``OSError`` from ``begin`` naming
    the hook, the address and the port, with the original error's ``errno``.

    Every attempt of a step is counted once, with its outcome: the session enters the
    hook's ``step_context`` around each attempt of each step, at every ``max_in_flight``,
    and leaves it when the attempt ends. An attempt that raises (its run or any hook
    call) or is cancelled counts ``outcome="error"``, so a step re-run after a recovery
    counts once per attempt; ``step_seconds`` times the attempts that return.

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

    #: Right with steps in flight: a step's timing lives in its ``step_context``'s frame.
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
        self._lanes = 1  # the sessions the entry creates, one a lane (``bind_lanes``)

    def bind_lanes(self, lanes: Callable[[], Sequence[object]]) -> None:
        """Called once by a monitored session with steps in flight: its entry creates one
        session a lane, ``len(lanes())`` of them, none of them a recovery."""
        self._lanes = len(lanes())

    async def begin(self) -> None:
        """Start serving ``/metrics`` when a port was given."""
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
        """Count the session; every one after the first of each lane is a recovery."""
        self.sessions.inc()
        if self._created >= self._lanes:
            self.recoveries.inc()
        self._created += 1

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        """Ask for a trace of the step."""
        return TRACE_STEP

    @contextlib.contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: RunMetadata) -> Iterator[None]:
        """Time the step; observe its hook calls and run when it ends."""
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
            for record in run_metadata.timings[first:]:
                took = max(record.end - record.start, 0.0)
                if record.phase == "run":
                    self.run_seconds.observe(took)
                else:
                    self.hook_seconds.labels(hook=record.name, phase=record.phase).observe(took)

    async def end(self, session: Any) -> None:
        """Stop serving."""
        await anyio.to_thread.run_sync(self.close)

    async def on_exception(self, session: Any, exception: BaseException) -> None:
        """Stop serving: a session that failed or was cancelled answers no more scrapes."""
        await anyio.to_thread.run_sync(self.close)

    def close(self) -> None:
        """Stop the ``/metrics`` server, if any (idempotent)."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is not None:
            server.shutdown()
            server.server_close()
            thread.join()
        self.port = None
