"""``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` raised by a hook come out
as themselves, never in a ``BaseExceptionGroup``: in every phase, whether the hook runs
in the calling task or in a worker (after a sibling that waits), and a sibling that
waits is cancelled and ends in its own task."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import MonitoredSession, SessionRunHook
from hookrun._dispatch._failures import raise_first

pytestmark = pytest.mark.anyio

LIMIT = 10.0
PHASES = ["begin", "after_create_session", "before_run", "after_run", "end"]
BASE_EXCEPTIONS = [KeyboardInterrupt, SystemExit, GeneratorExit]


class _Raises(SessionRunHook):
    """Its ``phase`` raises ``error`` (after one checkpoint when ``suspend_first``, once
    ``sibling`` started when given)."""

    def __init__(
        self, phase: str, error: BaseException, *, suspend_first: bool, sibling: _Waits | None = None
    ) -> None:
        self.error, self.suspend_first, self.sibling = error, suspend_first, sibling
        setattr(self, phase, self._call)

    async def _call(self, *args: Any) -> None:
        if self.suspend_first:
            await anyio.lowlevel.checkpoint()
        if self.sibling is not None:
            await self.sibling.started.wait()
        raise self.error


class _Waits(SessionRunHook):
    """Its ``phase`` waits for ever; records the task it started and ended in."""

    def __init__(self, phase: str) -> None:
        self.tasks: list[int] = []
        self.started = anyio.Event()
        setattr(self, phase, self._call)

    async def _call(self, *args: Any) -> None:
        self.tasks.append(anyio.get_current_task().id)
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.tasks.append(anyio.get_current_task().id)


class _Session:
    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        return [1 for _ in fetches]


async def _creator() -> _Session:
    return _Session()


def _hooks(where: str, phase: str, error: BaseException) -> tuple[list[Any], _Waits | None]:
    if where == "alone":
        return [_Raises(phase, error, suspend_first=True)], None
    waits = _Waits(phase)
    if where == "calling task":  # it suspends first, so the waiting sibling starts in a worker
        return [_Raises(phase, error, suspend_first=True, sibling=waits), waits], waits
    # in a worker: the sibling before it waits, so a worker starts it
    return [waits, _Raises(phase, error, suspend_first=where == "worker, after suspending")], waits


@pytest.mark.parametrize("error_type", BASE_EXCEPTIONS)
@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("where", ["alone", "calling task", "worker, at once", "worker, after suspending"])
async def test_a_base_exception_from_a_hook_propagates_as_itself(
    error_type: type[BaseException], phase: str, where: str
) -> None:
    """The hook's own exception object leaves the block, not a group holding it; a
    sibling still waiting in that phase was cancelled and ended in its own task."""
    error = error_type("from the hook")
    hooks, waits = _hooks(where, phase, error)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error_type) as info:
            async with MonitoredSession(_creator, hooks) as sess:
                await sess.run(["x"])
    assert info.value is error and type(info.value) is error_type
    if waits is not None:
        assert len(waits.tasks) == 2 and waits.tasks[0] == waits.tasks[1]


def test_a_base_exception_wins_over_an_earlier_hooks_error() -> None:
    """Several hooks failed in one phase: a KeyboardInterrupt propagates even when an
    earlier hook's ordinary error came first in list order; that one becomes a note."""
    interrupt, earlier = KeyboardInterrupt(), ValueError("earlier")
    with pytest.raises(KeyboardInterrupt) as info:
        raise_first([(1, interrupt), (0, earlier)], "after_run", ["first", "second"])
    assert info.value is interrupt
    assert info.value.__notes__ == ["hookrun: hook first also failed in after_run: ValueError('earlier')"]
