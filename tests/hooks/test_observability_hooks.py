"""OpenTelemetryHook (span tree through the SDK's in-memory exporter) and PrometheusHook
(metrics scraped over HTTP from 127.0.0.1), on both backends."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import MonitoredSession, RetryPolicy, SessionRunHook, SingularMonitoredSession

pytestmark = pytest.mark.anyio

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")
prometheus_client = pytest.importorskip("prometheus_client")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from hookrun.hooks import OpenTelemetryHook, PrometheusHook  # noqa: E402


class Session:
    def __init__(self, fail_at: tuple[int, ...] = ()) -> None:
        self.runs, self.fail_at = 0, fail_at

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> Any:
        self.runs += 1
        if self.runs in self.fail_at:
            raise hookrun.UnavailableError("worker lost")
        await anyio.lowlevel.checkpoint()
        return list(fetches)


class Creator:
    def __init__(self, **kw: Any) -> None:
        self.session = Session(**kw)

    async def create_session(self) -> Session:
        return self.session


class Traced(SessionRunHook):
    """Starts a span of its own in before_run (it must nest under the step's)."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    async def before_run(self, run_context: Any) -> None:
        with self.tracer.start_as_current_span("my work"):
            await anyio.lowlevel.checkpoint()

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if run_values.global_step == 2:
            raise ValueError("bad batch")


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter


async def test_span_tree_attributes_and_errors() -> None:
    tp, exporter = provider()
    hook = OpenTelemetryHook(tracer_provider=tp, attributes={"worker": "w1"})
    mine = Traced(tp.get_tracer("user"))
    with anyio.fail_after(10):
        async with SingularMonitoredSession(Creator(), [hook, mine]) as sess:
            await sess.run(["x"])
            assert trace.get_current_span() is trace.INVALID_SPAN  # nothing leaked to the caller
            with pytest.raises(ValueError, match="bad batch"):
                await sess.run(["x"])
            assert trace.get_current_span() is trace.INVALID_SPAN
    spans: list[Any] = list(exporter.get_finished_spans())
    steps = [s for s in spans if s.name == "hookrun.step"]
    assert [s.attributes["hookrun.step"] for s in steps] == [0, 1]
    assert steps[0].attributes["worker"] == "w1"
    for step in steps:
        children = {s.name for s in spans if s.parent is not None and s.parent.span_id == step.context.span_id}
        assert children == {
            "hookrun.before_run OpenTelemetryHook", "hookrun.before_run Traced", "hookrun.run",
            "hookrun.after_run OpenTelemetryHook", "hookrun.after_run Traced", "my work",
        }
        assert all(s.context.trace_id == step.context.trace_id for s in spans if s.parent is not None
                   and s.parent.span_id == step.context.span_id)
    assert steps[0].status.status_code is StatusCode.UNSET
    assert steps[1].status.status_code is StatusCode.ERROR
    assert any(event.name == "exception" for event in steps[1].events)
    failed = [s for s in spans if s.name == "hookrun.after_run Traced" and s.parent.span_id == steps[1].context.span_id]
    assert failed[0].status.status_code is StatusCode.ERROR
    assert failed[0].attributes["hookrun.hook"] == "Traced" and failed[0].attributes["hookrun.phase"] == "after_run"
    ok = [s for s in spans if s.name == "hookrun.after_run Traced" and s.parent.span_id == steps[0].context.span_id]
    assert ok[0].status.status_code is StatusCode.UNSET
    for span in spans:
        assert span.start_time <= span.end_time


async def test_prometheus_metrics_over_http() -> None:
    hook = PrometheusHook(port=0)
    creator = Creator(fail_at=(2,))
    with anyio.fail_after(20):
        async with MonitoredSession(creator, [hook], retry=RetryPolicy(initial_delay=0.0, jitter=False)) as sess:
            for _ in range(3):
                await sess.run(["x"])
            assert hook.port is not None and hook.port > 0
            url = f"http://127.0.0.1:{hook.port}/metrics"
            body = await anyio.to_thread.run_sync(lambda: urllib.request.urlopen(url, timeout=10).read().decode())
    assert hook.port is None  # the server closed at end
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("hookrun_steps_total", (("outcome", "ok"),))] == 3
    assert samples[("hookrun_steps_total", (("outcome", "error"),))] == 1
    assert samples[("hookrun_step_seconds_count", ())] == 3
    assert samples[("hookrun_run_seconds_count", ())] == 4  # the lost run was timed too
    assert samples[("hookrun_hook_seconds_count", (("hook", "PrometheusHook"), ("phase", "before_run")))] == 4
    assert samples[("hookrun_sessions_created_total", ())] == 2
    assert samples[("hookrun_recoveries_total", ())] == 1


async def test_prometheus_validation_and_own_registries() -> None:
    with pytest.raises(ValueError, match="port"):
        PrometheusHook(port=-1)
    a, b = PrometheusHook(), PrometheusHook()  # each its own registry: no duplicate metrics
    assert a.registry is not b.registry
    a.close()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"addr": "not an address"}, ValueError, r"PrometheusHook\(addr=\.\.\.\) must be an IP address .* got 'not an address'"),
        ({"addr": "[::1]"}, ValueError, r"addr=\.\.\.\) must be an IP address .*\(without the brackets\)"),
        ({"addr": ""}, ValueError, r"PrometheusHook\(addr=\.\.\.\) must be a non-empty string"),
        ({"addr": 127001}, TypeError, r"PrometheusHook\(addr=\.\.\.\) must be a string, got 127001"),
        ({"port": 65536}, ValueError, r"PrometheusHook\(port=\.\.\.\) must be None or a port number 0\.\.65535, got 65536"),
        ({"port": -1}, ValueError, r"PrometheusHook\(port=\.\.\.\) must be None or an int >= 0, got -1"),
        ({"port": True}, TypeError, r"PrometheusHook\(port=\.\.\.\) must be None or an int >= 0, got True"),
        ({"port": 8000.0}, TypeError, r"PrometheusHook\(port=\.\.\.\) must be None or an int >= 0, got 8000\.0"),
    ],
)
def test_prometheus_refuses_a_bad_address_or_port_when_built(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    """A listen address or port that cannot be served is refused at construction, named."""
    with pytest.raises(error, match=match):
        PrometheusHook(**kwargs)


@pytest.mark.parametrize("addr", ["127.0.0.1", "::1", "0.0.0.0", "localhost", "metrics.example.com"])
def test_prometheus_takes_an_ip_address_or_a_host_name(addr: str) -> None:
    """IPv4, IPv6 and host names are taken as they are (no name is looked up when built)."""
    PrometheusHook(addr=addr).close()


def test_import_hookrun_does_not_import_the_backends() -> None:
    code = (
        "import sys, hookrun, hookrun.hooks; "
        "bad = [m for m in sys.modules if m.startswith(('opentelemetry', 'prometheus_client'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
