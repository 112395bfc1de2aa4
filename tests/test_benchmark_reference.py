"""The benchmark's reference step (``benchmarks/reference.py``) is a yardstick for the
targets, so it must really do a step's work: a floor that skipped work would flatter
hookrun's figures read at the anchors' speed."""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from benchmarks.cases import AsyncFetch, PlainFetch, TrivialSession
from benchmarks.reference import ReferenceSession

from hookrun import SessionRunHook

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


class Probe(SessionRunHook):
    """Records its calls; optionally waits, sets a context variable, or asks to stop."""

    def __init__(self, log: list[Any], name: str, *, waits: bool = False, sets: bool = False) -> None:
        self.log, self.name, self.waits, self.sets = log, name, waits, sets

    async def before_run(self, run_context: Any) -> None:
        self.log.append(("before", self.name, run_context.global_step, VAR.get()))
        if self.sets:
            VAR.set(self.name)
        if self.waits:
            await anyio.lowlevel.checkpoint()
        self.log.append(("started", self.name, VAR.get()))

    async def after_run(self, run_context: Any, run_values: Any) -> None:
        self.log.append(("after", self.name, run_values.global_step))


@pytest.mark.parametrize("copy_contexts", [False, True])
async def test_fetching_hooks_get_their_own_values(copy_contexts: bool) -> None:
    hooks: list[AsyncFetch | PlainFetch] = [AsyncFetch(0), PlainFetch(1), AsyncFetch(2)]
    async with anyio.create_task_group() as tg:
        session = ReferenceSession(TrivialSession(), hooks, tg, copy_contexts=copy_contexts)
        await session.run()
    # TrivialSession returns each key as its value; each hook keeps its third ("shared").
    assert [hook.seen for hook in hooks] == ["shared"] * 3


@pytest.mark.parametrize("copy_contexts", [False, True])
async def test_phases_run_concurrently_in_order_and_count_steps(copy_contexts: bool) -> None:
    log: list[Any] = []
    hooks = [Probe(log, "a", waits=True), Probe(log, "b"), Probe(log, "c", waits=True)]
    async with anyio.create_task_group() as tg:
        session = ReferenceSession(TrivialSession(), hooks, tg, copy_contexts=copy_contexts)
        await session.run()
        await session.run()
    befores = [entry for entry in log if entry[0] == "before"]
    assert [(name, step) for _, name, step, _ in befores] == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1), ("c", 1)]
    afters = [entry for entry in log if entry[0] == "after"]
    assert afters == [("after", name, step) for step in (1, 2) for name in "abc"]


async def test_a_phase_is_concurrent() -> None:
    """The first hook waits for an event only the last one sets: a sequential step deadlocks."""
    released = anyio.Event()

    class Waiter(SessionRunHook):
        async def before_run(self, run_context: Any) -> None:
            await released.wait()

    class Releaser(SessionRunHook):
        async def before_run(self, run_context: Any) -> None:
            released.set()

    async with anyio.create_task_group() as tg:
        session = ReferenceSession(TrivialSession(), [Waiter(), Releaser()], tg, copy_contexts=True)
        with anyio.fail_after(5):
            await session.run()


async def test_copied_contexts_keep_hooks_apart() -> None:
    log: list[Any] = []
    hooks = [Probe(log, "a", sets=True), Probe(log, "b", sets=True, waits=True), Probe(log, "c")]
    async with anyio.create_task_group() as tg:
        session = ReferenceSession(TrivialSession(), hooks, tg, copy_contexts=True)
        await session.run()
    assert [entry[3] for entry in log if entry[0] == "before"] == ["unset"] * 3
    assert ("started", "b", "b") in log
    assert VAR.get() == "unset"


@pytest.mark.parametrize("native", [False, True])
async def test_pooled_worker_probes_run_every_hook_to_its_end(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The suspend-once floors (``probe_pool_*``) finish every hook of both phases, every step."""
    from benchmarks import cases

    finished: list[str] = []

    async def before_run(self: Any, run_context: Any) -> None:
        await anyio.lowlevel.checkpoint()
        finished.append("before")

    async def after_run(self: Any, run_context: Any, run_values: Any) -> None:
        await anyio.lowlevel.checkpoint()
        finished.append("after")

    monkeypatch.setattr(cases.SuspendOnce, "before_run", before_run)
    monkeypatch.setattr(cases.SuspendOnce, "after_run", after_run)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            probe = cases._pooled_workers(10, contexts=True, native=native)(tg)
            for step in range(1, 4):
                await probe()
                assert finished.count("before") == finished.count("after") == 10 * step
            tg.cancel_scope.cancel()
