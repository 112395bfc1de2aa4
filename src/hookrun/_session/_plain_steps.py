"""The step of a monitored session whose hook calls are all plain functions: a plan
``run`` reads (``MonitoredSession.run`` checks that the step is the common one and calls
``_run_plain_step``), with the step's phases in one coroutine instead of one each.

``Stepping._hooked_step``'s path for plain calls, copied, so that the step needs no
coroutine of its own for its phases. The copy pays for itself on the row it serves,
plain hooks against pluggy (``python -m benchmarks.peers``), which misses its target of
0.5x without it: measured side by side in one process, once the session's state was in
slots, one plain hook costs 16-18 % less a step with it (0.47x pluggy on asyncio and
0.48x on trio, about 0.56x and 0.59x without), ten 13-14 % less. On a step that waits it
made one plain hook 17-23 % cheaper side by side with a few other cases, 3-8 % among all
of ``python -m benchmarks.waiting``'s, where more code competes for the caches.

It runs only the common step of an open session: untimed by the statistics, without
``options``, no hook asking for anything. Anything else goes the general way: ``run``
sends a call it refuses or recovers first, a timed step, one with options or a feed that
is not a dict there from the start; a step where a ``before_run`` asked for something
goes on there, with the calls already made (``_hooked_step(..., asked=...)``). Errors are counted in
their phase, a missing fetch is named, a recoverable error recovers, and the session is
released on every way out, as in ``run``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

from .._dispatch import _nest
from .._dispatch._merge import DEFAULT_OPTIONS
from .._dispatch._start import call_after, call_before
from .._hook_protocol import (
    RunMetadata,
    SessionRunContext,
    SessionRunValues,
)
from .._inside import STEPS_GET, STEPS_RESET, STEPS_SET
from ._diagnose import note_missing_fetch
from ._raw import check_values
from ._state import State
from ._stepping import NO_FEEDS

if TYPE_CHECKING:
    import anyio

    from .._coordinator._tasks import Coordinator
    from .._dispatch._plan import PhasePlan
    from .._global_step import LocalStepCounter
    from .._observe._statistics import Collector
    from ._lanes import Lane

__all__ = ["PlainSteps", "plain_steps"]

_OPEN = State.OPEN
_new_tuple = tuple.__new__  # builds a SessionRunValues without its Python-level __new__


def plain_steps(session: Any) -> bool:
    """Whether every hook call of ``session``'s steps is a plain function, with nothing
    entered or timed around a step and the session's own step counter."""
    return bool(
        session._hooked
        and not session._step_hooks
        and not session._time_before_run
        and session._local is not None
        and all(plan.plain is not None or not plan.calls for plan in (session._before, session._after))
    )


class PlainSteps:
    """The step of a session of plain hook calls (a mixin: the attributes below are the session's)."""

    _state: State
    _busy: bool
    _hook_stop: bool
    _recovers: bool
    _retry_on: tuple[type[BaseException], ...]
    _coord: Coordinator | None
    _stats: Collector
    _raw: Any
    _lane: Lane
    _local: LocalStepCounter | None
    _before: PhasePlan
    _after: PhasePlan
    _on_stop: Callable[[], None]
    _step_done: anyio.Event | None
    _step: Callable[..., Awaitable[Any]]
    _hooked_step: Callable[..., Awaitable[Any]]
    _recoverable_cause: Callable[[BaseException], BaseException | None]
    _fail_over: Callable[[], None]
    _with_recovery: Callable[..., Awaitable[Any]]

    async def _run_plain_step(
        self, fetches: object, feed_dict: Mapping[Any, Any] | None, run_metadata: RunMetadata | None
    ) -> Any:
        """``run``'s step when its checks found the common step of an open session whose hook
        calls are all plain functions (``run`` checks; this runs)."""
        stats = self._stats
        self._busy = True
        inside = STEPS_SET((*STEPS_GET(), self))
        try:
            raw, local = self._raw, self._local
            ctx = SessionRunContext((fetches, feed_dict, None), raw, local.value, self._on_stop)  # type: ignore[union-attr]
            metadata = RunMetadata() if run_metadata is None else run_metadata
            stats.steps += 1
            try:
                asked = call_before(self._before, ctx) if self._before.calls else None
            except BaseException as exc:
                stats.failed("before_run", exc)
                raise
            if asked is not None:  # a hook asked for something: the general step goes on from here
                stats.steps -= 1  # and counts it
                return await self._hooked_step(fetches, feed_dict, None, metadata, None, ctx, asked)
            where = "run"
            try:
                keys: list[Hashable] = []
                shape = None if fetches is None else _nest.index(fetches, "the caller", keys, {})
                try:
                    values = await raw.run(keys, feed_dict or NO_FEEDS, DEFAULT_OPTIONS, metadata)
                except KeyError as exc:  # a missing fetch: the caller's, as no hook asked for any
                    note_missing_fetch(exc, fetches, self._before.calls, ())
                    raise
                if (type(values) is not list and type(values) is not tuple) or len(values) != len(keys):
                    values = check_values(raw, keys, values)
                after_step = local.increment_nowait(1)  # type: ignore[union-attr]
                where = "after_run"
                if self._after.calls:
                    call_after(self._after, ctx, _new_tuple(SessionRunValues, (None, DEFAULT_OPTIONS, metadata, after_step)))
            except BaseException as exc:
                stats.failed(where, exc)
                raise
            return None if shape is None else _nest.pack(shape, values)
        except Exception as exc:
            if not self._recovers or self._recoverable_cause(exc) is None:
                raise
            self._fail_over()
            return await self._with_recovery(self._step, fetches, feed_dict, None, run_metadata, failed=exc)
        finally:
            STEPS_RESET(inside)
            self._busy = False
            if self._step_done is not None:  # a close from another task waits for this step
                self._step_done.set()
