"""Ways to write a hook: a class with async and plain methods, a blocking hook in a thread,
hooks in a fixed order, functions turned into hooks with schedules, and a hook that
releases its file on every exit.

``main(steps)`` runs them all on one session and returns what each saw, so the
tests can check when every schedule fired; ``failing(path)`` runs the file-holding
hook through a session that fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

import hookrun
from hookrun.hooks import every, on_after_run, on_before_run, on_end


# --8<-- [start:class]
class LossWatcher(hookrun.SessionRunHook):
    """Asks for the loss every step, keeps the best one, stops when it is good enough."""

    def __init__(self, good_enough: float) -> None:
        self.good_enough = good_enough
        self.best = float("inf")

    def begin(self) -> None:  # plain: runs inline on the event loop, must not block
        self.best = float("inf")

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs({"loss": "loss"})  # fetched by key, merged with the others

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        loss = run_values.results["loss"]  # exactly the structure this hook asked for
        self.best = min(self.best, loss)
        if loss <= self.good_enough:
            run_context.request_stop()  # the session stops after this step
# --8<-- [end:class]


# --8<-- [start:in_thread]
class JsonLinesLog:
    """A hook whose after_run blocks (file I/O): wrap it with in_thread."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs("loss")

    def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        with self.path.open("a") as file:  # blocking: runs in a worker thread
            file.write(json.dumps({"step": run_values.global_step, "loss": run_values.results}) + "\n")
# --8<-- [end:in_thread]


# --8<-- [start:on_exception]
class CsvLog(hookrun.SessionRunHook):
    """Holds a file open from begin until the session exits, whichever way it exits."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: anyio.AsyncFile[str] | None = None

    async def begin(self) -> None:
        self.file = await anyio.open_file(self.path, "w")

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return hookrun.SessionRunArgs("loss")

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        assert self.file is not None
        await self.file.write(f"{run_values.global_step},{run_values.results}\n")

    async def end(self, session: Any) -> None:  # a clean end
        await self.close()

    async def on_exception(self, session: Any, exception: BaseException) -> None:  # an error, a cancellation
        await self.close()  # the lines written so far are kept

    async def close(self) -> None:
        file, self.file = self.file, None
        if file is not None:
            await file.aclose()
# --8<-- [end:on_exception]


async def failing(path: Path, steps: int = 3) -> CsvLog:
    """Run ``CsvLog`` for ``steps`` steps, then fail: its file is closed all the same."""
    async def step(feed: dict[str, float]) -> dict[str, float]:
        return {"loss": 0.5}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    log = CsvLog(path)
    try:
        async with hookrun.MonitoredSession(create, [log]) as session:
            for _ in range(steps):
                await session.run()
            raise RuntimeError("the input broke")
    except RuntimeError:
        pass
    return log


class Tagger(hookrun.SessionRunHook):
    """Appends its tag to a shared list in after_run; "first" takes a while about it."""

    def __init__(self, tag: str, order: list[str]) -> None:
        self.tag, self.order = tag, order

    async def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        if self.tag == "first":
            await anyio.sleep(0.002)  # run concurrently, "second" would finish before "first"
        self.order.append(self.tag)


def function_hooks(seen: dict[str, list[int]]) -> list[object]:
    """Function hooks on the documented schedules; each records the steps it fired at."""

    # --8<-- [start:functions]
    @on_after_run(every_n_steps=10)
    def every_ten(run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        seen["every_ten"].append(run_values.global_step)  # the step after the run: 1, 11, 21

    @on_before_run(every_n_steps=10)
    def before_every_ten(run_context: hookrun.SessionRunContext) -> None:
        seen["before_every_ten"].append(run_context.global_step)  # the step before the run: 0, 10, 20

    @on_after_run(every_n_steps=10, fetches={"loss": "loss"})  # fetched only on the steps it fires
    async def report(run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        seen["report"].append(run_values.global_step)
        await anyio.lowlevel.checkpoint()  # e.g. push run_values.results["loss"] to a service

    @on_after_run(trigger=every(steps=100) | every(seconds=0.05))  # whichever comes first
    def steps_or_time(run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        seen["steps_or_time"].append(run_values.global_step)

    @on_after_run(once_at_step=5)
    def once(run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        seen["once"].append(run_values.global_step)

    @on_end
    def finished(session: Any) -> None:
        seen["end"].append(0)
    # --8<-- [end:functions]

    return [every_ten, before_every_ten, report, steps_or_time, once, finished]


async def main(steps: int = 25, log_path: Path | None = None) -> dict[str, Any]:
    async def step(feed: dict[str, float]) -> dict[str, float]:
        await anyio.sleep(0.001)
        return {"loss": 1.0 / (1.0 + feed["x"])}

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(step)

    seen: dict[str, list[int]] = {name: [] for name in
                                  ("every_ten", "before_every_ten", "report", "steps_or_time", "once", "end")}
    ordered: list[str] = []
    watcher = LossWatcher(good_enough=1.0 / (1.0 + steps - 1))
    # --8<-- [start:list]
    hooks = [
        watcher,
        hookrun.sequential(Tagger("first", ordered), Tagger("second", ordered)),  # one after the other
        *function_hooks(seen),
    ]
    if log_path is not None:
        hooks.append(hookrun.in_thread(JsonLinesLog(log_path)))
    # --8<-- [end:list]
    feeds = ({"x": float(x)} for x in range(10 * steps))
    async with hookrun.MonitoredSession(create, hooks) as session:
        async for _ in session.iterate(feeds=feeds):
            pass
    return {"seen": seen, "best": watcher.best, "ordered": ordered[:2]}


if __name__ == "__main__":
    print(anyio.run(main))
