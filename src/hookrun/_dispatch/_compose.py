"""Hooks built from hooks: ``in_thread`` (blocking methods in worker threads) and
``sequential`` (members one after another in every phase).

Both expose only the methods their members implement, so the dispatcher still
calls nothing it does not need; ``on_exception`` is forwarded too (``sequential``
calls every member's, in order, even after one of them failed). ``sequential`` merges its members' requests
into one ``SessionRunArgs`` and hands each member back exactly its own results.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from .._hook_protocol import HOOK_METHODS, SessionRunArgs, SessionRunContext, SessionRunValues
from ._merge import check_options, merge_feeds, merge_options
from ._plan import Call, hook_name, plan_hooks

__all__ = ["in_thread", "sequential"]


class _ThreadedHook:
    """Runs every method of a blocking hook in a worker thread."""

    def __init__(self, hook: object) -> None:
        plans = plan_hooks([hook])
        self.hook = hook
        self.name = hook_name(hook)
        #: Steps in flight: as safe as the hook it runs.
        self.overlapping_steps = getattr(hook, "overlapping_steps", False) is True
        for phase, plan in plans.items():
            for call in plan.calls:
                if call.is_async:
                    raise TypeError(
                        f"in_thread() runs blocking plain-function hooks in threads, but "
                        f"{self.name}.{phase} is async; pass the hook directly instead"
                    )
                setattr(self, phase, _threaded(call.fn))

    def __repr__(self) -> str:
        return f"in_thread({self.hook!r})"


def _threaded(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def run_in_thread(*args: Any) -> Any:
        # Cancelled (hook_timeout, a failing hook of the phase, a cancellation from outside):
        # the caller goes on at once; the thread runs to its end and its result is dropped.
        return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)

    return run_in_thread


def in_thread(hook: object) -> object:
    """Wrap a hook whose methods block so that each call runs in a worker thread.

    A call that is cancelled (``hook_timeout``, another hook of its phase failing, a
    cancellation from outside) frees the session at once; the thread cannot be stopped,
    so the method runs on to its end in the background and what it returns is dropped.

    Args:
        hook: A hook whose methods block (plain ``def`` methods doing I/O or heavy work).

    Returns:
        A hook whose every method call runs the hook's method in a worker thread.
    """
    return _ThreadedHook(hook)


class _SequentialHook:
    """Runs its members one after another, in order, in every phase."""

    def __init__(self, hooks: Sequence[object]) -> None:
        self.members = tuple(hooks)
        self.name = "sequential(" + ", ".join(hook_name(hook) for hook in self.members) + ")"
        #: Steps in flight: safe when every member is.
        self.overlapping_steps = all(getattr(hook, "overlapping_steps", False) is True for hook in self.members)
        plans = plan_hooks(self.members)
        self._calls = {phase: plans[phase].calls for phase in HOOK_METHODS}
        for phase in ("begin", "after_create_session", "end"):
            if self._calls[phase]:
                setattr(self, phase, functools.partial(self._chain, self._calls[phase]))
        if self._calls["before_run"]:
            self.before_run = self._before_run
        if self._calls["after_run"] or self._calls["before_run"]:
            self.after_run = self._after_run
        if self._calls["on_exception"]:
            self.on_exception = self._on_exception

    def __repr__(self) -> str:
        return self.name

    async def _chain(self, calls: Sequence[Call], *args: Any) -> None:
        for call in calls:
            await _call(call, args)

    async def _on_exception(self, session: Any, exception: BaseException) -> None:
        """Every member's ``on_exception`` in order, even after one failed (each is a
        clean-up); the first error is raised with the others as notes."""
        failures: list[BaseException] = []
        for call in self._calls["on_exception"]:
            try:
                await _call(call, (session, exception))
            except Exception as exc:
                failures.append(exc)
        if failures:
            for other in failures[1:]:
                failures[0].add_note(f"hookrun: another member's on_exception also failed: {other!r}")
            raise failures[0]

    async def _before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        requests: list[tuple[Call, SessionRunArgs]] = []
        for call in self._calls["before_run"]:
            request = await _call(call, (run_context,))
            if request is not None:
                if not isinstance(request, SessionRunArgs):
                    raise TypeError(
                        f"hook {call.name}: before_run returned {type(request).__name__}; "
                        "expected None or hookrun.SessionRunArgs"
                    )
                requests.append((call, request))
        if not requests:
            return None
        fetches = [None] * len(self.members)
        for call, request in requests:
            fetches[call.index] = request.fetches
        feeds = merge_feeds(
            [(f"hook {call.name}", r.feed_dict) for call, r in requests if r.feed_dict], None
        )
        options = [
            (f"hook {call.name}", check_options(r.options, f"hook {call.name}"))
            for call, r in requests
            if r.options is not None
        ]
        merged = merge_options(options) if options else None
        return SessionRunArgs(tuple(fetches), feeds, merged)

    async def _after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        results = run_values.results
        for call in self._calls["after_run"]:
            mine = results[call.index] if results is not None else None
            values = SessionRunValues(
                mine, run_values.options, run_values.run_metadata, run_values.global_step
            )
            await _call(call, (run_context, values))


async def _call(call: Call, args: tuple[Any, ...]) -> Any:
    result = call.fn(*args)
    if call.is_async:
        result = await result
    return result


def sequential(*hooks: object) -> object:
    """A hook that runs ``hooks`` one after another, in order, in every phase.

    Args:
        hooks: The hooks to run one after another, in this order, within each phase.

    Returns:
        One hook standing for all of them in the hook list.
    """
    if not hooks:
        raise TypeError("sequential() needs at least one hook")
    return _SequentialHook(hooks)
