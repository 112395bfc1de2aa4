"""Function hooks: decorators that turn a plain or async function into a hook.

``@on_after_run(every_n_steps=10)`` and friends return a :class:`FunctionHook`
(still callable as the original function) to put in a session's hook list.
``on_before_run`` / ``on_after_run`` take at most one schedule: ``every_n_steps``,
``every_n_secs``, ``once_at_step``, ``when`` (a predicate on the step) or
``trigger`` (any composed :class:`Trigger`); none means every step.
``on_after_run(fetches=...)`` fetches a structure on the steps it fires and
passes it as ``run_values.results``; whether it fires is then decided in
``before_run``, for the step the run will reach. Without fetches the decision
uses the exact step after the run. ``on_before_run`` decides on the step
before the run. Each hook class overrides only the methods it needs, so the
runtime calls nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

import anyio

from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._timer import Clock
from .._validate import check_callable, check_int, check_number, check_text
from ._common import call_maybe_async
from ._triggers import Trigger, at_step, every, when

__all__ = [
    "FunctionHook",
    "on_after_create_session",
    "on_after_run",
    "on_before_run",
    "on_begin",
    "on_end",
]

AnyFn = Callable[..., Any]


class FunctionHook(SessionRunHook):
    """A hook made from a function by one of the ``on_*`` decorators.

    ``name`` (the function's name unless given) names it in traces and errors;
    calling the hook calls the function.

    Args:
        fn: The function the hook calls.
        name: The hook's name in traces and errors. ``None``: the function's.
    """

    overlapping_steps = True

    #: The decorator that makes this kind of hook, to name it in errors.
    _made_by = "FunctionHook"

    def __init__(self, fn: AnyFn, *, name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"{self._made_by}(fn) needs a callable, got {fn!r}")
        check_callable(f"{self._made_by}(fn)", fn)
        if name is not None:
            check_text(f"{self._made_by}(name=...)", name)
        self.fn = fn
        self.name = name if name is not None else getattr(fn, "__name__", type(fn).__name__)
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class _BeginHook(FunctionHook):
    _made_by = "on_begin"

    async def begin(self) -> None:
        await call_maybe_async(self.fn)


class _AfterCreateSessionHook(FunctionHook):
    _made_by = "on_after_create_session"

    async def after_create_session(self, session: object, coord: object) -> None:
        await call_maybe_async(self.fn, session, coord)


class _EndHook(FunctionHook):
    _made_by = "on_end"

    async def end(self, session: object) -> None:
        await call_maybe_async(self.fn, session)


class _ScheduledHook(FunctionHook):
    def __init__(
        self, fn: AnyFn, *, name: str | None, trigger: Trigger | None, clock: Clock | None
    ) -> None:
        super().__init__(fn, name=name)
        if clock is not None and not callable(clock):
            raise TypeError(f"{self._made_by}(clock=...) must be callable, got {clock!r}")
        self.trigger = trigger
        self._clock: Clock = clock if clock is not None else anyio.current_time

    @property
    def serves_one_session(self) -> bool:
        """With a trigger (which keeps when it last fired), one monitored session at a time."""
        return self.trigger is not None

    def _due(self, step: int) -> bool:
        return self.trigger is None or self.trigger.should_fire(step, self._clock())

    def _mark(self, step: int) -> None:
        if self.trigger is not None:
            self.trigger.fired(step, self._clock())


class _BeforeRunHook(_ScheduledHook):
    _made_by = "on_before_run"

    async def before_run(self, run_context: SessionRunContext) -> Any:
        step = run_context.global_step
        if not self._due(step):
            return None
        self._mark(step)
        return await call_maybe_async(self.fn, run_context)


class _AfterRunHook(_ScheduledHook):
    _made_by = "on_after_run"

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        step = run_values.global_step
        if self._due(step):
            self._mark(step)
            await call_maybe_async(self.fn, run_context, run_values)


class _FetchingAfterRunHook(_ScheduledHook):
    _made_by = "on_after_run"

    def __init__(self, fn: AnyFn, *, fetches: object, **options: Any) -> None:
        super().__init__(fn, **options)
        self._request = SessionRunArgs(fetches)

    @property
    def overlapping_steps(self) -> bool:  # type: ignore[override]
        """Without a trigger it fetches on every step; with one, whether a step is due is
        decided at its ``before_run`` and marked at its ``after_run``, which is only right
        when steps do not overlap."""
        return self.trigger is None

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        requested = self._due(run_context.global_step + 1)
        run_context.step_state[self] = requested
        return self._request if requested else None

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_context.step_state.get(self):
            self._mark(run_values.global_step)
            await call_maybe_async(self.fn, run_context, run_values)


def _schedule(
    owner: str,
    every_n_steps: int | None,
    every_n_secs: float | None,
    once_at_step: int | None,
    predicate: Callable[[int], object] | None,
    trigger: Trigger | None,
) -> Trigger | None:
    given = [every_n_steps, every_n_secs, once_at_step, predicate, trigger]
    if sum(value is not None for value in given) > 1:
        raise ValueError(
            "give at most one of every_n_steps, every_n_secs, once_at_step, when and "
            "trigger; compose triggers with | and &, e.g. trigger=every(steps=100) | "
            "every(seconds=60)"
        )
    check_int(f"{owner}: every_n_steps", every_n_steps, minimum=1, optional=True)
    check_number(f"{owner}: every_n_secs", every_n_secs, strict=True, optional=True, unit="seconds")
    check_int(f"{owner}: once_at_step", once_at_step, optional=True)
    if predicate is not None:
        check_callable(f"{owner}: when", predicate)
    if every_n_steps is not None:
        return every(steps=every_n_steps)
    if every_n_secs is not None:
        return every(seconds=every_n_secs)
    if once_at_step is not None:
        return at_step(once_at_step)
    if predicate is not None:
        return when(predicate)
    if trigger is not None and not isinstance(trigger, Trigger):
        raise TypeError(f"trigger must be a Trigger (see hookrun.hooks.every), got {trigger!r}")
    return trigger


def _simple(cls: type[FunctionHook], fn: AnyFn | None, name: str | None) -> Any:
    if fn is not None:
        return cls(fn, name=name)
    return lambda f: cls(f, name=name)


@overload
def on_begin(fn: AnyFn, /) -> FunctionHook: ...
@overload
def on_begin(*, name: str | None = None) -> Callable[[AnyFn], FunctionHook]: ...
def on_begin(fn: AnyFn | None = None, /, *, name: str | None = None) -> Any:
    """Make ``fn()`` a hook's ``begin``.

    Args:
        fn: The function, plain or ``async def``; without it, a decorator with these
            options.
        name: The hook's name in traces and errors. ``None``: the function's.
    """
    return _simple(_BeginHook, fn, name)


@overload
def on_after_create_session(fn: AnyFn, /) -> FunctionHook: ...
@overload
def on_after_create_session(*, name: str | None = None) -> Callable[[AnyFn], FunctionHook]: ...
def on_after_create_session(fn: AnyFn | None = None, /, *, name: str | None = None) -> Any:
    """Make ``fn(session, coord)`` a hook's ``after_create_session``.

    Args:
        fn: The function, plain or ``async def``; without it, a decorator with these
            options.
        name: The hook's name in traces and errors. ``None``: the function's.
    """
    return _simple(_AfterCreateSessionHook, fn, name)


@overload
def on_end(fn: AnyFn, /) -> FunctionHook: ...
@overload
def on_end(*, name: str | None = None) -> Callable[[AnyFn], FunctionHook]: ...
def on_end(fn: AnyFn | None = None, /, *, name: str | None = None) -> Any:
    """Make ``fn(session)`` a hook's ``end``.

    Args:
        fn: The function, plain or ``async def``; without it, a decorator with these
            options.
        name: The hook's name in traces and errors. ``None``: the function's.
    """
    return _simple(_EndHook, fn, name)


@overload
def on_before_run(fn: AnyFn, /) -> FunctionHook: ...
@overload
def on_before_run(
    *,
    every_n_steps: int | None = None,
    every_n_secs: float | None = None,
    once_at_step: int | None = None,
    when: Callable[[int], object] | None = None,
    trigger: Trigger | None = None,
    name: str | None = None,
    clock: Clock | None = None,
) -> Callable[[AnyFn], FunctionHook]: ...
def on_before_run(
    fn: AnyFn | None = None,
    /,
    *,
    every_n_steps: int | None = None,
    every_n_secs: float | None = None,
    once_at_step: int | None = None,
    when: Callable[[int], object] | None = None,
    trigger: Trigger | None = None,
    name: str | None = None,
    clock: Clock | None = None,
) -> Any:
    """Make ``fn(run_context)`` a hook's ``before_run`` (it may return ``SessionRunArgs``).

    The schedule is checked against the global step when the step begins.

    Args:
        fn: The function, plain or ``async def``; without it, a decorator with these
            options.
        every_n_steps: Call it every this many steps (TensorFlow's timer: steps 0, N,
            2N...).
        every_n_secs: Call it at most once every this many seconds.
        once_at_step: Call it once, at the first step at or past this one.
        when: Call it at every step for which ``when(step)`` is true.
        trigger: Call it when this ``Trigger`` fires (at most one of these five; none: every
            step).
        name: The hook's name in traces and errors. ``None``: the function's.
        clock: A function of no arguments returning seconds, for ``every_n_secs``. ``None``:
            ``anyio.current_time``.
    """
    made = _schedule("on_before_run", every_n_steps, every_n_secs, once_at_step, when, trigger)

    def wrap(f: AnyFn) -> FunctionHook:
        return _BeforeRunHook(f, name=name, trigger=made, clock=clock)

    return wrap(fn) if fn is not None else wrap


@overload
def on_after_run(fn: AnyFn, /) -> FunctionHook: ...
@overload
def on_after_run(
    *,
    every_n_steps: int | None = None,
    every_n_secs: float | None = None,
    once_at_step: int | None = None,
    when: Callable[[int], object] | None = None,
    trigger: Trigger | None = None,
    fetches: object = None,
    name: str | None = None,
    clock: Clock | None = None,
) -> Callable[[AnyFn], FunctionHook]: ...
def on_after_run(
    fn: AnyFn | None = None,
    /,
    *,
    every_n_steps: int | None = None,
    every_n_secs: float | None = None,
    once_at_step: int | None = None,
    when: Callable[[int], object] | None = None,
    trigger: Trigger | None = None,
    fetches: object = None,
    name: str | None = None,
    clock: Clock | None = None,
) -> Any:
    """Make ``fn(run_context, run_values)`` a hook's ``after_run``.

    The schedule is checked against the global step after the run;
    ``fetches`` are fetched on the steps it fires (``run_values.results``).

    Args:
        fn: The function, plain or ``async def``; without it, a decorator with these
            options.
        every_n_steps: Call it every this many steps (TensorFlow's timer: after steps 1,
            N+1, 2N+1...).
        every_n_secs: Call it at most once every this many seconds.
        once_at_step: Call it once, at the first step at or past this one.
        when: Call it after every step for which ``when(step)`` is true.
        trigger: Call it when this ``Trigger`` fires (at most one of these five; none: every
            step).
        fetches: What to fetch on the steps it is called (``run_values.results``). ``None``:
            nothing.
        name: The hook's name in traces and errors. ``None``: the function's.
        clock: A function of no arguments returning seconds, for ``every_n_secs``. ``None``:
            ``anyio.current_time``.
    """
    made = _schedule("on_after_run", every_n_steps, every_n_secs, once_at_step, when, trigger)

    def wrap(f: AnyFn) -> FunctionHook:
        if fetches is None:
            return _AfterRunHook(f, name=name, trigger=made, clock=clock)
        return _FetchingAfterRunHook(f, fetches=fetches, name=name, trigger=made, clock=clock)

    return wrap(fn) if fn is not None else wrap
