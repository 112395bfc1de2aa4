"""The reference step (the eager, drive-in-place step of the reference figures), rebuilt to be measured in the same process.

The issue's targets were derived from a ~100-line step measured on another day:
"eager, drive-in-place" dispatch, arity-specialised (0.92 / 1.8 / 8.0 / 65 µs of
overhead for K = 0 / 1 / 10 / 100 async no-op hooks there). Absolute µs move with
the machine, so the runner also measures this step beside hookrun, in the same
rounds, and reports hookrun's overhead as a multiple of it.

It has the same semantics on the paths the benchmark takes: a context object per
step, ``before_run`` gathered (each coroutine started in place; the first that
suspends is driven by the calling task while one child task starts the rest),
fetches of flat key lists merged, the session run, a step counter, ``after_run``
fanned out with each hook's own values, a stop flag. It has none of hookrun's
other duties (validation, recovery, coordinator, error rule, cancel scopes,
options, nested fetch structures), so it is a floor, not a peer.

``copy_contexts`` chooses whether each hook runs in its own copy of the context
(as a task would, and as hookrun does); the reference figures do not say whether their
reference did, so both are measured.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Coroutine, Generator, Hashable, Sequence
from contextvars import Context, copy_context
from typing import Any, NamedTuple

import anyio
import anyio.abc

from hookrun import RunMetadata, RunOptions, SessionRunArgs, SessionRunHook

__all__ = ["ReferenceSession", "drive"]


_NO_FEEDS: dict[Hashable, Any] = {}


class _Context:
    """What every hook of a step shares: the step number and the stop flag."""

    __slots__ = ("global_step", "session", "stop_requested")

    def __init__(self, session: Any, global_step: int) -> None:
        self.session = session
        self.global_step = global_step
        self.stop_requested = False


class _Values(NamedTuple):
    results: Any
    global_step: int


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


@types.coroutine
def drive(coro: Coroutine[Any, Any, Any], context: Context | None, yielded: Any) -> Generator[Any, Any, Any]:
    """Drive a started coroutine to its end from the current task (in ``context`` if given)."""
    run: Callable[..., Any] = _call if context is None else context.run
    while True:
        try:
            value = yield yielded
        except BaseException as exc:
            try:
                yielded = run(coro.throw, exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = run(coro.send, value)
            except StopIteration as stop:
                return stop.value


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn)


def _overrides(hook: object, method: str) -> bool:
    return getattr(type(hook), method, None) is not getattr(SessionRunHook, method)


class ReferenceSession:
    """The reference step over ``session`` with ``hooks``; children go on ``task_group``."""

    def __init__(
        self, session: Any, hooks: Sequence[Any], task_group: anyio.abc.TaskGroup, *, copy_contexts: bool
    ) -> None:
        self.session = session
        self.task_group = task_group
        self.copy = copy_contexts
        self.before = [(h.before_run, _is_async(h.before_run)) for h in hooks if _overrides(h, "before_run")]
        self.after = [(h.after_run, _is_async(h.after_run)) for h in hooks if _overrides(h, "after_run")]
        self.global_step = 0
        self.stop = False
        self.options, self.metadata = RunOptions(), RunMetadata()

    def should_stop(self) -> bool:
        return self.stop

    async def run(self) -> None:
        ctx = _Context(self.session, self.global_step)
        requests: Any = []
        if self.before:
            requests = self._start1(self.before, ctx)
            if not isinstance(requests, list):
                requests = await requests
        keys: list[Hashable] = []
        wanted: list[Sequence[Hashable] | None] = []
        if requests and requests.count(None) != len(requests):
            seen: dict[Hashable, int] = {}
            for request in requests:
                fetches = request.fetches if type(request) is SessionRunArgs else None
                wanted.append(fetches)
                for key in fetches or ():
                    if key not in seen:
                        seen[key] = len(keys)
                        keys.append(key)
        values = await self.session.run(keys, _NO_FEEDS, self.options, self.metadata)
        self.global_step += 1
        if self.after:
            if wanted:
                by_key = dict(zip(keys, values, strict=True))
                args: list[tuple[Any, ...]] | tuple[Any, ...] = [
                    (ctx, _Values(None if w is None else [by_key[key] for key in w], self.global_step))
                    for w in wanted
                ]
                done = self._start(self.after, args)
            else:
                done = self._start2(self.after, ctx, _Values(None, self.global_step))
            if not isinstance(done, list):
                await done
        if ctx.stop_requested:
            self.stop = True

    # The fast path specialised by arity (the reference's "eagerfast" variant): no ``*args``.

    def _start1(self, calls: Sequence[tuple[Callable[..., Any], bool]], a: Any) -> list[Any] | Coroutine[Any, Any, list[Any]]:
        results: list[Any] = []
        append, copy = results.append, self.copy
        for position, (fn, is_async) in enumerate(calls):
            if not is_async:
                append(fn(a))
                continue
            coro = fn(a)
            context = copy_context() if copy else None
            try:
                yielded = coro.send(None) if context is None else context.run(coro.send, None)
            except StopIteration as stop:
                append(stop.value)
                continue
            results += [None] * (len(calls) - position)
            return self._finish(calls, (a,), results, position, coro, context, yielded)
        return results

    def _start2(
        self, calls: Sequence[tuple[Callable[..., Any], bool]], a: Any, b: Any
    ) -> list[Any] | Coroutine[Any, Any, list[Any]]:
        results: list[Any] = []
        append, copy = results.append, self.copy
        for position, (fn, is_async) in enumerate(calls):
            if not is_async:
                append(fn(a, b))
                continue
            coro = fn(a, b)
            context = copy_context() if copy else None
            try:
                yielded = coro.send(None) if context is None else context.run(coro.send, None)
            except StopIteration as stop:
                append(stop.value)
                continue
            results += [None] * (len(calls) - position)
            return self._finish(calls, (a, b), results, position, coro, context, yielded)
        return results

    def _start(
        self, calls: Sequence[tuple[Callable[..., Any], bool]], args: list[tuple[Any, ...]] | tuple[Any, ...]
    ) -> list[Any] | Coroutine[Any, Any, list[Any]]:
        """Make every call in place; a coroutine that finishes the phase if one suspends."""
        results: list[Any] = []
        shared = type(args) is tuple
        for position, (fn, is_async) in enumerate(calls):
            call_args = args if shared else args[position]
            if not is_async:
                results.append(fn(*call_args))
                continue
            coro = fn(*call_args)
            context = copy_context() if self.copy else None
            try:
                yielded = coro.send(None) if context is None else context.run(coro.send, None)
            except StopIteration as stop:
                results.append(stop.value)
                continue
            results += [None] * (len(calls) - position)
            return self._finish(calls, args, results, position, coro, context, yielded)
        return results

    async def _finish(
        self,
        calls: Sequence[tuple[Callable[..., Any], bool]],
        args: list[tuple[Any, ...]] | tuple[Any, ...],
        results: list[Any],
        position: int,
        coro: Coroutine[Any, Any, Any],
        context: Context | None,
        yielded: Any,
    ) -> list[Any]:
        """One hook suspended: drive it here while a child task starts the rest."""
        done = anyio.Event()
        rest = calls[position + 1 :]
        if rest:
            rest_args = args if type(args) is tuple else args[position + 1 :]

            async def child() -> None:
                tail = self._start(rest, rest_args)
                results[position + 1 :] = tail if isinstance(tail, list) else await tail
                done.set()

            self.task_group.start_soon(child)
        else:
            done.set()
        results[position] = await drive(coro, context, yielded)
        await done.wait()
        return results

