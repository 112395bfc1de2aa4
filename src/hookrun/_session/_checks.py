"""What a monitored session checks in what the user hands it, when it gets it: the
session a creator returns (``check_session``: an ``async def run`` taking the four
arguments it is called with, an async ``aclose`` if any) and the step function of
``run_step_fn`` (``check_step_fn``), and the hooks' ``step_context``s
(``step_context_hooks``). Pure functions, no I/O; each message names the
culprit as the user wrote it.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from .._dispatch._plan import is_async_callable
from ._closing import check_closable
from ._factories import plain_signature

__all__ = ["check_session", "check_step_fn", "step_context_hooks"]


def check_session(raw: object) -> None:
    """A created session has ``async def run`` and, if it has ``aclose``, an async one."""
    run = getattr(raw, "run", None)
    if run is None or not is_async_callable(run):
        raise TypeError(
            f"the session creator returned {raw!r} ({type(raw).__name__}), which is not a "
            "session: it needs 'async def run(fetches, feed_dict, options, run_metadata)'"
        )
    _check_run_signature(raw, run)
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
    """A step function for ``run_step_fn``: async, with one ``step_context`` argument."""
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


def step_context_hooks(hooks: Sequence[object]) -> tuple[object, ...]:
    """The hooks with a ``step_context`` method, in list order (decided once, at freeze time)."""
    found = []
    for index, hook in enumerate(hooks):
        method = getattr(hook, "step_context", None)
        if method is None:
            continue
        if not callable(method):
            raise TypeError(f"hooks[{index}] ({type(hook).__name__}): step_context is not callable")
        found.append(hook)
    return tuple(found)
