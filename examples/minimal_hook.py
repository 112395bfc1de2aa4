"""The smallest useful hook: count steps and stop after three."""

from __future__ import annotations

import anyio

import hookrun


class StopAfter(hookrun.SessionRunHook):
    """Requests stop once the global step reaches ``last_step``."""

    def __init__(self, last_step: int) -> None:
        self.last_step = last_step

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        if run_values.global_step >= self.last_step:
            run_context.request_stop()


async def main() -> list[int]:
    async def square(feed_dict: object) -> dict[str, int]:
        assert isinstance(feed_dict, dict)
        return {"y": feed_dict["x"] ** 2}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(square)

    outputs = []
    async with hookrun.MonitoredSession(create, [StopAfter(3)]) as sess:
        x = 1
        while not sess.should_stop():
            outputs.append(await sess.run("y", {"x": x}))
            x += 1
    print("squares:", outputs)
    return outputs


if __name__ == "__main__":
    anyio.run(main)
