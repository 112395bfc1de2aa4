"""The README's quick start: a pipeline step, a hook of your own and a built-in one."""

import anyio

import hookrun
from hookrun.hooks import StopAtStepHook


async def step(feed: dict[str, float]) -> dict[str, float]:
    """One step of your pipeline: usually a remote call (Ray, Dask, HTTP...)."""
    await anyio.sleep(0.01)
    return {"loss": 1.0 / (1.0 + feed["x"]), "y": 2.0 * feed["x"]}


async def create_session() -> hookrun.StepSession:
    return hookrun.StepSession(step)


class PrintLoss(hookrun.SessionRunHook):
    """Asks for the loss before every step and prints it after."""

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs("loss")  # a plain method: called inline, must not block

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        print(f"step {run_values.global_step}: loss {run_values.results:.3f}")  # async: may await


async def main() -> list[float]:
    hooks = [PrintLoss(), StopAtStepHook(last_step=3)]
    feeds = ({"x": float(x)} for x in range(10))  # any iterable or async iterable of feed dicts
    async with hookrun.MonitoredSession(create_session, hooks) as session:
        ys = [y async for y in session.iterate("y", feeds)]  # one step per feed, until a stop
    return ys


if __name__ == "__main__":
    print(anyio.run(main))  # or: anyio.run(main, backend="trio")
