"""The running backend's cheapest primitives: one-shot wake-ups and cancel scopes.

The dispatcher parks a pooled worker until a phase hands it calls, and parks the
calling task until the workers of a phase are done. ``anyio.Event`` does this
through two layers of generality (any number of waiters, a checkpoint when
already set, the backend looked up per event) that cost more than the hooks they
wait for: with 10 hooks that suspend once, a step spends about a third of its
time in events. A :class:`Waker` has one waiter and one ``set``:

* asyncio (and uvloop): the waiter awaits a bare future of the running loop;
* trio: the waiter parks with ``wait_task_rescheduled`` and ``set`` reschedules it;
* any other anyio backend: an ``anyio.Event``.

``wait`` returns at once, without a checkpoint, if ``set`` came first; a second
``set`` does nothing; a cancelled ``wait`` raises the backend's cancellation, and a
``set`` after it does nothing. Cancel scopes, shielding included, apply to ``wait``
as to any other blocking call of the backend.

``scope_factory`` gives the cancel scope class of the running backend: on trio,
``trio.CancelScope`` itself (anyio's wraps it and costs half as much again to
enter and exit, 8.6 against 5.4 us); elsewhere anyio's own class, looked up once
(``anyio.CancelScope()`` looks the backend up on every call). Either has anyio's
``cancel()``, ``cancel_called`` and shielding semantics.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

import anyio

__all__ = ["Waker", "Wakers", "scope_factory", "waker_factory"]


class Waker(Protocol):
    """Wakes the one task that waits on it (or lets it through, if set first)."""

    def set(self) -> None: ...

    async def wait(self) -> None: ...


def waker_factory() -> Callable[[], Waker]:
    """The :class:`Waker` class for the running event loop (call it inside that loop)."""
    backend = type(anyio.Event()).__module__  # e.g. "anyio._backends._asyncio"
    if backend.endswith("._asyncio"):
        return _asyncio_waker()
    if backend.endswith("._trio"):
        return _trio_waker()
    return anyio.Event


class Wakers:
    """Makes :class:`Waker` s of the running event loop; the backend is looked up at the
    first call, so an object that needs wake-ups can be made before its loop runs."""

    __slots__ = ("_new",)

    def __init__(self) -> None:
        self._new: Callable[[], Waker] | None = None

    def __call__(self) -> Waker:
        new = self._new
        if new is None:
            new = self._new = waker_factory()
        return new()


def scope_factory() -> Callable[[], anyio.CancelScope]:
    """The cancel scope class for the running event loop (call it inside that loop)."""
    anyio_class = type(anyio.CancelScope())
    if anyio_class.__module__.endswith("._trio"):
        import trio

        return trio.CancelScope  # type: ignore[return-value]
    return anyio_class


def _asyncio_waker() -> Callable[[], Waker]:
    import asyncio

    create_future = asyncio.get_running_loop().create_future

    class _AsyncioWaker:
        """The waiter awaits a future of the running loop; ``set`` resolves it."""

        __slots__ = ("future", "is_set")

        def __init__(self) -> None:
            self.future: Any = None
            self.is_set = False

        def set(self) -> None:
            if not self.is_set:
                self.is_set = True
                future = self.future
                if future is not None and not future.done():  # done: the wait was cancelled
                    future.set_result(None)

        async def wait(self) -> None:
            if not self.is_set:
                self.future = create_future()
                await self.future

    return _AsyncioWaker


@functools.cache  # one class for every trio run (the asyncio one is bound to its loop)
def _trio_waker() -> Callable[[], Waker]:
    from trio.lowlevel import Abort, current_task, reschedule, wait_task_rescheduled

    class _TrioWaker:
        """The waiter parks its task; ``set`` reschedules it (unless its wait was aborted)."""

        __slots__ = ("is_set", "task")

        def __init__(self) -> None:
            self.task: Any = None
            self.is_set = False

        def set(self) -> None:
            if not self.is_set:
                self.is_set = True
                task = self.task
                if task is not None:
                    self.task = None
                    reschedule(task)

        async def wait(self) -> None:
            if not self.is_set:
                self.task = current_task()
                await wait_task_rescheduled(self._abort)

        def _abort(self, _: object) -> Abort:
            self.task = None  # cancelled: a later set() must not reschedule the task
            return Abort.SUCCEEDED

    return _TrioWaker
