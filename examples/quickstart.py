"""The README's quick start: a pipeline step with two hooks."""

from __future__ import annotations

from typing import Any

import anyio

import hookrun


class Progress(hookrun.SessionRunHook):
    def before_run(self, ctx: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs({"loss": "loss"})  # plain functions run inline

    def after_run(self, ctx: hookrun.SessionRunContext, values: hookrun.SessionRunValues) -> None:
        print(values.global_step, values.results)


class StopAt(hookrun.SessionRunHook):
    async def after_run(self, ctx: hookrun.SessionRunContext, values: hookrun.SessionRunValues) -> None:
        if values.global_step >= 3:  # async hooks of a phase run concurrently
            ctx.request_stop()


async def step(feed: Any) -> dict[str, float]:  # one step of your pipeline
    return {"loss": 1.0 / (1 + feed["x"]), "y": feed["x"] * 2}


async def create_session() -> hookrun.StepSession:
    return hookrun.StepSession(step)


async def main() -> list[Any]:
    outputs = []
    async with hookrun.MonitoredSession(create_session, [Progress(), StopAt()]) as sess:
        while not sess.should_stop():
            outputs.append(await sess.run("y", {"x": 21}))
    return outputs


if __name__ == "__main__":
    print(anyio.run(main))  # or anyio.run(main, backend="trio")
