"""Starting a phase's calls in place: synchronous code, no task, no await.

A call is *started in place* by whichever task runs the phase: a plain function is
called; an async method's coroutine is created and sent its first value right
here, in a copy of the current context, as a new task would run it. A call that
finishes without suspending costs no task and no event-loop pass. The first call
that suspends stops the loop: its coroutine, context and yielded value go back to
the caller, which drives it to its end from the same task (``drive``), so its
cancel scopes and task-bound waits stay where they were opened.

Contexts: every async call must start in a context equal to the caller's, never
seeing what an earlier call set. A copy and a ``Context.run`` per call cost a third
of a no-op hook, so consecutive async calls share one copy for as long as it still
equals the pristine snapshot it was taken from: a call that finished and left it
unchanged left nothing for the next call to see. Plain functions run in the current
context itself (they are ordinary function calls).

Invariant: ``results[p]`` is written only when call ``p`` finished; a call that
raises before suspending is reported, and no later call is started.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import Context, copy_context
from typing import Any, NamedTuple

from ._hooks import SessionRunArgs
from ._plan import Call, PhasePlan

__all__ = ["Failed", "Suspended", "check_plain_result", "drive", "start_calls"]

#: The arguments of each call of a phase, by position.
Args = Sequence[tuple[Any, ...]]


class Suspended(NamedTuple):
    """The call at ``position`` suspended: drive ``coro`` on from ``yielded``, in ``context``."""

    position: int
    coro: Coroutine[Any, Any, Any]
    context: Context
    yielded: Any


class Failed(NamedTuple):
    """The call at ``position`` raised ``error`` before it suspended."""

    position: int
    error: Exception


def start_calls(plan: PhasePlan, args: Args, results: list[Any], position: int) -> Suspended | Failed | None:
    """Start the calls of ``plan`` from ``position`` on, in place, until one suspends or
    fails; ``None`` when every call finished (their results are in ``results``)."""
    runs = plan.runs
    count = len(runs)
    while position < count:
        is_async, fns = runs[position]
        started: int | Suspended | Failed
        if not is_async:
            started = _call_plain(plan, fns, args, results, position)
        elif len(fns) == 1:  # nothing after it shares its context: no snapshot to compare with
            context = copy_context()
            started = context.run(_start_async, fns, args, results, position, context, context)
        else:
            base = copy_context()
            context = base.copy()
            started = context.run(_start_async, fns, args, results, position, context, base)
        if type(started) is not int:
            return started  # type: ignore[return-value]
        position = started
    return None


def _call_plain(
    plan: PhasePlan, fns: tuple[Callable[..., Any], ...], args: Args, results: list[Any], position: int
) -> int | Failed:
    """Call the consecutive plain functions ``fns`` (the first at ``position``) in the current
    context; return the position after them, or the first failure."""
    for fn in fns:
        try:
            result = fn(*args[position])
            if result is not None and type(result) is not SessionRunArgs:
                check_plain_result(plan.calls[position], result)
        except Exception as exc:
            return Failed(position, exc)
        results[position] = result
        position += 1
    return position


def _start_async(
    fns: tuple[Callable[..., Any], ...], args: Args, results: list[Any], position: int, context: Context, base: Context
) -> int | Suspended | Failed:
    """Run inside ``context``: start the consecutive async calls ``fns`` (the first at
    ``position``) while each finishes without suspending and leaves ``context`` equal to
    ``base``; return the position of the next call to start, or what stopped the loop."""
    last = position + len(fns) - 1  # the run's last call: nothing after it shares ``context``
    for fn in fns:
        try:
            coro = fn(*args[position])
            yielded = coro.send(None)
        except StopIteration as stop:
            results[position] = stop.value
            position += 1
            if position <= last and context != base:  # it set a variable: the next needs a fresh copy
                return position
            continue
        except Exception as exc:
            return Failed(position, exc)
        return Suspended(position, coro, context, yielded)
    return position


@types.coroutine
def drive(coro: Coroutine[Any, Any, Any], context: Context, yielded: Any) -> Generator[Any, Any, Any]:
    """Drive a started coroutine to its end from the current task, in its own context."""
    send, throw, run = coro.send, coro.throw, context.run
    while True:
        try:
            value = yield yielded
        except BaseException as exc:
            try:
                yielded = run(throw, exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = run(send, value)
            except StopIteration as stop:
                return stop.value


def check_plain_result(call: Call, result: object) -> None:
    """A plain-function hook must not return an awaitable (nothing would ever await it)."""
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError(
            f"hook {call.name}: {call.phase} is a plain function but returned an "
            f"awaitable; declare it with 'async def'"
        )
