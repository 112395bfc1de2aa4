"""The tape: records every call of the driven hooks without changing how they run.

Each method a hook really implements is shadowed, for the length of the drive,
by a recording function of the same kind (sync stays sync, async stays async),
so the runtime plans and calls the hook exactly as it would unrecorded and
errors still name the hook itself. Who requested stop is known exactly, even
among concurrent async hooks and from background tasks: each hook is handed
its own view of the step's context (the same step, the same stop flag), whose
``request_stop`` notes the call it was given to.

Invariants: every patched method is restored when the drive ends; ``active``
counts hook calls in progress (zero once the session has closed).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio

from .._hook_protocol import (
    HOOK_METHODS,
    InFlightRunContext,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from .._timer import Clock
from ._record import HookCall, Record, _name

__all__ = ["Tape"]

_BASE = {name: getattr(SessionRunHook, name) for name in HOOK_METHODS}


class Tape:
    """Records the calls of ``record.hooks`` into ``record.calls`` while ``patched()``."""

    def __init__(self, record: Record, clock: Clock, session_number: Callable[[object], int]) -> None:
        self.record = record
        self.clock = clock
        self.session_number = session_number
        self.active = 0
        self._views: dict[tuple[int, int], _StepView | _InFlightStepView] = {}

    @contextmanager
    def patched(self) -> Iterator[None]:
        """Shadow the driven hooks' methods with recording ones; restore them after."""
        undo: list[Callable[[], None]] = []
        try:
            seen: set[int] = set()
            for hook in self.record.hooks:
                if id(hook) not in seen:
                    seen.add(id(hook))
                    undo.extend(self._patch(hook))
            yield
        finally:
            for restore in reversed(undo):
                restore()
            self._views.clear()

    def _patch(self, hook: object) -> list[Callable[[], None]]:
        undo = []
        for phase in HOOK_METHODS:
            bound = getattr(hook, phase, None)
            if bound is None or not callable(bound) or getattr(bound, "__func__", None) is _BASE[phase]:
                continue
            undo.append(_shadow(hook, phase, self._recorder(hook, phase, bound)))
        return undo

    def _recorder(self, hook: object, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        if _is_async(fn):

            async def record_async(*args: Any) -> Any:
                call, args = self._start(hook, phase, args)
                with self._running(call):
                    result = await fn(*args)
                return self._finish(call, args, result)

            return record_async

        def record_sync(*args: Any) -> Any:
            call, args = self._start(hook, phase, args)
            with self._running(call):
                result = fn(*args)
            return self._finish(call, args, result)

        return record_sync

    def _start(self, hook: object, phase: str, args: tuple[Any, ...]) -> tuple[HookCall, tuple[Any, ...]]:
        """Record the call's start; return it and the arguments to call the hook with."""
        ctx = args[0] if args and isinstance(args[0], SessionRunContext) else None
        step = ctx.global_step if ctx is not None else None
        session = ctx.session if ctx is not None else args[0] if phase == "after_create_session" else None
        call = HookCall(hook, _name(hook), phase, step, self.clock(), self.session_number(session))
        if phase == "on_exception" and len(args) > 1 and isinstance(args[1], BaseException):
            call.exception = args[1]
        self.record.calls.append(call)
        self.active += 1
        if ctx is not None:
            args = (self._view(hook, ctx, call), *args[1:])
        return call, args

    def _view(self, hook: object, ctx: SessionRunContext, call: HookCall) -> SessionRunContext:
        """The hook's view of ``ctx`` (one per hook and step), now noting stops for ``call``."""
        key = (id(ctx), id(hook))
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = (  # keeps ctx alive: ids are not reused
                _InFlightStepView(ctx) if isinstance(ctx, InFlightRunContext) else _StepView(ctx)
            )
        view.call = call
        return view

    def _finish(self, call: HookCall, args: Sequence[Any], result: Any) -> Any:
        call.outcome = "returned"
        if call.phase == "before_run" and (result is None or isinstance(result, SessionRunArgs)):
            call.request = result
        if call.phase == "after_run" and len(args) > 1 and isinstance(args[1], SessionRunValues):
            call.run_values = args[1]
        return result

    @contextmanager
    def _running(self, call: HookCall) -> Iterator[None]:
        """Around the hook's own call (``_start`` counted it in ``active``): how it failed,
        if it did, is noted on ``call``."""
        try:
            yield
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            call.outcome = "cancelled" if cancelled else "raised"
            call.error = None if cancelled else exc
            raise
        finally:
            self.active -= 1


class _Forwarding:
    """What a view of a step's context forwards to the context itself (``_ctx``)."""

    __slots__ = ()
    _ctx: SessionRunContext
    call: HookCall | None

    def __repr__(self) -> str:
        return repr(self._ctx)

    @property
    def original_args(self) -> SessionRunArgs:
        return self._ctx.original_args

    @property
    def stop_requested(self) -> bool:
        return self._ctx.stop_requested

    @property
    def step_state(self) -> dict[object, Any]:
        return self._ctx.step_state

    def request_stop(self) -> None:
        if self.call is not None:
            self.call.requested_stop = True
        self._ctx.request_stop()


class _StepView(_Forwarding, SessionRunContext):
    """What one driven hook sees of a step's context: the same step, args, session, step
    state and stop flag; its ``request_stop`` also marks the hook call it was last given to."""

    __slots__ = ("_ctx", "call")

    def __init__(self, ctx: SessionRunContext) -> None:
        SessionRunContext.__init__(self, ctx.original_args, ctx.session, ctx.global_step)
        self._ctx = ctx
        self.call: HookCall | None = None


class _InFlightStepView(_Forwarding, InFlightRunContext):
    """``_StepView`` of a step in flight's context: one too, whose ``ended`` is the step's."""

    __slots__ = ("_ctx", "call")

    def __init__(self, ctx: InFlightRunContext) -> None:
        SessionRunContext.__init__(self, ctx.original_args, ctx.session, ctx.global_step)
        self._ctx = ctx
        self.call: HookCall | None = None

    @property  # read from the step's context, set only there
    def ended(self) -> bool:
        ctx = self._ctx
        assert isinstance(ctx, InFlightRunContext)
        return ctx.ended


def _shadow(hook: object, phase: str, replacement: Callable[..., Any]) -> Callable[[], None]:
    """Set ``hook.<phase>`` on the instance; return how to undo it."""
    own = vars(hook) if hasattr(hook, "__dict__") else None
    if own is None:
        raise TypeError(
            f"drive() records a hook by shadowing its methods on the instance, but "
            f"{_name(hook)} has no instance __dict__ (it uses __slots__); add "
            f"'__dict__' to its __slots__ to drive it"
        )
    had, previous = phase in own, own.get(phase)
    own[phase] = replacement

    def restore() -> None:
        if had:
            own[phase] = previous
        else:
            own.pop(phase, None)

    return restore


def _is_async(fn: object) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )
