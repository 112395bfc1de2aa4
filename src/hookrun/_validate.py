"""Checks made when a monitored session, a hook or an option object is built: bad input
fails here, naming the culprit, not on step 1000. Pure functions, no I/O.

Argument checks share one rule, stated in every message as "``what`` must be ...,
got ``value``": a value of the wrong kind (a string, ``None`` where it is not
allowed, a bool or a float where an int is due, a generator function where a plain
one is) is a ``TypeError``; a value of the right kind out of range (negative, zero
where zero means nothing, NaN, infinite) is a ``ValueError``. ``what`` is the argument
as the user wrote it: ``"SummarySaverHook: save_steps"``, ``"RetryPolicy(max_delay=...)"``.

Checks that need more than a value live with what they check: freezing a hook list
(``_dispatch._overrides.hook_list``), the session a creator returns and a step
function (``_session._checks``). This module imports nothing of hookrun's but the
global step, so every subsystem may use it.
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
from collections.abc import Iterable
from typing import NoReturn

from ._global_step import LocalStepCounter, StepCounter

__all__ = [
    "check_callable",
    "check_file_name",
    "check_flag",
    "check_int",
    "check_number",
    "check_path",
    "check_seconds",
    "check_step_counter",
    "check_text",
    "exception_types",
    "refuse_awaitable",
]

def check_seconds(name: str, value: object, *, allow_zero: bool) -> None:
    """``value`` is a finite number of seconds, > 0 (or >= 0 with ``allow_zero``)."""
    check_number(name, value, minimum=0.0, strict=not allow_zero, unit="seconds")


def check_int(what: str, value: object, *, minimum: int | None = 0, optional: bool = False) -> None:
    """``value`` is an int (not a bool) >= ``minimum`` (no bound with ``minimum=None``);
    ``None`` passes with ``optional``."""
    if value is None and optional:
        return
    rule = f"{'None or ' if optional else ''}an int{'' if minimum is None else f' >= {minimum}'}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be {rule}, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{what} must be {rule}, got {value!r}")


def check_number(
    what: str, value: object, *, minimum: float | None = 0.0, strict: bool = False,
    optional: bool = False, unit: str = "",
) -> None:
    """``value`` is a finite real number (not a bool) >= ``minimum`` (> with ``strict``;
    no bound with ``minimum=None``); ``None`` passes with ``optional``."""
    if value is None and optional:
        return
    bound = "" if minimum is None else f" {'>' if strict else '>='} {minimum:g}"
    rule = f"{'None or ' if optional else ''}a number{' of ' + unit if unit else ''}{bound}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be {rule}, got {value!r}")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{what} must be {rule}, got {value!r} (not a finite number)")
    if minimum is not None and not (number > minimum if strict else number >= minimum):
        raise ValueError(f"{what} must be {rule}, got {value!r}")


def check_flag(what: str, value: object) -> None:
    """``value`` is ``True`` or ``False`` (a string such as ``"no"`` would be true)."""
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be True or False, got {value!r}")


def check_text(what: str, value: object, *, empty: bool = False) -> None:
    """``value`` is a string without NUL characters (and not empty, unless ``empty``)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, got {value!r}")
    if not value and not empty:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if "\0" in value:
        raise ValueError(f"{what} must not contain a NUL character, got {value!r}")


def check_file_name(what: str, value: object) -> None:
    """``value`` is a plain file name: a non-empty string with no directory part, no NUL
    and no leading dot."""
    check_text(what, value)
    assert isinstance(value, str)
    if os.sep in value or (os.altsep and os.altsep in value) or value.startswith("."):
        raise ValueError(f"{what} must be a plain file name, got {value!r}")


def check_path(what: str, value: object, *, optional: bool = False) -> None:
    """``value`` is a path (a ``str`` or ``os.PathLike`` of one) without NUL characters."""
    if value is None and optional:
        return
    path = value.__fspath__() if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        rule = "None or a path" if optional else "a path"
        raise TypeError(f"{what} must be {rule} (a str or os.PathLike), got {value!r}")
    if "\0" in path:
        raise ValueError(f"{what} must not contain a NUL character, got {value!r}")


def check_callable(what: str, fn: object) -> None:
    """``fn`` is a plain or ``async def`` function, not a generator function: calling one
    only makes a generator (always true, and its body never runs)."""
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {fn!r}")
    target = type(fn).__call__  # an object whose __call__ is a generator function
    if inspect.isgeneratorfunction(fn) or inspect.isgeneratorfunction(target):
        kind = "a generator function"
    elif inspect.isasyncgenfunction(fn) or inspect.isasyncgenfunction(target):
        kind = "an async generator function"
    else:
        return
    raise TypeError(
        f"{what} must be a plain or 'async def' function, got {kind} {fn!r}: calling it only "
        "makes a generator, so its body would never run (use return, not yield)"
    )


def check_step_counter(counter: StepCounter | None) -> StepCounter:
    if counter is None:
        return LocalStepCounter()
    if not isinstance(counter, StepCounter):
        raise TypeError(
            f"step_counter {counter!r} does not implement StepCounter "
            "(async get, increment, set and wait_for)"
        )
    return counter


def exception_types(types_: object, what: str = "recoverable") -> tuple[type[BaseException], ...]:
    """``types_`` as a tuple of exception classes: an iterable (a list, a tuple, a generator)
    of them. A single class, a string, a number or any other non-iterable is a
    ``TypeError`` naming ``what``, and so is an item that is not an exception class."""
    if isinstance(types_, type) and issubclass(types_, BaseException):
        raise TypeError(
            f"{what} must be an iterable of exception classes, got the class {types_.__name__}; "
            f"wrap it in a tuple: ({types_.__name__},)"
        )
    if isinstance(types_, (str, bytes)) or not isinstance(types_, Iterable):
        raise TypeError(f"{what} must be an iterable of exception classes, got {types_!r}")
    result = tuple(types_)
    for item in result:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"{what} must hold exception classes, got {item!r}")
    return result


def refuse_awaitable(value: object, message: str) -> NoReturn:
    """Raise ``TypeError(message)`` for ``value``, an awaitable where a plain result was due
    (nothing would ever await it); a coroutine is closed first, so no "never awaited"
    warning follows the error."""
    if inspect.iscoroutine(value):
        value.close()
    raise TypeError(message)
