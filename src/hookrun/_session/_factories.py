"""What a session creator may be: one rule for every entry point.

``MonitoredSession``, ``SingularMonitoredSession``, ``MonitoredTrainingSession``,
``ChiefSessionCreator`` and ``WorkerSessionCreator`` all take the same things: a
function of no arguments returning a session, sync or async (a sync one may hand back
an awaitable, which is awaited), or an object whose ``create_session()`` is such a
function. A sync one is called in the event loop's thread. Checked once, when the
creator is given; a refusal names the function as the user wrote it. Pure checks
and one small coroutine; no state.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .._dispatch._plan import is_async_callable

__all__ = ["call_factory", "check_factory", "creator_function", "name_of", "plain_signature"]


def creator_function(creator: object) -> Callable[[], Awaitable[Any]]:
    """The async function that creates a session, from a creator object or a factory."""
    if inspect.iscoroutine(creator):
        name = getattr(creator, "__name__", "create")
        creator.close()  # never awaited, and never will be: no "never awaited" warning
        raise TypeError(
            f"session_creator is a coroutine object ({name}() was called): pass the async "
            f"factory itself, session_creator={name}, not {name}()"
        )
    method = getattr(creator, "create_session", None)
    if method is not None:
        if isinstance(creator, type):
            raise TypeError(
                f"session_creator is the class {creator.__qualname__}; pass an instance, "
                f"{creator.__qualname__}(...)"
            )
        check_factory("session_creator's create_session", method)
        return method if is_async_callable(method) else functools.partial(call_factory, method)
    if not callable(creator):
        raise TypeError(
            "session_creator must be a function of no arguments returning a session (sync "
            "or async) or an object with a create_session() method, got "
            f"{type(creator).__name__} {_short(creator)}"
        )
    check_factory("session_creator", creator)
    return creator if is_async_callable(creator) else functools.partial(call_factory, creator)


def check_factory(what: str, factory: object) -> None:
    """Refuse, naming it, a ``factory`` that is not callable or cannot be called with no
    arguments (``what``: how the user gave it)."""
    if not callable(factory):
        raise TypeError(
            f"{what} must be a function of no arguments returning a session, got "
            f"{type(factory).__name__} {_short(factory)}"
        )
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    try:
        signature.bind()
    except TypeError:
        raise TypeError(
            f"{what} {name_of(factory)} needs arguments {plain_signature(signature)}, but a "
            "session creator is called with none; bind them first, with a lambda or functools.partial"
        ) from None


async def call_factory(factory: Callable[[], Any]) -> Any:
    """Call a sync or async ``factory``; await what it returns if that is awaitable."""
    session = factory()
    if inspect.isawaitable(session):
        session = await session
    return session


def plain_signature(signature: inspect.Signature) -> str:
    """``signature`` without its annotations: ``(fetches, feed_dict=None)``."""
    empty = inspect.Parameter.empty
    params = [param.replace(annotation=empty) for param in signature.parameters.values()]
    return str(signature.replace(parameters=params, return_annotation=empty))


def name_of(obj: object) -> str:
    """How the user wrote ``obj``: a function's or class's qualified name, else its type's."""
    if isinstance(obj, functools.partial):
        return f"functools.partial({name_of(obj.func)}, ...)"
    name = getattr(obj, "__qualname__", None)  # a bound method's is Class.method
    return name if isinstance(name, str) else f"{type(obj).__name__} object"


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
