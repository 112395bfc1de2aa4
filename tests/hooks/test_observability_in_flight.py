"""OpenTelemetryHook and PrometheusHook with steps in flight, through the step_context the
session enters around each attempt of each step: one span and one observation per attempt
with its step's own number, the span current while that step's hooks run, a failed
attempt recorded as failed (with its error), and no span left open on any exit (end, a
step given up while others go on, an error, a cancellation), at N = 1, 4 and 16, on both
backends, through the SDK's in-memory exporter and a real scrape of the metrics server
on 127.0.0.1."""

from __future__ import annotations

import urllib.request
from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    MonitoredSession,
    RetryPolicy,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    UnavailableError,
)

pytestmark = pytest.mark.anyio

pytest.importorskip("opentelemetry.sdk.trace")
prometheus_client = pytest.importorskip("prometheus_client")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from hookrun.hooks import OpenTelemetryHook, PrometheusHook  # noqa: E402

NS = [1, 4, 16]
STEPS = 40
NO_WAIT = RetryPolicy(initial_delay=0.0, jitter=False)


class Boom(Exception):
    """A step's error that ends the session."""


class OutOfOrder:
    """A raw session: the run fed ``{"i": i}`` passes ``(7 * i) % 5`` checkpoints, so runs in
    flight end out of order; it raises ``fail[i]`` instead (once) when given."""

    def __init__(self, fail: dict[int, BaseException]) -> None:
        self.fail = fail

    async def run(self, fetches: Sequence[Hashable], feed_dict: Mapping[str, int], options: Any, metadata: Any) -> list[Any]:
        i = feed_dict["i"]
        for _ in range((7 * i) % 5):
            await anyio.lowlevel.checkpoint()
        error = self.fail.pop(i, None)
        if error is not None:
            raise error
        return [i for _ in fetches]


class Creator:
    def __init__(self, fail: dict[int, BaseException] | None = None) -> None:
        self.fail = dict(fail or {})

    async def create_session(self) -> OutOfOrder:
        return OutOfOrder(self.fail)


def fed(run_context: SessionRunContext) -> int:
    """The ``i`` the step was fed."""
    feeds = run_context.original_args.feed_dict
    assert feeds is not None
    return int(feeds["i"])


class Order(SessionRunHook):
    """Records the order of its calls, by the feed's ``i``: ``("attempt", i)`` when the session
    enters its step_context, ``("before", i)``, ``("after", i)``. Plain: right after a plain
    hook, nothing can come between that hook's call and its own."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    @contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: Any) -> Iterator[None]:
        self.calls.append(("attempt", fed(run_context)))
        yield

    def before_run(self, run_context: SessionRunContext) -> None:
        self.calls.append(("before", fed(run_context)))

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.calls.append(("after", fed(run_context)))

    def overlapped(self) -> bool:
        """Whether a later step's before_run came between a step's before_run and after_run."""
        open_steps: set[int] = set()
        for kind, i in self.calls:
            if kind == "attempt":
                continue
            if kind == "before":
                if open_steps:
                    return True
                open_steps.add(i)
            else:
                open_steps.discard(i)
        return False


class Spans(SpanProcessor):
    """Counts the spans started and ended (the exporter sees only the ended ones)."""

    def __init__(self) -> None:
        self.started = 0
        self.ended = 0

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


def tracing() -> tuple[TracerProvider, InMemorySpanExporter, Spans]:
    exporter, spans = InMemorySpanExporter(), Spans()
    provider = TracerProvider()
    provider.add_span_processor(spans)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter, spans


def hooks_for(provider: TracerProvider) -> tuple[OpenTelemetryHook, PrometheusHook]:
    return OpenTelemetryHook(tracer_provider=provider), PrometheusHook(port=0)


OK = ("hookrun_steps_total", (("outcome", "ok"),))


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return parse(response.read().decode())


def parse(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


async def run_steps(n: int, hooks: list[object], fail: dict[int, BaseException] | None = None) -> list[Any]:
    """Iterate ``STEPS`` feeds ``{"i": i}`` at ``max_in_flight=n``; return the results."""
    async with MonitoredSession(Creator(fail), hooks, max_in_flight=n, retry=NO_WAIT) as sess:
        results = [result async for result in sess.iterate(["x"], [{"i": i} for i in range(STEPS)])]
    return results


def step_of(span: ReadableSpan) -> int:
    """The span's ``hookrun.step``."""
    assert span.attributes is not None
    step = span.attributes["hookrun.step"]
    assert isinstance(step, int)
    return step


def step_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == "hookrun.step"]


def children(exporter: InMemorySpanExporter, step: ReadableSpan) -> list[str]:
    assert step.context is not None
    return sorted(
        span.name for span in exporter.get_finished_spans()
        if span.parent is not None and span.parent.span_id == step.context.span_id
    )


@pytest.mark.parametrize("n", NS)
async def test_one_span_per_step_with_its_number(n: int, caplog: pytest.LogCaptureFixture) -> None:
    """Each step has one span with its own hookrun.step and a child per hook call and run."""
    provider, exporter, spans = tracing()
    otel, _ = hooks_for(provider)
    order = Order()
    with anyio.fail_after(20):
        assert await run_steps(n, [otel, order]) == [[i] for i in range(STEPS)]
    assert order.overlapped() is (n > 1)
    steps = step_spans(exporter)
    assert sorted(step_of(span) for span in steps) == list(range(STEPS))
    for step in steps:
        assert step.status.status_code is StatusCode.UNSET
        assert children(exporter, step) == sorted([
            "hookrun.after_run Order", "hookrun.before_run OpenTelemetryHook", "hookrun.before_run Order",
            "hookrun.run",
        ])
        assert {step_of(child) for child in exporter.get_finished_spans()
                if child.parent is not None and step.context is not None
                and child.parent.span_id == step.context.span_id} == {step_of(step)}
    assert spans.started == spans.ended
    assert trace.get_current_span() is trace.INVALID_SPAN
    # Each span was made current and left in the same context (else OpenTelemetry logs it).
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelname == "ERROR"]


@pytest.mark.parametrize("n", NS)
async def test_a_step_given_up_while_others_go_on_is_one_failed_span(n: int) -> None:
    """A run lost to a recoverable error: its attempt's span is ERROR, its re-run's is OK."""
    provider, exporter, spans = tracing()
    otel, _ = hooks_for(provider)
    with anyio.fail_after(20):
        results = await run_steps(n, [otel], fail={5: UnavailableError("worker lost")})
    assert results == [[i] for i in range(STEPS)]
    steps = step_spans(exporter)
    failed = [span for span in steps if span.status.status_code is StatusCode.ERROR]
    assert len(steps) == STEPS + 1 and len(failed) == 1
    assert step_of(failed[0]) == 5
    assert sorted(step_of(span) for span in steps if span not in failed) == list(range(STEPS))
    assert spans.started == spans.ended


@pytest.mark.parametrize("n", NS)
async def test_no_span_is_left_open_when_a_step_fails(n: int) -> None:
    """A step's error ends the session: every span started is ended, the failed one ERROR."""
    provider, exporter, spans = tracing()
    otel, _ = hooks_for(provider)
    with anyio.fail_after(20), pytest.raises(Boom, match="bad batch"):
        await run_steps(n, [otel], fail={9: Boom("bad batch")})
    assert spans.started == spans.ended > 0
    failed = [span for span in step_spans(exporter) if span.status.status_code is StatusCode.ERROR]
    assert 9 in [step_of(span) for span in failed]
    ok = [span for span in step_spans(exporter) if span.status.status_code is StatusCode.UNSET]
    assert all(step_of(span) < 9 for span in ok)


@pytest.mark.parametrize("n", NS)
async def test_no_span_is_left_open_when_cancelled(n: int) -> None:
    """The iterating task cancelled mid-way: every span started is ended."""
    provider, exporter, spans = tracing()
    otel, _ = hooks_for(provider)
    with anyio.fail_after(20):
        with anyio.CancelScope() as scope:
            async with MonitoredSession(Creator(), [otel], max_in_flight=n) as sess:
                async for result in sess.iterate(["x"], [{"i": i} for i in range(STEPS)]):
                    if result == [12]:
                        scope.cancel()
    assert scope.cancelled_caught
    assert spans.started == spans.ended > 0
    assert len(step_spans(exporter)) >= 13


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("exit", ["end", "recovery", "error", "cancel"])
async def test_prometheus_counts_every_step_once_over_http(n: int, exit: str) -> None:
    """steps_total: ok = after_run calls, error = the other attempts entered, scraped at the end."""
    provider, _, _ = tracing()
    _, prom = hooks_for(provider)
    order = Order()
    fails: dict[str, dict[int, BaseException]] = {"recovery": {5: UnavailableError("lost")}, "error": {30: Boom("bad")}}
    fail = fails.get(exit, {})
    served: list[float] = []
    with anyio.fail_after(30), anyio.CancelScope() as scope:
        async with MonitoredSession(Creator(fail), [prom, order], max_in_flight=n, retry=NO_WAIT) as sess:
            try:
                async for result in sess.iterate(["x"], [{"i": i} for i in range(STEPS)]):
                    if result == [3]:  # a real scrape while steps are in flight
                        assert prom.port is not None
                        served.append((await anyio.to_thread.run_sync(scrape, prom.port))[OK])
                    if exit == "cancel" and result == [12]:
                        scope.cancel()
            except Boom:
                assert exit == "error"
    assert prom.port is None
    attempts = sum(kind == "attempt" for kind, _ in order.calls)
    done = sum(kind == "after" for kind, _ in order.calls)
    seen = parse(prometheus_client.generate_latest(prom.registry).decode())  # what it served last
    assert served and 1 <= served[0] <= done
    ok = seen[OK]
    error = seen.get(("hookrun_steps_total", (("outcome", "error"),)), 0.0)
    assert (ok, ok + error) == (done, attempts)
    assert seen[("hookrun_step_seconds_count", ())] == done
    if exit in ("end", "recovery"):
        assert done == STEPS and error == (exit == "recovery")
    # The entry's first session of each lane is no recovery: the counts are the statistics'.
    stats = sess.statistics()
    assert seen[("hookrun_recoveries_total", ())] == stats.recoveries == (exit == "recovery")
    assert seen[("hookrun_sessions_created_total", ())] == stats.sessions_created == n + stats.recoveries
    # Every after_run call, this hook's or after it, observed once; the hook makes none of its own.
    assert seen[("hookrun_hook_seconds_count", (("hook", "Order"), ("phase", "after_run")))] == done
    assert ("hookrun_hook_seconds_count", (("hook", "PrometheusHook"), ("phase", "after_run"))) not in seen


async def test_the_hooks_are_accepted_with_steps_in_flight() -> None:
    """Both declare overlapping_steps; a session with steps in flight takes them as they are."""
    for hook in (OpenTelemetryHook(), PrometheusHook()):
        assert hook.overlapping_steps is True
        MonitoredSession(Creator(), [hook], max_in_flight=4)


class Nested(SessionRunHook):
    """Starts a span of its own in before_run: it nests under the step's if that is current."""

    overlapping_steps = True

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    async def before_run(self, run_context: SessionRunContext) -> None:
        with self.tracer.start_as_current_span("my work"):
            await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("n", NS)
async def test_the_step_span_is_current_while_the_steps_hooks_run(n: int) -> None:
    """A span a hook starts in before_run is a child of its step's span."""
    provider, exporter, _ = tracing()
    otel, _ = hooks_for(provider)
    with anyio.fail_after(20):
        await run_steps(n, [otel, Nested(provider.get_tracer("user"))])
    steps = {span.context.span_id: step_of(span) for span in step_spans(exporter) if span.context is not None}
    mine = [span for span in exporter.get_finished_spans() if span.name == "my work"]
    assert len(mine) == STEPS
    assert sorted(steps.get(span.parent.span_id, -1) if span.parent else -1 for span in mine) == list(range(STEPS))


class Hangs(OutOfOrder):
    """As ``OutOfOrder``, but the run fed ``{"i": -1}`` sets ``started`` and waits forever."""

    def __init__(self, started: anyio.Event) -> None:
        super().__init__({})
        self.started = started

    async def run(self, fetches: Sequence[Hashable], feed_dict: Mapping[str, int], options: Any, metadata: Any) -> list[Any]:
        if feed_dict["i"] == -1:
            self.started.set()
            await anyio.sleep_forever()
        return await super().run(fetches, feed_dict, options, metadata)


@pytest.mark.parametrize("n", [4, 16])
async def test_a_step_whose_caller_is_cancelled_while_others_go_on(n: int) -> None:
    """One caller's step is cancelled; the others run on: it is one failed span and one error."""
    provider, exporter, spans = tracing()
    otel, prom = hooks_for(provider)
    started = anyio.Event()

    async def create() -> Hangs:
        return Hangs(started)

    with anyio.fail_after(20):
        async with MonitoredSession(create, [otel, prom], max_in_flight=n) as sess:
            async with anyio.create_task_group() as tg:
                tg.start_soon(sess.run, ["x"], {"i": -1})
                await started.wait()
                tg.cancel_scope.cancel()
            given_up = [span for span in step_spans(exporter) if span.status.status_code is StatusCode.ERROR]
            assert len(given_up) == 1  # recorded as the cancelled step ended, not at the exit
            assert prom.registry.get_sample_value("hookrun_steps_total", {"outcome": "error"}) == 1
            for i in range(5):
                assert await sess.run(["x"], {"i": i}) == [i]
    assert spans.started == spans.ended
    assert sorted(step_of(span) for span in step_spans(exporter)) == [0, 0, 1, 2, 3, 4]
    assert prom.registry.get_sample_value("hookrun_steps_total", {"outcome": "ok"}) == 5


@pytest.mark.parametrize("n", NS)
async def test_one_hook_serves_two_sessions_in_a_row(n: int) -> None:
    """The second session starts clean: every step of both has one span, all ended."""
    provider, exporter, spans = tracing()
    otel, _ = hooks_for(provider)
    with anyio.fail_after(20):
        with pytest.raises(Boom, match="bad batch"):
            await run_steps(n, [otel], fail={9: Boom("bad batch")})
        assert await run_steps(n, [otel]) == [[i] for i in range(STEPS)]
    assert spans.started == spans.ended
    ok = [step_of(span) for span in step_spans(exporter) if span.status.status_code is StatusCode.UNSET]
    assert sorted(step for step in ok if step >= 9) == list(range(9, STEPS))  # the second session's, once
    assert STEPS <= len(ok) <= STEPS + 9


@pytest.mark.parametrize("n", NS)
async def test_a_failed_steps_span_holds_its_error(n: int) -> None:
    """The span of a step whose run raised has the error as an exception event."""
    provider, exporter, _ = tracing()
    otel, _ = hooks_for(provider)
    with anyio.fail_after(20), pytest.raises(Boom, match="bad batch"):
        await run_steps(n, [otel], fail={9: Boom("bad batch")})
    failed = [span for span in step_spans(exporter) if step_of(span) == 9]
    messages = [event.attributes.get("exception.message") for event in failed[0].events if event.attributes]
    assert messages == ["bad batch"]


class FailsAfter(SessionRunHook):
    """Raises ``Boom("bad after_run")`` in the after_run of the step fed ``{"i": 9}``."""

    overlapping_steps = True

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if fed(run_context) == 9:
            raise Boom("bad after_run")


@pytest.mark.parametrize("n", NS)
async def test_a_failing_hook_call_is_recorded_on_its_step_and_its_child_span(n: int) -> None:
    """A hook's after_run raising fails its step: the step span and that call's span hold the error."""
    provider, exporter, spans = tracing()
    otel, prom = hooks_for(provider)
    with anyio.fail_after(20), pytest.raises(Boom, match="bad after_run"):
        await run_steps(n, [otel, prom, FailsAfter()])
    assert spans.started == spans.ended
    [step] = [span for span in step_spans(exporter) if step_of(span) == 9]
    assert step.status.status_code is StatusCode.ERROR
    [call] = [span for span in exporter.get_finished_spans() if span.name == "hookrun.after_run FailsAfter"
              and step.context is not None and span.parent is not None and span.parent.span_id == step.context.span_id]
    assert call.status.status_code is StatusCode.ERROR
    assert [event.attributes.get("exception.message") for event in call.events if event.attributes] == ["bad after_run"]
    assert prom.registry.get_sample_value("hookrun_steps_total", {"outcome": "error"}) >= 1
