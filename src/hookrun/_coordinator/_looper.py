"""``Coordinator.loop``'s task: TensorFlow's ``LooperThread``, as a task of the coordinator.

It calls a function (plain or async) at fixed boundaries (start, start + interval,
...) until stop is requested, through the coordinator's public API only
(``should_stop``, ``wait_for_stop``); an exception from the function ends the task,
and the coordinator records it like any task's. A clock other than the event loop's
(``hookrun.testing.MockClock``) is waited on through its async ``sleep_until`` when
it has one, never polled.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from ._signal import checkpoint

if TYPE_CHECKING:
    from .._timer import Clock
    from ._tasks import Coordinator

__all__ = ["run_loop"]


async def run_loop(
    coord: Coordinator,
    interval: float,
    fn: Callable[..., object],
    args: tuple[object, ...],
    clock: Clock | None = None,
) -> None:
    """Call ``fn(*args)`` every ``interval`` seconds (0: back to back) until ``coord`` stops."""
    next_call = anyio.current_time() if clock is None else clock()
    while not coord.should_stop():
        result = fn(*args)
        if inspect.isawaitable(result):
            await result
        if interval:
            next_call += interval
            if clock is None:
                await coord.wait_for_stop(next_call - anyio.current_time())
            else:
                await _wait_for_stop_or_clock(coord, clock, next_call)
        else:
            await checkpoint()


async def _wait_for_stop_or_clock(coord: Coordinator, clock: Clock, deadline: float) -> None:
    """Wait until stop is requested or ``clock()`` reaches ``deadline``."""
    async with anyio.create_task_group() as tg:

        async def wake_at_deadline() -> None:
            await _sleep_until(clock, deadline)
            tg.cancel_scope.cancel()

        tg.start_soon(wake_at_deadline)
        await coord.wait_for_stop()
        tg.cancel_scope.cancel()


async def _sleep_until(clock: Clock, deadline: float) -> None:
    """Wait until ``clock()`` reads at least ``deadline``.

    A clock with an async ``sleep_until`` is waited on; any other clock is
    assumed to run at the event loop's pace and slept on for the time left.
    """
    sleep_until = getattr(clock, "sleep_until", None)
    if sleep_until is not None:
        await sleep_until(deadline)
        return
    while (left := deadline - clock()) > 0:  # noqa: ASYNC110 - nothing to wait on but time
        await anyio.sleep(left)
