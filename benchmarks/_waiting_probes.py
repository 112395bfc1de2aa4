"""The pieces of a waiting step, one probe each (``python -m benchmarks.waiting --probes``).

Each probe is the bare waiting step (``_waiting_cases.WaitingSession``) followed by one
piece of what a hooked step does after its wait, so that its figure over the bare
step is that piece's cost with the caches a wait leaves:

* ``scope``: entering and leaving one cancel scope of the running backend;
* ``copy_run``: ``copy_context()`` and one ``Context.run`` of a no-op;
* ``start_one``: one async no-op hook call started in place (a copied context, a coroutine);
* ``objects``: the objects a step makes (``SessionRunContext``, ``RunMetadata``, ``SessionRunValues``),
  and each alone (``context_object``, ``metadata_object``, ``values_tuple``);
* ``clock_2`` / ``clock_6``: two and six reads of ``time.perf_counter``;
* ``hist_1`` / ``hist_3``: one and three ``Histogram.add``;
* ``session_{on,off}_0``: a monitored session with no hooks, statistics on / off;
* ``sampled_{kind}_{K}`` / ``unsampled_{kind}_{K}``: K hooks of ``kind`` with every step timed
  (``sample_every=1``) / none timed after the first, so that their difference is what
  timing one step costs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable
from contextvars import copy_context
from typing import Any

from hookrun import (
    MonitoredSession,
    RunMetadata,
    RunOptions,
    SessionRunContext,
    SessionRunValues,
    StatisticsOptions,
)
from hookrun._dispatch._start import start_one
from hookrun._dispatch._wake import scope_factory
from hookrun._observe._histogram import Histogram

from ._waiting_cases import Stepper, WaitingSession, bare_case
from .cases import AsyncNoop, PlainNoop

__all__ = ["open_probes"]

_NEVER = 10**12


def _probe(name: str, seconds: float, piece: Callable[[], object]) -> Stepper:
    raw = WaitingSession(seconds)
    keys: list[Hashable] = []
    feeds: dict[Hashable, Any] = {}
    options, metadata = RunOptions(), RunMetadata()

    async def step() -> None:
        await raw.run(keys, feeds, options, metadata)
        piece()

    return Stepper(name, step, raw)


def _pieces() -> dict[str, Callable[[], object]]:
    new_scope, hook, perf, hist = scope_factory(), AsyncNoop(), time.perf_counter, Histogram()
    options = RunOptions()

    def scope() -> None:
        with new_scope():
            pass

    def copy_run() -> None:
        copy_context().run(int)

    def objects() -> None:
        ctx = SessionRunContext((None, None, None), None, 0, None)
        metadata = RunMetadata()
        tuple.__new__(SessionRunValues, (None, options, metadata, 1))
        del ctx

    def clock_6() -> None:
        perf(), perf(), perf(), perf(), perf(), perf()

    def hist_3() -> None:
        hist.add(1.2e-3)
        hist.add(1.1e-3)
        hist.add(3e-6)

    def ctx_only() -> None:
        SessionRunContext((None, None, None), None, 0, None)

    return {
        "scope": scope,
        "context_object": ctx_only,
        "metadata_object": RunMetadata,
        "values_tuple": lambda: tuple.__new__(SessionRunValues, (None, options, None, 1)),
        "copy_run": copy_run,
        "start_one": lambda: start_one(hook.before_run, (None,)),
        "objects": objects,
        "clock_2": lambda: (perf(), perf()),
        "clock_6": clock_6,
        "hist_1": lambda: hist.add(1.2e-3),
        "hist_3": hist_3,
    }


async def _session(
    stack: contextlib.AsyncExitStack, name: str, seconds: float, hooks: list[Any], statistics: Any
) -> Stepper:
    raw = WaitingSession(seconds)

    async def create() -> WaitingSession:
        return raw

    session = await stack.enter_async_context(
        MonitoredSession(create, hooks, statistics=statistics)
    )
    return Stepper(name, session.run, raw)


async def open_probes(stack: contextlib.AsyncExitStack, seconds: float) -> list[Stepper]:
    """The bare step and every probe, open in ``stack``."""
    probes = [
        bare_case(seconds),
        *(_probe(name, seconds, piece) for name, piece in _pieces().items()),
    ]
    probes += [
        await _session(stack, f"session_{'on' if on else 'off'}_0", seconds, [], on)
        for on in (True, False)
    ]
    for kind, cls in (("plain", PlainNoop), ("async", AsyncNoop)):
        for k in (1, 10):
            for name, every in (("sampled", 1), ("unsampled", _NEVER)):
                hooks = [cls() for _ in range(k)]
                probes.append(
                    await _session(
                        stack,
                        f"{name}_{kind}_{k}",
                        seconds,
                        hooks,
                        StatisticsOptions(sample_every=every),
                    )
                )
    return probes
