"""The cases of ``python -m benchmarks.waiting``: one step each, around a raw run that waits.

Every case is opened once, in ``--copies`` copies (``open_cases``), and then stepped one
step at a time, each step on the next copy:
``Stepper.step()`` runs one step and returns its wall time minus the wait its raw
run timed itself, in µs. The raw run (``WaitingSession``) awaits
``anyio.sleep(seconds)`` and records how long that took, so that what is left is
what the case added around the wait, with the caches as cold as a step that
really waits leaves them.

* ``bare``: ``await raw.run(...)`` alone, the baseline of every async case;
* ``loop_K``: the hand-written loop, ``await h.before_run(ctx)`` for each of K async
  no-op hooks, the raw run, ``await h.after_run(ctx, values)`` for each;
* ``pluggy_K``: a ``before_run`` and an ``after_run`` hook call of K implementations
  around the raw run;
* ``{async,plain}_{on,off}_K``: a ``MonitoredSession`` with K async / plain no-op
  hooks, statistics on (the default) or off;
* ``awaiting_on_K``: the same with K async hooks whose methods await a coroutine that
  returns at once: they never wait either, but their code has an ``await``, so a step
  with more than one of them pays the cancel scope that lets a failing hook cancel a
  waiting one (no-op hooks, whose code cannot wait, need none).

Ignite runs its own synchronous loop, so it is stepped in blocks (``ignite_block``):
``Engine.run`` over a block of items whose process function sleeps with
``time.sleep`` and times that sleep; its baseline is the same loop without an
engine (``ignite_bare``).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

import anyio

from hookrun import MonitoredSession, RunMetadata, RunOptions

from .cases import AsyncNoop, AwaitsAtOnce, PlainNoop
from .peers import pluggy_hook

__all__ = ["Copies", "Stepper", "WaitingSession", "bare_case", "ignite_steppers", "open_cases"]

_perf = time.perf_counter


class WaitingSession:
    """A raw session whose run waits ``seconds`` and records how long the wait took."""

    __slots__ = ("seconds", "waited")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.waited = 0.0

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> Sequence[Hashable]:
        start = _perf()
        await anyio.sleep(self.seconds)
        self.waited = _perf() - start
        return fetches


class Stepper:
    """One case: ``step()`` runs one step and returns the µs it took beyond its own wait."""

    __slots__ = ("_raw", "_step", "name")

    def __init__(
        self, name: str, step: Callable[[], Awaitable[object]], raw: WaitingSession
    ) -> None:
        self.name, self._step, self._raw = name, step, raw

    async def step(self) -> float:
        start = _perf()
        await self._step()
        return (_perf() - start - self._raw.waited) * 1e6


def bare_case(seconds: float) -> Stepper:
    raw = WaitingSession(seconds)
    keys: list[Hashable] = []
    feeds: dict[Hashable, Any] = {}
    options, metadata = RunOptions(), RunMetadata()
    return Stepper("bare", lambda: raw.run(keys, feeds, options, metadata), raw)


def _loop(seconds: float, k: int) -> Stepper:
    raw = WaitingSession(seconds)
    hooks = [AsyncNoop() for _ in range(k)]
    keys: list[Hashable] = []
    feeds: dict[Hashable, Any] = {}
    options, metadata, ctx = RunOptions(), RunMetadata(), object()

    async def step() -> None:
        for hook in hooks:
            await hook.before_run(ctx)  # type: ignore[arg-type]
        values = await raw.run(keys, feeds, options, metadata)
        for hook in hooks:
            await hook.after_run(ctx, values)  # type: ignore[arg-type]

    return Stepper(f"loop_{k}", step, raw)


def _pluggy(seconds: float, k: int) -> Stepper:
    hook, raw, ctx = pluggy_hook(k, "hookrun_waiting"), WaitingSession(seconds), object()
    keys: list[Hashable] = []
    feeds: dict[Hashable, Any] = {}
    options, metadata = RunOptions(), RunMetadata()

    async def step() -> None:
        hook.before_run(run_context=ctx)
        values = await raw.run(keys, feeds, options, metadata)
        hook.after_run(run_context=ctx, run_values=values)

    return Stepper(f"pluggy_{k}", step, raw)


async def _hookrun(
    stack: contextlib.AsyncExitStack, seconds: float, kind: str, k: int, statistics: bool
) -> Stepper:
    raw = WaitingSession(seconds)
    cls = {"async": AsyncNoop, "plain": PlainNoop, "awaiting": AwaitsAtOnce}[kind]

    async def create() -> WaitingSession:
        return raw

    session = await stack.enter_async_context(
        MonitoredSession(create, [cls() for _ in range(k)], statistics=statistics)
    )
    return Stepper(f"{kind}_{'on' if statistics else 'off'}_{k}", session.run, raw)


class Copies:
    """One case made several times over, its steps taken from each in turn: a case's
    figure then does not hang on where one copy of its objects and code happens to lie
    in memory (two copies of the same session, side by side, differ by up to 10 %)."""

    __slots__ = ("_copies", "_next", "name")

    def __init__(self, copies: Sequence[Stepper]) -> None:
        self._copies, self._next, self.name = list(copies), 0, copies[0].name

    async def step(self) -> float:
        copy = self._copies[self._next]
        self._next = (self._next + 1) % len(self._copies)
        return await copy.step()


async def open_cases(
    stack: contextlib.AsyncExitStack,
    seconds: float,
    ks: Sequence[int],
    pluggy: bool,
    copies: int = 1,
    statistics_first: bool = True,
) -> list[Copies]:
    """Every async case, ``copies`` times over, open in ``stack`` (the sessions close with it),
    in the order they are returned.

    Of two sessions that differ only in their statistics, the one opened first runs a few
    per cent slower or faster than the other, the same way in every run (at K=100 by up
    to 9 %: where their objects lie), which would read as the statistics' cost. So
    ``statistics_first`` says which of each pair is opened first; the benchmark
    alternates it from chunk to chunk."""
    cases = [Copies([bare_case(seconds) for _ in range(copies)])]
    cases += [Copies([_loop(seconds, k) for _ in range(copies)]) for k in ks]
    if pluggy:
        cases += [Copies([_pluggy(seconds, k) for _ in range(copies)]) for k in ks]
    on_off = (True, False) if statistics_first else (False, True)
    kinds = [(kind, statistics) for kind in ("plain", "async") for statistics in on_off]
    for kind, statistics in [*kinds, ("awaiting", True)]:
        for k in ks:
            cases.append(Copies([await _hookrun(stack, seconds, kind, k, statistics) for _ in range(copies)]))
    return cases


# -- Ignite -------------------------------------------------------------------------------


class _SleepingProcess:
    """Ignite's process function: sleeps ``seconds``, adds the time it slept to ``waited``."""

    __slots__ = ("seconds", "waited")

    def __init__(self, seconds: float) -> None:
        self.seconds, self.waited = seconds, 0.0

    def __call__(self, engine: object, batch: object) -> None:
        start = _perf()
        time.sleep(self.seconds)
        self.waited += _perf() - start


def ignite_steppers(seconds: float, ks: Sequence[int]) -> dict[str, Callable[[int], float]]:
    """``name -> block(n)``: run ``n`` steps, return the µs per step beyond their waits.
    ``ignite_bare`` calls the process function in a plain loop; ``ignite_K`` is an
    ``Engine`` with K no-op handlers on each of ``ITERATION_STARTED`` and
    ``ITERATION_COMPLETED``. Raises ``ImportError`` without Ignite."""
    engine_mod = importlib.import_module("ignite.engine")
    Engine, Events = engine_mod.Engine, engine_mod.Events

    logging.getLogger("ignite").setLevel(logging.WARNING)

    def bare(n: int) -> float:
        process = _SleepingProcess(seconds)
        start = _perf()
        for batch in range(n):
            process(None, batch)
        return (_perf() - start - process.waited) * 1e6 / n

    def engine_block(k: int) -> Callable[[int], float]:
        process = _SleepingProcess(seconds)
        engine = Engine(process)
        for _ in range(k):
            engine.add_event_handler(Events.ITERATION_STARTED, _noop())
            engine.add_event_handler(Events.ITERATION_COMPLETED, _noop())

        def block(n: int) -> float:
            process.waited = 0.0
            data = list(range(n))
            start = _perf()
            engine.run(data, max_epochs=1)
            return (_perf() - start - process.waited) * 1e6 / n

        return block

    return {"ignite_bare": bare, **{f"ignite_{k}": engine_block(k) for k in ks}}


def _noop() -> Callable[[object], None]:
    def handler(engine: object) -> None:
        return None

    return handler
