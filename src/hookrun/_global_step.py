"""The global step: the ``StepCounter`` protocol and the in-memory ``LocalStepCounter``.

Invariants: the value never decreases through ``increment``; ``wait_for``
never polls: waiters park on an event that ``increment``/``set`` wake.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import anyio

__all__ = ["LocalStepCounter", "StepCounter", "check_step_value", "step_at_start"]


@runtime_checkable
class StepCounter(Protocol):
    """A global step shared by the hooks of a monitored session (and, for a
    distributed counter, by every worker of a job).

    A counter may also offer a synchronous ``recent() -> int | None``: a value it
    read or wrote itself moments ago, or ``None``. A monitored session then takes a
    step's ``run_context.global_step`` from it instead of awaiting ``get()``,
    saving a remote round trip per step on a distributed counter.
    """

    async def get(self) -> int:
        """The current value."""
        ...

    async def increment(self, n: int = 1) -> int:
        """Add ``n`` and return the new value."""
        ...

    async def set(self, value: int) -> None:
        """Set the value (a creator restoring a checkpoint does this)."""
        ...

    async def wait_for(self, target: int) -> int:
        """Wait, without polling, until the value is at least ``target``; return it."""
        ...


class LocalStepCounter:
    """An in-memory step counter for one process.

    ``value`` reads the counter synchronously; the async methods implement
    :class:`StepCounter`.

    Args:
        initial: The value the counter starts at.
    """

    __slots__ = ("_changed", "value")

    def __init__(self, initial: int = 0) -> None:
        check_step_value("LocalStepCounter(initial=...)", initial)
        self.value = initial
        self._changed: anyio.Event | None = None

    def __repr__(self) -> str:
        return f"LocalStepCounter({self.value})"

    async def get(self) -> int:
        return self.value

    async def increment(self, n: int = 1) -> int:
        return self.increment_nowait(n)

    def increment_nowait(self, n: int = 1) -> int:
        """Add ``n`` without a checkpoint (the monitored session's hot path)."""
        self.value += n
        if self._changed is not None:
            self._wake()
        return self.value

    async def set(self, value: int) -> None:
        check_step_value("step counter value", value)
        self.value = value
        self._wake()

    async def wait_for(self, target: int) -> int:
        while self.value < target:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
        return self.value

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()


async def step_at_start(counter: StepCounter) -> int:
    """A step's ``run_context.global_step``: the counter's ``recent()`` if it has one
    and it answers, else ``await counter.get()``."""
    recent = getattr(counter, "recent", None)
    if recent is not None:
        value = recent()
        if value is not None:
            return value  # type: ignore[no-any-return]
    return await counter.get()


def check_step_value(what: str, value: object) -> None:
    """A step counter's values are ints (never bools): a TypeError naming ``what`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {value!r}")
