"""The demo behind ``python -m hookrun demo``: a pipeline with hooks, a flaky worker and a clean end.

Needs no service: the "worker" is an in-process session that fails once, so the
demo shows recovery; the input is a memory stream, so the demo ends cleanly when
it is exhausted.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio

from ._coordinator import Coordinator
from ._errors import UnavailableError
from ._hooks import (
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from ._recovery import RetryPolicy
from ._session import MonitoredSession


class _Worker:
    def __init__(self, source: Any, fail_at: int | None) -> None:
        self.source, self.fail_at, self.calls = source, fail_at, 0

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Any, Any], options: RunOptions, run_metadata: RunMetadata
    ) -> list[Any]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise UnavailableError("worker lost (simulated)")
        batch = await self.source.receive()  # EndOfStream ends the demo cleanly
        values: dict[Hashable, Any] = {"rows": len(batch), "total": sum(batch)}
        return [values[key] for key in fetches]


class _Progress(SessionRunHook):
    async def after_create_session(self, session: Any, coord: Coordinator) -> None:
        print("session ready:", type(session).__name__)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs({"rows": "rows", "total": "total"})

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        print(f"step {run_values.global_step:3d}: {run_values.results}")

    async def end(self, session: Any) -> None:
        print("input exhausted: pipeline ended cleanly")


async def demo(steps: int = 20) -> None:
    send, receive = anyio.create_memory_object_stream[list[int]](max_buffer_size=steps)
    async with send:
        for i in range(steps):
            send.send_nowait(list(range(i, i + 4)))
    created = 0

    async def create() -> _Worker:
        nonlocal created
        created += 1
        return _Worker(receive, fail_at=3 if created == 1 else None)

    async with receive, MonitoredSession(create, [_Progress()], retry=RetryPolicy(initial_delay=0.01)) as sess:
        while not sess.should_stop():
            await sess.run()
    print(f"done: {created} sessions created (one recovery)")
