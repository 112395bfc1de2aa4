"""The pieces the concepts page names: a monitored session's block, a session class of
your own, and the retry policy's defaults spelled out.

``main()`` runs a ``Doubler`` session (a class with the four-argument ``run``) under a
hook that stops after three steps, and returns what ``iterate`` yielded:
``[[0.0], [2.0], [4.0]]``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio

import hookrun
from hookrun.hooks import StopAtStepHook


# --8<-- [start:session-class]
class Doubler:
    """A session of your own: one value per fetch key, in order."""

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: hookrun.RunOptions,
        run_metadata: hookrun.RunMetadata,
    ) -> Sequence[Any]:
        produced: dict[Hashable, Any] = {"y": 2.0 * feed_dict["x"]}
        return [produced[key] for key in fetches]
# --8<-- [end:session-class]


async def main() -> list[list[float]]:
    """Three steps of a ``Doubler`` in a monitored session."""

    async def session_creator() -> Doubler:
        return Doubler()

    hooks = [StopAtStepHook(last_step=3)]
    fetches = ["y"]
    feeds = ({"x": float(x)} for x in range(10))
    seen = []
    # --8<-- [start:block]
    async with hookrun.MonitoredSession(session_creator, hooks) as session:
        async for results in session.iterate(fetches, feeds):
            seen.append(results)  # one step per feed dict, until a hook asks to stop
    # --8<-- [end:block]
    return seen


def default_retry_policy() -> hookrun.RetryPolicy:
    """``RetryPolicy()`` with every argument spelled out."""
    # --8<-- [start:retry]
    policy = hookrun.RetryPolicy(
        max_attempts=None,  # attempts in all, counting the first; None: no limit
        initial_delay=0.1,  # seconds before the first retry...
        multiplier=2.0,  # ...growing by this factor...
        max_delay=30.0,  # ...up to this
        jitter=True,  # wait a random time up to the delay
        max_time=None,  # give up after this many seconds since the first failure
        log_interval=10.0,  # repeated retries: at most one warning line per this many seconds
    )
    # --8<-- [end:retry]
    return policy


if __name__ == "__main__":
    print(anyio.run(main))
    print(default_retry_policy() == hookrun.RetryPolicy())
