"""Starting a phase's calls in place: synchronous code, no task, no await.

A call is *started in place* by whichever task runs the phase: a plain function is
called; an async method's coroutine is created and run up to its first suspension
right here, in a copy of the current context, as a new task would run it. A call
that finishes without suspending costs no task and no event-loop pass. The first
call that suspends stops the loop: its coroutine, context and yielded value go back
to the caller, which drives it to its end from the same task (``drive``), so its
cancel scopes and task-bound waits stay where they were opened.

Two ways to start async calls, one loop (``start_calls``):

* consecutive async calls are awaited one after the other inside one coroutine
  (``_start_async``) that is sent to once: an ``await`` of a coroutine that returns
  at once costs half of a ``send`` and a caught ``StopIteration``. When a call
  suspends, that coroutine suspends with it; the call it awaits (``cr_await``) is
  driven on its own, and the coroutine around it is closed once the call is done;
* a lone async call, or every call a worker starts (where calls are expected to
  suspend), is started with ``send`` itself.

Two shapes of phase are so common that the step starts them itself, without the
dispatcher's bookkeeping (results slots, positions, ``Failed``): ``call_before`` and
``call_after`` for a phase of plain functions only (most built-in hooks), ``start_one``
for a phase of one async call (the function ``start_calls`` starts every lone async
call with). Nothing can suspend beside such a call, so there is nothing to cancel and
no worker to start. ``call_before`` and ``call_after`` are the copies of
``start_calls``'s loop over plain functions, one per phase so that each calls its
functions with a fixed number of arguments (``fn(ctx)``, ``fn(ctx, values)``: a
call through ``*args`` costs about twice as much), and they pay for it: measured on
the hot step loop, they take 40 % off a step with one plain hook (1.34 to 0.80 us
over a step without hooks), and the fixed arguments another 35 % off a step with 100
(10.4 to 6.8 us over the bare step); starting one async call from the step takes
30 % off a step with one async hook (2.15 to 1.52 us).

Contexts: every async call must start in a context equal to the caller's, never
seeing what an earlier call set. A copy and a ``Context.run`` per call cost a third
of a no-op hook, so consecutive async calls share one copy for as long as it still
equals the pristine snapshot it was taken from: a call that finished and left it
unchanged left nothing for the next call to see. Plain functions run in the current
context itself (they are ordinary function calls).

Invariant: ``results[p]`` holds ``PENDING`` until call ``p`` finished, and is
written only then; a call that raises before suspending (any exception, base
exceptions included) is reported, and no later call is started.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Coroutine, Generator, Sequence
from contextvars import Context, copy_context
from typing import Any, NamedTuple

from .._hook_protocol import SessionRunArgs
from .._validate import refuse_awaitable
from ._plan import Call, PhasePlan

__all__ = ["PENDING", "Failed", "Suspended", "call_after", "call_before", "check_plain_result", "drive", "start_calls", "start_one"]

#: The arguments of each call of a phase, by position.
Args = Sequence[tuple[Any, ...]]


#: What ``results`` holds for a call that has not finished.
PENDING: Any = type("Pending", (), {"__repr__": lambda self: "PENDING", "__slots__": ()})()


class Suspended(NamedTuple):
    """The call at ``position`` suspended: drive ``coro`` on from ``yielded``, in ``context``.

    ``owner`` is the coroutine that started it and waits on it; close it once ``coro``
    is done (``drive`` does), never before: closing it would close ``coro`` too.
    """

    position: int
    coro: Coroutine[Any, Any, Any]
    context: Context
    yielded: Any
    owner: Coroutine[Any, Any, Any]


#: Builds a ``Suspended`` without its Python-level ``__new__`` (a third of its cost;
#: one is built per suspension).
_new_tuple = tuple.__new__


class Failed(NamedTuple):
    """The call at ``position`` raised ``error`` before it suspended (any exception:
    ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` too, so that a worker
    reports them as it reports any error)."""

    position: int
    error: BaseException


def call_before(plan: PhasePlan, run_context: Any) -> list[Any] | None:
    """Call every ``before_run`` of a phase of plain functions (``plan.plain``) in list
    order: their results, or ``None`` when every call returned ``None`` (the common case
    costs no list). The first call that raises ends the phase with its error; no later
    call is made."""
    requests: list[Any] | None = None
    position = 0
    for fn in plan.plain:  # type: ignore[union-attr]
        request = fn(run_context)
        if request is not None:
            if type(request) is not SessionRunArgs:
                check_plain_result(plan.calls[position], request)
            if requests is None:
                requests = [None] * len(plan.calls)
            requests[position] = request
        position += 1  # noqa: SIM113  # enumerate() costs 50 ns more on a one-hook phase
    return requests


def call_after(plan: PhasePlan, run_context: Any, run_values: Any) -> None:
    """Call every ``after_run`` of a phase of plain functions (``plan.plain``) with the
    same values, in list order, as ``call_before`` does."""
    for fn in plan.plain:  # type: ignore[union-attr]
        result = fn(run_context, run_values)
        if result is not None:  # only an awaitable is refused (see check_plain_result)
            check_plain_result(plan.calls[plan.plain.index(fn)], result)  # type: ignore[union-attr]


def start_one(fn: Callable[..., Any], args: tuple[Any, ...], position: int = 0) -> Any:
    """Start one async call (a phase's only one, ``plan.lone``, or the call at ``position``)
    in place, with ``send``, in a copy of the current context: its result if it finished,
    else a ``Suspended`` to ``drive`` to its end. An error it raises before suspending
    propagates from here."""
    context = copy_context()
    coro = fn(*args)
    try:
        yielded = context.run(coro.send, None)
    except StopIteration as stop:
        return stop.value
    return _new_tuple(Suspended, (position, coro, context, yielded, coro))


def start_calls(
    plan: PhasePlan, args: Args, results: list[Any], position: int, *, batch: bool = True
) -> Suspended | Failed | None:
    """Start the calls of ``plan`` from ``position`` on, in place, until one suspends or
    fails; ``None`` when every call finished (their results are in ``results``, which
    holds ``PENDING`` for every call not finished yet).

    ``batch``: await consecutive async calls inside one coroutine (``_start_async``),
    the cheaper way while they return at once; ``False`` starts each on its own, the
    cheaper way when they are expected to suspend (a worker's share of a phase in which
    a hook already waits)."""
    runs = plan.runs
    count = len(runs)
    while position < count:
        is_async, fns = runs[position]
        if not is_async:  # plain functions, in the current context
            for fn in fns:
                try:
                    result = fn(*args[position])
                    if result is not None and type(result) is not SessionRunArgs:
                        check_plain_result(plan.calls[position], result)
                except BaseException as exc:  # KeyboardInterrupt too: reported, never lost in a worker
                    return Failed(position, exc)
                results[position] = result
                position += 1
            continue
        if not batch or len(fns) == 1:  # one call: started with ``send`` itself
            try:
                started = start_one(fns[0], args[position], position)
            except BaseException as exc:
                return Failed(position, exc)
            if type(started) is Suspended:
                return started
            results[position] = started
            position += 1
            continue
        base = copy_context()
        context = base.copy()
        owner = _start_async(fns, args, results, position, context, base)
        try:
            yielded = context.run(owner.send, None)
        except StopIteration as stop:
            position = stop.value
            continue
        except BaseException as exc:
            return Failed(results.index(PENDING, position), exc)
        # ``owner`` waits on the call that suspended: it is driven on its own from here.
        position = results.index(PENDING, position)
        return _new_tuple(Suspended, (position, owner.cr_await, context, yielded, owner))  # type: ignore[attr-defined]
    return None


async def _start_async(
    fns: tuple[Callable[..., Any], ...], args: Args, results: list[Any], position: int, context: Context, base: Context
) -> int:
    """Run inside ``context``: await the consecutive async calls ``fns`` (the first at
    ``position``) while each finishes without suspending and leaves ``context`` equal to
    ``base``; return the position of the next call to start.

    Awaiting a coroutine that returns at once costs half of starting it with ``send``
    and catching its ``StopIteration``, so the calls are awaited here and only this
    coroutine is sent to. When a call suspends, this coroutine suspends with it;
    ``start_calls`` hands that call out to be driven on its own, and this coroutine is
    never resumed, only closed once the call is done.
    """
    for fn in fns:
        results[position] = await fn(*args[position])
        position += 1
        if context != base:  # it set a variable: the next call needs a fresh copy
            return position
    return position


@types.coroutine
def drive(started: Suspended) -> Generator[Any, Any, Any]:
    """Drive a suspended call to its end from the current task, in its own context."""
    _, coro, context, yielded, owner = started
    send, throw, run = coro.send, coro.throw, context.run
    try:
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
    finally:
        owner.close()


def check_plain_result(call: Call, result: object) -> None:
    """A plain-function hook must not return an awaitable (nothing would ever await it)."""
    if inspect.isawaitable(result):
        refuse_awaitable(
            result,
            f"hook {call.name}: {call.phase} is a plain function but returned an awaitable; declare it with 'async def'",
        )
