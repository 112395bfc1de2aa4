"""Fault injection, in one vocabulary: what can go wrong, and where to make it happen.

A *fault* is an exception instance or class, or one of the words the
reliability suite uses:

* ``"aborted"``, ``"unavailable"``: recoverable errors (``AbortedError``,
  ``UnavailableError``): a ``MonitoredSession`` re-creates its session;
* ``"oor"`` (or ``"end_of_input"``): ``OutOfRangeError``, a clean stop;
* ``"error"``: an ordinary ``RuntimeError``, which propagates;
* ``"hang"``: wait until cancelled;
* ``"stop"``: request stop (hooks only).

Faults are placed with ``drive(errors=..., creation_errors=..., cancel_after=...)``
(session runs, session creation, cancellation from outside) and with
``FaultyHook`` (a sibling hook that fails, hangs or requests stop).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import anyio
import anyio.lowlevel

from .._errors import AbortedError, OutOfRangeError, UnavailableError
from .._hook_protocol import HOOK_METHODS, SessionRunContext, SessionRunHook

__all__ = ["HANG", "STOP", "Fault", "FaultyHook", "cancel_after", "resolve_fault"]

#: Wait until cancelled.
HANG: Literal["hang"] = "hang"
#: Request stop (a hook's ``before_run``/``after_run``, or the coordinator elsewhere).
STOP: Literal["stop"] = "stop"

#: An exception (instance or class) or one of the words of the module docstring.
Fault = BaseException | type[BaseException] | str

_WORDS: dict[str, type[BaseException]] = {
    "aborted": AbortedError,
    "unavailable": UnavailableError,
    "oor": OutOfRangeError,
    "end_of_input": OutOfRangeError,
    "error": RuntimeError,
}


def resolve_fault(fault: object, where: str, *, allow_stop: bool = False) -> BaseException | str:
    """The exception to raise for ``fault`` (made with a message naming ``where``), or
    ``HANG`` / ``STOP``. Anything else is a ``TypeError`` or ``ValueError`` naming it."""
    if isinstance(fault, BaseException):
        return fault
    if isinstance(fault, type) and issubclass(fault, BaseException):
        return fault(f"scripted {fault.__name__} at {where}")
    if fault == HANG or (fault == STOP and allow_stop):
        return str(fault)
    if isinstance(fault, str) and fault in _WORDS:
        return _WORDS[fault](f"scripted {fault!r} fault at {where}")
    words = sorted([*_WORDS, HANG, *([STOP] if allow_stop else [])])
    raise ValueError(
        f"unknown fault {fault!r} at {where}: give an exception (instance or class) "
        f"or one of {', '.join(map(repr, words))}"
    )


async def cancel_after(scope: anyio.CancelScope, points: int) -> None:
    """Cancel ``scope`` after ``points`` schedule points of this task (run it as a sibling).

    Args:
        scope: The cancel scope to cancel.
        points: How many schedule points of this task to let pass first.
    """
    for _ in range(points):
        await anyio.lowlevel.checkpoint()
    scope.cancel()


class FaultyHook(SessionRunHook):
    """A sibling hook that misbehaves in one phase: ``FaultyHook("after_run", "error", at=2)``.

    On its ``at``-th call (0-based) of ``phase``, and the ``times - 1`` calls after it, it
    applies ``fault``: raises it, hangs until cancelled (``"hang"``) or requests stop
    (``"stop"``: the step's stop in ``before_run``/``after_run``, the coordinator's in
    ``after_create_session``). Its method is async and suspends once before acting, so it
    really runs beside the hook under test. Only ``phase`` is overridden. ``calls``
    counts the calls made. One phase only, so steps in flight may overlap under it.

    Args:
        phase: The hook method that misbehaves (``"before_run"``, ``"after_run"``, ...).
        fault: An exception (instance or class), ``"aborted"``, ``"unavailable"``,
            ``"oor"``, ``"error"``, ``"hang"`` or ``"stop"``.
        at: The call of ``phase`` (0-based) at which it starts.
        times: How many calls in a row it misbehaves.
        name: Its name in traces and errors.
    """

    overlapping_steps = True

    _PHASE_CLASSES: ClassVar[dict[str, type[FaultyHook]]] = {}
    phase: ClassVar[str] = ""

    def __new__(cls, phase: str, *args: Any, **kwargs: Any) -> FaultyHook:
        if phase not in HOOK_METHODS:
            raise ValueError(f"FaultyHook: phase must be one of {', '.join(HOOK_METHODS)}, got {phase!r}")
        return super().__new__(_faulty_class(phase))

    def __init__(
        self, phase: str, fault: Fault, *, at: int = 0, times: int = 1, name: str = "faulty"
    ) -> None:
        where = f"{name}.{phase} call {at}"
        allow_stop = phase in ("before_run", "after_run", "after_create_session")
        self.fault = resolve_fault(fault, where, allow_stop=allow_stop)
        for what, value, least in (("at", at, 0), ("times", times, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"FaultyHook: {what} must be an int >= {least}, got {value!r}")
        self.at, self.times, self.name = at, times, name
        self.calls = 0

    def __repr__(self) -> str:
        return f"FaultyHook({self.phase!r}, {self.fault!r}, at={self.at}, times={self.times})"

    async def _act(self, target: object) -> None:
        number = self.calls
        self.calls += 1
        await anyio.lowlevel.checkpoint()
        if not self.at <= number < self.at + self.times:
            return
        if self.fault == HANG:
            await anyio.sleep_forever()
        elif self.fault == STOP:
            target.request_stop()  # type: ignore[attr-defined]
        else:
            assert isinstance(self.fault, BaseException)
            raise self.fault


def _faulty_class(phase: str) -> type[FaultyHook]:
    """The subclass of ``FaultyHook`` that overrides exactly ``phase``."""
    made = FaultyHook._PHASE_CLASSES.get(phase)
    if made is not None:
        return made

    async def act(self: FaultyHook, *args: Any) -> None:
        target = args[0] if isinstance(args[0] if args else None, SessionRunContext) else None
        if phase == "after_create_session":
            target = args[1]  # the coordinator
        await self._act(target)

    made = type(f"FaultyHook[{phase}]", (FaultyHook,), {phase: act, "phase": phase})
    FaultyHook._PHASE_CLASSES[phase] = made
    return made
