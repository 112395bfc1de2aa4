"""The cases of ``python -m benchmarks.remote``: the remote pairs and the in-process cross-check.

``step_pairs`` builds each remote case with its baseline (``_paired.Pair``) from a
raw remote call and a factory of the engine's step session; ``local_cases`` are the
same hooks on a session that returns at once; ``idle_step`` is an in-process step
that waits about as long as a Ray round trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio

from hookrun import MonitoredSession, SessionRunHook
from hookrun.hooks import LoggingTensorHook, StepCounterHook, StopAtStepHook

from ._harness import Case
from ._paired import Pair, Step
from .cases import bare_step, hooked_step, hooks_of

__all__ = ["FEED", "HOOK_SETS", "IDLE", "LOCAL", "LOCAL_BASE", "idle_step", "local_cases", "step_pairs", "worker_hooks"]

FEED = {"x": 1}
LOCAL_BASE = "local_bare"
LOCAL = ("noop_10", "worker_hooks")
IDLE = ("idle_noop_10", "idle_worker_hooks")
#: How long ``idle_step`` waits: about a Ray round trip here.
IDLE_SECONDS = 0.0013


def worker_hooks() -> list[SessionRunHook]:
    """The built-in hooks a remote worker usually runs (logging every 100 steps)."""
    return [
        StepCounterHook(every_n_steps=100),
        LoggingTensorHook(["y"], every_n_iter=100),
        StopAtStepHook(num_steps=10**12),
    ]


HOOK_SETS: dict[str, Callable[[], list[SessionRunHook]]] = {
    "hooked_0": list,
    "noop_10": hooks_of("async", 10),
    "worker_hooks": worker_hooks,
}


def step_pairs(
    raw: Step | None, make_session: Callable[[], Any], make_counter: Callable[[], Any] | None = None,
    prefix: str = "",
) -> list[Pair]:
    """The remote cases with their baselines, given a raw remote call, a factory of the
    engine's step session and (Ray) one of counters joining the benchmark's shared counter;
    ``prefix`` goes before every name.

    Every bare loop and monitored session gets a session of its own (closed at its end).
    """

    @contextlib.asynccontextmanager
    async def bare() -> AsyncIterator[Step]:
        session = make_session()
        try:
            yield lambda: session.run(["y"], FEED)
        finally:
            await _aclose(session)

    @contextlib.asynccontextmanager
    async def raw_call() -> AsyncIterator[Step]:
        assert raw is not None
        yield raw

    async def create() -> Any:
        return make_session()

    def hooked(name: str, shared: bool = False) -> Callable[[], contextlib.AbstractAsyncContextManager[Step]]:
        @contextlib.asynccontextmanager
        async def open_case() -> AsyncIterator[Step]:
            counter = None
            if shared:
                assert make_counter is not None
                counter = make_counter()
                await counter.get()  # joined before the steps
            try:
                async with MonitoredSession(create, HOOK_SETS[name](), step_counter=counter) as sess:
                    yield lambda: sess.run(["y"], FEED)
            finally:
                if counter is not None:
                    await counter.aclose()

        return open_case

    @contextlib.asynccontextmanager
    async def bare_increment() -> AsyncIterator[Step]:
        assert make_counter is not None
        session, counter = make_session(), make_counter()
        await counter.get()

        async def step() -> None:
            await session.run(["y"], FEED)
            await counter.increment()

        try:
            yield step
        finally:
            await _aclose(session)
            await counter.aclose()

    pairs = [] if raw is None else [Pair(f"{prefix}session", f"{prefix}raw", bare, raw_call)]
    pairs += [Pair(f"{prefix}{name}", f"{prefix}session", hooked(name), bare) for name in HOOK_SETS]
    if make_counter is not None:
        shared = hooked("worker_hooks", shared=True)
        pairs.append(Pair(f"{prefix}shared_worker_hooks", f"{prefix}session_inc", shared, bare_increment))
    return pairs


async def idle_step(feed: Mapping[str, Any]) -> dict[str, Any]:
    """An in-process step that really waits (``IDLE_SECONDS``), as a remote round trip does."""
    await anyio.sleep(IDLE_SECONDS)
    return {"y": feed["x"]}


async def _aclose(session: Any) -> None:
    close = getattr(session, "aclose", None)  # a DaskStepSession may own a client
    if close is not None:
        await close()


def local_cases() -> list[Case]:
    """The in-process cross-check: the same hooks on a session that returns at once."""
    return [Case(LOCAL_BASE, bare_step()), *(Case(f"local_{name}", hooked_step(HOOK_SETS[name])) for name in LOCAL)]
