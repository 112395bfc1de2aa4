"""Checks, when the hooks are frozen, that a subclass does not override an ``async def``
hook method with a plain ``def``.

A TensorFlow-style override ``def begin(self): super().begin()`` of a base whose
``begin`` is ``async def`` only creates the base's coroutine and drops it: the
base's work (opening a writer, priming a timer) silently never happens, and all
Python says is a ``RuntimeWarning`` at garbage collection. This module turns
that into a ``TypeError`` at construction naming the hook, the method and the
base (``hook_list`` freezes a session's hooks and checks each). Plain overrides of plain methods (including ``SessionRunHook``'s no-ops)
and ``async def`` overrides of anything are fine. Pure, no I/O.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections.abc import Iterable

from .._hook_protocol import HOOK_METHODS
from ._compose import _SequentialHook, _ThreadedHook

__all__ = ["check_overrides", "hook_list"]


def hook_list(hooks: Iterable[object] | None) -> tuple[object, ...]:
    """The hooks as a tuple (``None``: no hooks, as in TensorFlow), each checked for plain
    overrides of async base methods."""
    if hooks is None:
        return ()
    if hasattr(hooks, "before_run") or hasattr(hooks, "after_run") or not isinstance(hooks, Iterable):
        raise TypeError(f"hooks must be a list of hooks, got {type(hooks).__name__}; wrap a single hook in a list")
    frozen = tuple(hooks)
    for index, hook in enumerate(frozen):
        check_overrides(hook, index)
    return frozen


def check_overrides(hook: object, index: int) -> None:
    """Raise ``TypeError`` if a class of ``hook`` overrides an async hook method with a plain one.

    ``index`` is the hook's position in the hook list (for the message). The
    members of ``sequential(...)`` and the hook inside ``in_thread(...)`` are
    checked too.
    """
    _check(hook, f"hooks[{index}]")


def _check(hook: object, where: str) -> None:
    _check_class(type(hook), where)
    for position, member in enumerate(_members(hook)):
        _check(member, f"{where} member {position}")


def _check_class(cls: type, where: str) -> None:
    for method in HOOK_METHODS:
        definitions = [
            (owner, _is_async(vars(owner)[method])) for owner in cls.__mro__ if method in vars(owner)
        ]
        # Each definition overrides the next one up the MRO.
        for (owner, is_async), (base, base_is_async) in itertools.pairwise(definitions):
            if is_async is False and base_is_async is True:
                raise TypeError(
                    f"{where} ({cls.__name__}): {owner.__qualname__}.{method} is a plain 'def' "
                    f"overriding the 'async def' {base.__qualname__}.{method}, so calling "
                    f"super().{method}(...) from it would only create a coroutine and drop it "
                    f"(the work of {base.__name__}.{method} would never happen). Write "
                    f"'async def {method}(...)' and 'await super().{method}(...)'."
                )


def _is_async(attribute: object) -> bool | None:
    """True for an async function, False for a plain one, None for anything else."""
    if isinstance(attribute, staticmethod | classmethod):
        attribute = attribute.__func__
    if inspect.isfunction(attribute) or isinstance(attribute, functools.partial):
        return inspect.iscoroutinefunction(attribute)
    return None


def _members(hook: object) -> tuple[object, ...]:
    """The hooks a composite hook (``sequential``, ``in_thread``) wraps; ``()`` for others."""
    if isinstance(hook, _SequentialHook):
        return hook.members
    if isinstance(hook, _ThreadedHook):
        return (hook.hook,)
    return ()
