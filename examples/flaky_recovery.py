"""Recovery from a flaky session: every third step the worker is "lost".

The session raises ``hookrun.UnavailableError``; the monitored session closes
it, creates a new one through the creator (hooks see ``after_create_session``
again, never ``begin``) and re-runs the step, with backoff from a
``RetryPolicy``. The step counter survives recovery.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio

import hookrun


class FlakyWorker:
    """A remote-worker stand-in: fails its ``fail_at``-th call, then keeps working."""

    def __init__(self, number: int, fail_at: int | None) -> None:
        self.number = number
        self.calls = 0
        self.fail_at = fail_at
        self.closed = False

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: hookrun.RunOptions,
        run_metadata: hookrun.RunMetadata,
    ) -> list[Any]:
        self.calls += 1
        await anyio.lowlevel.checkpoint()  # a remote call would really wait here
        if self.calls == self.fail_at:
            raise hookrun.UnavailableError(f"worker {self.number} lost")
        return [f"worker-{self.number}" for _ in fetches]

    async def aclose(self) -> None:
        self.closed = True


class Creator:
    """Creates workers; the first two are flaky."""

    def __init__(self) -> None:
        self.workers: list[FlakyWorker] = []

    async def create_session(self) -> FlakyWorker:
        number = len(self.workers)
        worker = FlakyWorker(number, fail_at=3 if number < 2 else None)
        self.workers.append(worker)
        return worker


class Reconnects(hookrun.SessionRunHook):
    """Counts session (re)creations."""

    def __init__(self) -> None:
        self.created = 0

    async def after_create_session(self, session: Any, coord: hookrun.Coordinator) -> None:
        self.created += 1


async def main(steps: int = 8) -> tuple[list[str], int, int]:
    creator = Creator()
    reconnects = Reconnects()
    policy = hookrun.RetryPolicy(initial_delay=0.001, max_attempts=5)
    answers = []
    async with hookrun.MonitoredSession(creator, [reconnects], retry=policy) as sess:
        for _ in range(steps):
            answers.append(await sess.run("who"))
        step = await sess.global_step()
        assert sess.raw_session() is creator.workers[-1]  # the session now in use
    print(f"{len(answers)} steps on {reconnects.created} sessions; global step {step}")
    assert all(worker.closed for worker in creator.workers)
    return answers, reconnects.created, step


if __name__ == "__main__":
    anyio.run(main)
