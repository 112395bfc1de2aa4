"""Per-step state with steps in flight: on ``self`` it breaks, in the step's run context
it holds.

``EveryTenthOnSelf`` keeps a step's decision on ``self`` between its ``before_run`` and
its ``after_run``; with steps in flight the next step's ``before_run`` overwrites it,
so a session with ``max_in_flight > 1`` refuses it (it does not declare
``overlapping_steps``). ``EveryTenth`` keeps it in ``run_context.step_state`` and
declares ``overlapping_steps = True``: ``main()`` runs it with four steps in flight
and it prints the loss of steps 0, 10 and 20, as it would one step at a time.
"""

from __future__ import annotations

import sys

import anyio

import hookrun
from hookrun import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from hookrun.hooks import StopAtStepHook


# --8<-- [start:wrong]
class EveryTenthOnSelf(SessionRunHook):  # wrong under overlap
    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self.due = run_context.global_step % 10 == 0  # step n sets it ...
        return SessionRunArgs("loss") if self.due else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self.due:  # ... step n+1 overwrote it
            print(run_values.results)
# --8<-- [end:wrong]


# --8<-- [start:right]
class EveryTenth(SessionRunHook):
    overlapping_steps = True  # checked: nothing per-step lives on self

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        due = run_context.global_step % 10 == 0
        run_context.step_state[self] = due
        return SessionRunArgs("loss") if due else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if run_context.step_state.get(self):
            print(run_values.results)
# --8<-- [end:right]


async def create() -> hookrun.StepSession:
    async def step(feed: dict[str, float]) -> dict[str, float]:
        await anyio.sleep(0.001)  # a step that waits, so that steps overlap
        return {"loss": feed["x"]}

    return hookrun.StepSession(step)


async def main(hook: SessionRunHook | None = None, steps: int = 25, in_flight: int = 4) -> None:
    """Run ``steps`` steps, ``in_flight`` at a time, with ``hook`` (an ``EveryTenth``)."""
    hooks = [hook or EveryTenth(), StopAtStepHook(last_step=steps)]
    feeds = ({"x": float(x)} for x in range(steps))
    async with hookrun.MonitoredSession(create, hooks, max_in_flight=in_flight) as session:
        async for _ in session.iterate([], feeds):
            pass


if __name__ == "__main__":
    anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio")
