"""Cancellation at every schedule point of ``run()`` and of the ``async with`` body,
on both backends, with the invariants checked after each; plus the regressions found."""

from __future__ import annotations

import anyio
import pytest

from hookrun import MonitoredSession, SessionRunContext, SessionRunHook
from hookrun.testing import ScriptedCreator

# -- regressions: a failing hook must cancel its siblings, also in a phase's first run ------


class _WaitsForever(SessionRunHook):
    """Waits on an event nobody sets, in every phase it is asked to."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.cancelled = False

    async def _wait(self) -> None:
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True
            raise

    async def begin(self) -> None:
        if self.phase == "begin":
            await self._wait()

    async def before_run(self, run_context: SessionRunContext) -> None:
        if self.phase == "before_run":
            await self._wait()

    async def end(self, session: object) -> None:
        if self.phase == "end":
            await self._wait()


class _Fails(SessionRunHook):
    def __init__(self, phase: str) -> None:
        self.phase = phase

    async def begin(self) -> None:
        if self.phase == "begin":
            raise ValueError("boom in begin")

    async def before_run(self, run_context: SessionRunContext) -> None:
        if self.phase == "before_run":
            raise ValueError("boom in before_run")

    async def end(self, session: object) -> None:
        if self.phase == "end":
            raise ValueError("boom in end")


_FIRST_RUN_BUG = (
    "bug: in the first run of a phase (PhasePlan.scoped is False) _Dispatcher._run_many "
    "drives the first suspending hook outside any cancel scope (own_scope=None), so a "
    "sibling's failure cannot cancel it: the phase hangs until that hook ends"
)


@pytest.mark.anyio
@pytest.mark.parametrize("phase", ["begin", "before_run", "end"])
async def test_failing_hook_cancels_waiting_sibling_in_first_run_of_phase(phase: str) -> None:
    """A hook failing in a phase's very first run cancels a sibling that waits forever."""
    waiting = _WaitsForever(phase)
    with anyio.fail_after(0.5), pytest.raises(ValueError, match=f"boom in {phase}"):
        async with MonitoredSession(ScriptedCreator(), [waiting, _Fails(phase)]) as sess:
            if phase == "before_run":
                await sess.run()
    assert waiting.cancelled
