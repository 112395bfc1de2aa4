"""Shared pieces of the steps-in-flight tests: raw sessions whose runs the test releases one
by one, and a hook that records its calls and asserts no other of its phases is running."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from hookrun import (
    AbortedError,
    RunMetadata,
    RunOptions,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

#: The name of the tasks that run ``iterate``'s steps with steps in flight.
RUNNER = "hookrun step runner"


def feeds(n: int) -> list[dict[str, int]]:
    """``n`` feed dicts ``{"i": i}``, the gates' indexes."""
    return [{"i": i} for i in range(n)]


def runners() -> int:
    """How many of ``iterate``'s runner tasks are running."""
    return sum(task.name == RUNNER for task in anyio.get_running_tasks())


class Gates:
    """A gate per feed ``i``: a run fed ``{"i": i}`` waits until the test opens gate ``i``."""

    def __init__(self) -> None:
        self.events: dict[int, anyio.Event] = {}
        self.started: list[int] = []
        self.finished: list[int] = []
        self.open_all = False

    def event(self, i: int) -> anyio.Event:
        if i not in self.events:
            self.events[i] = anyio.Event()
        return self.events[i]

    def open(self, *indexes: int) -> None:
        for i in indexes:
            self.event(i).set()

    async def pass_(self, i: int) -> None:
        self.started.append(i)
        if not self.open_all:
            await self.event(i).wait()
        else:
            await anyio.lowlevel.checkpoint()
        self.finished.append(i)


class GatedSession:
    """A raw session: ``run`` waits for the gate of its feed, then answers every key with ``i``
    (raises ``errors[i]`` instead when the feed is in ``errors`` for this session)."""

    def __init__(self, gates: Gates, index: int, errors: dict[int, BaseException] | None = None) -> None:
        self.gates = gates
        self.index = index
        self.errors = dict(errors or {})
        self.closed = 0
        self.runs: list[int] = []

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Hashable, Any], options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        i = int(feed_dict.get("i", -1))
        self.runs.append(i)
        await self.gates.pass_(i)
        error = self.errors.pop(i, None)
        if error is not None:
            raise error
        return [i for _ in fetches]

    async def aclose(self) -> None:
        self.closed += 1


class GatedCreator:
    """Makes ``GatedSession``s sharing one ``Gates``; ``errors[n]``: the errors of the n-th."""

    def __init__(self, gates: Gates, errors: dict[int, dict[int, BaseException]] | None = None) -> None:
        self.gates = gates
        self.errors = dict(errors or {})
        self.sessions: list[GatedSession] = []

    async def create_session(self) -> GatedSession:
        session = GatedSession(self.gates, len(self.sessions), self.errors.get(len(self.sessions)))
        self.sessions.append(session)
        await anyio.lowlevel.checkpoint()
        return session


class Recorder(SessionRunHook):
    """Records ``("before", step)``, ``("after", step)`` and ``("create", session index)``;
    every phase suspends twice and asserts no other phase of this hook is running."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.active = 0
        self.ends = 0
        self.exceptions: list[BaseException] = []

    async def _phase(self, name: str, value: int) -> None:
        assert self.active == 0, f"{name} {value} began while another phase of the hook ran"
        self.active += 1
        try:
            self.calls.append((name, value))
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
        finally:
            self.active -= 1

    async def after_create_session(self, session: Any, coord: Any) -> None:
        await self._phase("create", getattr(session, "index", -1))

    async def before_run(self, run_context: SessionRunContext) -> None:
        await self._phase("before", run_context.global_step)

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await self._phase("after", run_values.global_step)

    def end(self, session: Any) -> None:
        self.ends += 1

    def on_exception(self, session: Any, exception: BaseException) -> None:
        self.exceptions.append(exception)

    def steps(self, name: str) -> list[int]:
        return [value for phase, value in self.calls if phase == name]


async def release_in_order(gates: Gates, order: Sequence[int], waiting: int) -> None:
    """Once ``waiting`` runs have started, open the gates in ``order``, letting everything
    settle between two."""
    while len(gates.started) < waiting:
        await anyio.wait_all_tasks_blocked()
    for i in order:
        gates.open(i)
        await anyio.wait_all_tasks_blocked()


class WaitsOnce(SessionRunHook):
    """An async hook whose ``before_run`` (``after_run`` with ``phase="after_run"``) waits
    on its first call, long enough for the hook after it to fail meanwhile."""

    overlapping_steps = True

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.calls = 0
        self.cancelled = 0

    async def _maybe_wait(self) -> None:
        self.calls += 1
        if self.calls == 1:
            try:
                await anyio.sleep(5)
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise

    async def before_run(self, run_context: SessionRunContext) -> None:
        if self.phase == "before_run":
            await self._maybe_wait()

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self.phase == "after_run":
            await self._maybe_wait()


class FailsOnce(SessionRunHook):
    """An async hook that raises a recoverable error on its first call of ``phase``."""

    overlapping_steps = True

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.failed = False

    async def _maybe_fail(self) -> None:
        if not self.failed:
            self.failed = True
            await anyio.lowlevel.checkpoint()
            raise AbortedError(f"{self.phase} lost its worker")

    async def before_run(self, run_context: SessionRunContext) -> None:
        if self.phase == "before_run":
            await self._maybe_fail()

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self.phase == "after_run":
            await self._maybe_fail()
