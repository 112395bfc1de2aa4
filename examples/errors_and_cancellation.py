"""What happens when things go wrong: recovery from an error type of your own, a hook
that hangs, a hook that fails, and a run cancelled from outside.

Each function returns what it observed, so the tests can check every claim the
documentation makes about it.
"""

from __future__ import annotations

from typing import Any

import anyio

import hookrun
from hookrun.testing import ScriptedCreator


# --8<-- [start:recoverable]
class WorkerGone(Exception):
    """Your transport's "the remote worker died" error."""


async def recover_from_your_own_error() -> tuple[list[int], int]:
    # The first session fails its third run: the session is re-created and that step re-run.
    creator = ScriptedCreator({"y": lambda step, feed: feed["x"] * 10},
                              session_errors={0: {2: WorkerGone("worker 0 died")}})
    policy = hookrun.RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=1.0)
    async with hookrun.MonitoredSession(creator, recoverable=[WorkerGone], retry=policy) as session:
        results = [y async for y in session.iterate("y", [{"x": x} for x in range(5)])]
    return results, len(creator.sessions)  # [0, 10, 20, 30, 40] on 2 sessions
# --8<-- [end:recoverable]


# --8<-- [start:timeout]
class Stuck(hookrun.SessionRunHook):
    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        await anyio.sleep_forever()  # a hook waiting on something that never comes


async def a_hook_that_hangs() -> hookrun.HookTimeoutError:
    creator = ScriptedCreator({"y": 1})
    try:
        async with hookrun.MonitoredSession(creator, [Stuck()], hook_timeout=0.05) as session:
            await session.run("y")
    except hookrun.HookTimeoutError as exc:
        assert creator.sessions[0].closed == 1  # the session was closed all the same
        return exc  # exc.hook is the Stuck instance, exc.phase "after_run", exc.limit 0.05
    raise AssertionError("the hook was not timed out")
# --8<-- [end:timeout]


# --8<-- [start:failing]
class Fails(hookrun.SessionRunHook):
    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        raise ValueError("this hook is broken")


class Waits(hookrun.SessionRunHook):
    def __init__(self) -> None:
        self.cancelled = False

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled = True  # a failing sibling cancels the rest of its phase
            raise


async def a_hook_that_fails() -> tuple[ValueError, bool]:
    waits = Waits()
    try:
        async with hookrun.MonitoredSession(ScriptedCreator({"y": 1}), [waits, Fails()]) as session:
            await session.run("y")
    except ValueError as exc:  # the hook's own exception, not an ExceptionGroup
        return exc, waits.cancelled
    raise AssertionError("the failure was lost")
# --8<-- [end:failing]


# --8<-- [start:cancel]
async def cancelled_from_outside() -> dict[str, Any]:
    creator = ScriptedCreator({"y": 1}, hang_at={0: [3]})  # the fourth run never answers
    steps = 0
    with anyio.move_on_after(0.1) as scope:  # or a task group cancelled by someone else
        async with hookrun.MonitoredSession(creator) as session:
            async for _ in session.iterate("y"):
                steps += 1
    return {"cancelled": scope.cancelled_caught, "steps": steps, "closed": creator.sessions[0].closed}
# --8<-- [end:cancel]


async def main() -> None:
    print(await recover_from_your_own_error())
    print(repr(await a_hook_that_hangs()))
    print(await a_hook_that_fails())
    print(await cancelled_from_outside())


if __name__ == "__main__":
    anyio.run(main)
