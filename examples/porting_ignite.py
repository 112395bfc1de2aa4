"""Callbacks of PyTorch Ignite (and Keras) as hookrun hooks.

Ignite's ``Engine(process_fn).run(data, max_epochs=N)`` becomes a monitored
session iterated over feeds: epochs are a property of the input, so the feed
generator carries the epoch number, the batch's index in its epoch and marks
each epoch's last batch. Event handlers become hooks: ``ITERATION_COMPLETED(every=n)``
is ``@on_after_run(when=lambda step: step % n == 0)``, ``EPOCH_COMPLETED`` a hook
that looks at the step's feed, ``COMPLETED`` an ``@on_end`` function. Ignite's
``EarlyStopping`` (patience counted in evaluations, its ``cumulative_delta``
switch) is ``IgniteEarlyStopping``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import anyio

import hookrun
from hookrun.hooks import on_after_run, on_end


# --8<-- [start:step]
async def train_step(feed: dict[str, Any]) -> dict[str, float]:
    """Ignite's process_function(engine, batch), as an async step of a StepSession."""
    await anyio.lowlevel.checkpoint()  # e.g. await a remote worker
    batch = feed["batch"]
    return {"loss": sum(batch) / len(batch)}


def epochs(data: Sequence[list[float]], max_epochs: int) -> Iterator[dict[str, Any]]:
    """Ignite's run(data, max_epochs): the feeds carry the epoch and mark its last batch."""
    for epoch in range(1, max_epochs + 1):
        for i, batch in enumerate(data):
            yield {"batch": batch, "epoch": epoch, "index": i, "last_of_epoch": i == len(data) - 1}
# --8<-- [end:step]


def handlers(log: list[str]) -> list[object]:
    # --8<-- [start:handlers]
    @on_after_run(when=lambda step: step % 4 == 0, fetches="loss")  # Events.ITERATION_COMPLETED(every=4)
    def log_loss(run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        log.append(f"iteration {run_values.global_step}: loss {run_values.results:.2f}")

    class EpochCompleted(hookrun.SessionRunHook):  # Events.EPOCH_COMPLETED, Keras on_epoch_end
        def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
            feed = run_context.original_args.feed_dict or {}
            if feed.get("last_of_epoch"):
                log.append(f"epoch {feed['epoch']} completed at iteration {run_values.global_step}")

    @on_end  # Events.COMPLETED, Keras on_train_end
    def completed(session: Any) -> None:
        log.append("completed")
    # --8<-- [end:handlers]

    return [log_loss, EpochCompleted(), completed]


# --8<-- [start:early-stopping]
class IgniteEarlyStopping(hookrun.SessionRunHook):
    """ignite.handlers.EarlyStopping(patience, score_function, min_delta, cumulative_delta).

    Every step that returns a value for ``score_key`` (not ``None``) is one evaluation,
    as one call of Ignite's handler; higher is better, as for Ignite's score_function.
    ``patience`` counts evaluations without an improvement of more than ``min_delta``.
    Unless ``cumulative_delta`` is true (Ignite's default is false), a smaller gain
    still moves the best score up, so a slow steady climb stops the run.
    """

    def __init__(
        self, score_key: Hashable, patience: int, min_delta: float = 0.0, cumulative_delta: bool = False
    ) -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"IgniteEarlyStopping: patience must be an int >= 1, got {patience!r}")
        if isinstance(min_delta, bool) or not isinstance(min_delta, int | float) or not min_delta >= 0:
            raise ValueError(f"IgniteEarlyStopping: min_delta must be a number >= 0, got {min_delta!r}")
        self._fetch = hookrun.SessionRunArgs(score_key)
        self.patience, self.min_delta, self.cumulative_delta = patience, min_delta, cumulative_delta
        self.best_score: float | None = None
        self.counter = 0  # evaluations since the last improvement

    def before_run(self, run_context: hookrun.SessionRunContext) -> hookrun.SessionRunArgs:
        return self._fetch

    def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        score = run_values.results
        if score is None:  # no evaluation at this step
            return
        if self.best_score is None:
            self.best_score = score
        elif score <= self.best_score + self.min_delta:
            if not self.cumulative_delta and score > self.best_score:
                self.best_score = score
            self.counter += 1
            if self.counter >= self.patience:
                run_context.request_stop()  # engine.terminate()
        else:
            self.best_score, self.counter = score, 0
# --8<-- [end:early-stopping]


# --8<-- [start:run]
async def main(max_epochs: int = 2) -> list[str]:
    data = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    log: list[str] = []

    async def create() -> hookrun.StepSession:
        return hookrun.StepSession(train_step)

    async with hookrun.MonitoredSession(create, handlers(log)) as session:
        async for _ in session.iterate(feeds=epochs(data, max_epochs)):  # trainer.run(data, max_epochs)
            pass
    return log
# --8<-- [end:run]


if __name__ == "__main__":
    print("\n".join(anyio.run(main)))
