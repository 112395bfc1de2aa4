"""Checks made when a monitored session is built: bad input fails here, naming the culprit,
not on step 1000. Pure functions, no I/O."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import NoReturn

from ._factories import plain_signature
from ._plan import is_async_callable
from ._step import LocalStepCounter, StepCounter

__all__ = [
    "check_seconds",
    "check_session",
    "check_step_counter",
    "check_step_fn",
    "exception_types",
    "hook_list",
    "refuse_awaitable",
]

def hook_list(hooks: Iterable[object] | None) -> tuple[object, ...]:
    """The hooks as a tuple (``None``: no hooks, as in TensorFlow), each checked for plain
    overrides of async base methods."""
    if hooks is None:
        return ()
    if hasattr(hooks, "before_run") or hasattr(hooks, "after_run") or not isinstance(hooks, Iterable):
        raise TypeError(f"hooks must be a list of hooks, got {type(hooks).__name__}; wrap a single hook in a list")
    frozen = tuple(hooks)
    if frozen:
        from ._overrides import check_overrides  # on first use: keeps `import hookrun` light
    for index, hook in enumerate(frozen):
        check_overrides(hook, index)
    return frozen


def check_seconds(name: str, value: object, *, allow_zero: bool) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a number of seconds {bound}, got {value!r}")


def check_step_counter(counter: StepCounter | None) -> StepCounter:
    if counter is None:
        return LocalStepCounter()
    if not isinstance(counter, StepCounter):
        raise TypeError(
            f"step_counter {counter!r} does not implement StepCounter "
            "(async get, increment, set and wait_for)"
        )
    return counter


def exception_types(types_: Iterable[type[BaseException]]) -> tuple[type[BaseException], ...]:
    result = tuple(types_)
    for item in result:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"recoverable must hold exception classes, got {item!r}")
    return result


def check_session(raw: object) -> None:
    """A created session has ``async def run`` and, if it has ``aclose``, an async one."""
    run = getattr(raw, "run", None)
    if run is None or not is_async_callable(run):
        raise TypeError(
            f"the session creator returned {raw!r} ({type(raw).__name__}), which is not a "
            "session: it needs 'async def run(fetches, feed_dict, options, run_metadata)'"
        )
    _check_run_signature(raw, run)
    from ._closing import check_closable  # on first use: keeps `import hookrun` light

    check_closable(raw)


def _check_run_signature(raw: object, run: object) -> None:
    """A session's ``run`` takes the four arguments a monitored session passes it, in order."""
    try:
        signature = inspect.signature(run)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # no signature to read (a builtin): nothing to check
        return
    try:
        signature.bind(None, None, None, None)
    except TypeError:
        raise TypeError(
            f"the session {type(raw).__name__} has run{plain_signature(signature)}, but a monitored session calls "
            "run(fetches, feed_dict, options, run_metadata) with four positional arguments: a list "
            "of fetch keys, a feed dict, a hookrun.RunOptions and a hookrun.RunMetadata; add the "
            "missing parameters (TensorFlow's Session.run takes options and run_metadata too, "
            "e.g. 'async def run(self, fetches, feed_dict=None, options=None, run_metadata=None)')"
        ) from None


def check_step_fn(step_fn: object) -> None:
    if not callable(step_fn) or not is_async_callable(step_fn):
        raise TypeError(f"run_step_fn needs an async function, got {step_fn!r}")
    params = [
        p for p in inspect.signature(step_fn).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(params) != 1:
        names = tuple(p.name for p in params)
        raise ValueError(
            "`step_fn` may either have one `step_context` argument, or `self` and "
            f"`step_context` arguments if it's an instance method. Got {names} instead."
        )


def refuse_awaitable(value: object, message: str) -> NoReturn:
    """Raise ``TypeError(message)`` for ``value``, an awaitable where a plain result was due
    (nothing would ever await it); a coroutine is closed first, so no "never awaited"
    warning follows the error."""
    if inspect.iscoroutine(value):
        value.close()
    raise TypeError(message)
