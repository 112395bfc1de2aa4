"""Steps traced with OpenTelemetry: a span per step, with a child per hook call and one
for the session's run.

``main()`` runs three steps under ``OpenTelemetryHook`` and a ``StopAtStepHook``, with
an in-memory exporter standing in for yours (OTLP, Jaeger, a console...), and returns
the names of the spans it finished. Needs the ``otel`` extra.
"""

# --8<-- [start:program]
from __future__ import annotations

import sys

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import hookrun
from hookrun.hooks import OpenTelemetryHook, StopAtStepHook


async def step(feed: dict[str, float]) -> dict[str, float]:
    await anyio.sleep(0.001)  # a remote call, say
    return {"loss": 0.5}


async def create_session() -> hookrun.StepSession:
    return hookrun.StepSession(step)


async def main(steps: int = 3) -> list[str]:
    exporter = InMemorySpanExporter()  # in production: your exporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hooks = [OpenTelemetryHook(tracer_provider=provider), StopAtStepHook(last_step=steps)]
    async with hookrun.MonitoredSession(create_session, hooks) as session:
        while not session.should_stop():
            await session.run("loss")
    return [span.name for span in exporter.get_finished_spans()]


if __name__ == "__main__":
    names = anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
    print(f"{len(names)} spans: {sorted(set(names))}")
# --8<-- [end:program]
