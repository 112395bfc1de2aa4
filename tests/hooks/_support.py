"""Shared helpers for the hook tests: a fake clock, a recording summary writer,
step contexts for calling hooks directly, a monitored-session driver that
works with a sync step function (run in a thread) or a remote, async session, and a
gated session that records what each run fetched."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel

import hookrun
from hookrun import RunMetadata, RunOptions, SessionRunArgs, SessionRunContext, SessionRunValues
from tests.session._in_flight_support import GatedCreator, GatedSession, Gates


class FakeClock:
    """A clock tests move by hand: ``clock()`` returns ``now``."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ListWriter:
    """A ``SummaryWriter`` that keeps every scalar in ``scalars`` as (tag, value, step)."""

    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []
        self.flushes = 0
        self.closed = False

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        self.closed = True

    def steps(self, tag: str) -> list[int]:
        return [step for t, _, step in self.scalars if t == tag]


def context(step: int = 0, session: object = None) -> SessionRunContext:
    """A step context at global step ``step``."""
    return SessionRunContext(SessionRunArgs(), session, global_step=step)


def values(
    step: int, results: object = None, metadata: RunMetadata | None = None
) -> SessionRunValues:
    """Run values for a run that reached global step ``step``."""
    return SessionRunValues(results, RunOptions(), metadata or RunMetadata(), step)


class RemoteSession:
    """An async session standing in for a remote worker: each run awaits a checkpoint."""

    def __init__(self, produce: Callable[[int], Mapping[Any, Any]]) -> None:
        self.produce = produce
        self.runs = 0
        self.feeds: list[dict[Hashable, Any]] = []

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        await anyio.lowlevel.checkpoint()
        produced = self.produce(self.runs)
        self.runs += 1
        self.feeds.append(dict(feed_dict))
        return [feed_dict[key] if key in feed_dict else produced[key] for key in fetches]


def make_session(kind: str, produce: Callable[[int], Mapping[Any, Any]]) -> Any:
    """A session of ``kind`` ("sync": StepSession over a sync function; "remote": async)."""
    if kind == "remote":
        return RemoteSession(produce)
    runs = [0]

    def step_fn(feed_dict: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        produced = dict(produce(runs[0]))
        runs[0] += 1
        produced.update(feed_dict)
        return produced

    return hookrun.StepSession(step_fn)


async def drive(
    hooks: Sequence[object],
    produce: Callable[[int], Mapping[Any, Any]],
    *,
    kind: str = "sync",
    max_steps: int = 1000,
    fetches: object = None,
    step_counter: Any = None,
) -> list[Any]:
    """Run a monitored session until it stops (or ``max_steps``); return the caller's results."""
    session = make_session(kind, produce)

    async def create() -> Any:
        return session

    results: list[Any] = []
    with anyio.fail_after(10):
        async with hookrun.MonitoredSession(create, hooks, step_counter=step_counter) as sess:
            while not sess.should_stop() and len(results) < max_steps:
                results.append(await sess.run(fetches))
    return results


async def settle(result: object) -> object:
    """Await a hook method's result if it is awaitable (hook methods may be sync or async)."""
    if inspect.isawaitable(result):
        return await result
    return result


class FetchLog(GatedSession):
    """A gated session that records, per feed, the keys it was asked for."""

    fetched: dict[int, list[Hashable]]

    async def run(
        self, fetches: Sequence[Hashable], feed_dict: Mapping[Hashable, Any], options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        self.fetched[int(feed_dict["i"])] = list(fetches)
        return await super().run(fetches, feed_dict, options, run_metadata)


class FetchLogCreator(GatedCreator):
    """Makes ``FetchLog`` sessions sharing one ``fetched``: feed -> the keys its run was asked for."""

    def __init__(self, gates: Gates, errors: dict[int, dict[int, BaseException]] | None = None) -> None:
        super().__init__(gates, errors)
        self.fetched: dict[int, list[Hashable]] = {}

    async def create_session(self) -> GatedSession:
        session = FetchLog(self.gates, len(self.sessions), self.errors.get(len(self.sessions)))
        session.fetched = self.fetched
        self.sessions.append(session)
        return session


def fetching(fetched: dict[int, list[Hashable]]) -> list[int]:
    """The feeds whose run was asked for some key."""
    return sorted(i for i, keys in fetched.items() if keys)
