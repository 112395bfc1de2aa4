"""The coroutines of the step path stay small enough for Python's small-object allocator.

CPython makes a coroutine object together with its frame: the more locals and stack a
coroutine function needs, the bigger the object. Objects of up to 512 bytes come from
the small-object allocator; a bigger one is taken from ``malloc`` and given back on
every call. On a step that waits, where every call runs with cold caches, the step's
coroutine going over that limit cost 0.6-0.9 us a step (a fifth of a step with one
plain hook): a local added to a step function must not push it over again.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import platform
import sys
import types
from collections.abc import Iterator

import pytest

import hookrun._dispatch
import hookrun._session

SMALL_OBJECT_LIMIT = 512  # CPython's small-object allocator (obmalloc) takes requests up to this size

pytestmark = pytest.mark.skipif(
    platform.python_implementation() != "CPython", reason="the small-object allocator is CPython's"
)


def _modules() -> Iterator[types.ModuleType]:
    for package in (hookrun._session, hookrun._dispatch):
        yield package
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            yield importlib.import_module(info.name)
    yield importlib.import_module("hookrun._global_step")


def _coroutine_functions() -> Iterator[tuple[str, types.FunctionType]]:
    seen: set[types.CodeType] = set()
    for module in _modules():
        for owner in (module, *(v for v in vars(module).values() if isinstance(v, type))):
            for value in list(vars(owner).values()):
                fn = inspect.unwrap(value) if callable(value) else None
                if (
                    isinstance(fn, types.FunctionType)
                    and inspect.iscoroutinefunction(fn)
                    and fn.__module__ == module.__name__
                    and fn.__code__ not in seen
                ):
                    seen.add(fn.__code__)
                    yield f"{module.__name__}.{fn.__qualname__}", fn


def _size(fn: types.FunctionType) -> int:
    code = fn.__code__
    positional = [None] * code.co_argcount
    keywords = {name: None for name in code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]}
    coro = fn(*positional, **keywords)
    try:
        return sys.getsizeof(coro)
    finally:
        coro.close()


def test_the_step_functions_are_found() -> None:
    names = {name for name, _ in _coroutine_functions()}
    assert "hookrun._session._stepping.general_step" in names
    assert "hookrun._session._base._MonitoredSessionBase.run" in names


@pytest.mark.parametrize(("name", "fn"), list(_coroutine_functions()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_step_coroutine_fits_the_small_object_allocator(name: str, fn: types.FunctionType) -> None:
    size = _size(fn)
    assert size <= SMALL_OBJECT_LIMIT, (
        f"{name}: its coroutine takes {size} bytes, over the {SMALL_OBJECT_LIMIT} the small-object "
        "allocator serves; fewer locals (reuse one, move a rare branch into a function) bring it back"
    )


def test_the_measure_sees_a_big_frame() -> None:
    namespace: dict[str, object] = {}
    exec(  # a coroutine with 60 locals: far over the limit
        "async def big():\n" + "".join(f"    v{i} = {i}\n" for i in range(60)) + "    return v0\n",
        namespace,
    )
    assert _size(namespace["big"]) > SMALL_OBJECT_LIMIT  # type: ignore[arg-type]
