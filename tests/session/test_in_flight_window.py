"""A lane is free when its step's raw run returns: the step's ``after_run`` waits its turn
without it, so one slow run does not keep the other lanes idle. The steps admitted and not
yet ended are bounded by ``2 N``: between ``before_run(n)`` and ``after_run(n)`` come at
most the ``before_run`` of steps ``n+1 .. n+2N-1``."""

from __future__ import annotations

import anyio
import pytest

from hookrun import MonitoredSession

from ._in_flight_support import GatedCreator, Gates, Recorder, feeds

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("entry", ["iterate", "run"])
async def test_a_slow_run_holds_back_at_most_the_window(n: int, entry: str) -> None:
    """Step 1's run is stuck: the other lanes go on running later steps until 2 N steps are
    admitted; nothing more is admitted until step 1 ends, then everything ends in order."""
    gates, hook = Gates(), Recorder()
    gates.open(*range(1, 40))  # every run but the first returns at once
    window = 2 * n
    results: list[int] = []
    with anyio.fail_after(10):
        async with MonitoredSession(GatedCreator(gates), [hook], max_in_flight=n) as sess:
            async with anyio.create_task_group() as tg:
                if entry == "iterate":

                    async def consume() -> None:
                        results.extend([y async for y in sess.iterate("y", feeds(12))])

                    tg.start_soon(consume)
                else:
                    todo = iter(feeds(12))

                    async def caller() -> None:
                        for feed in todo:
                            results.append(await sess.run("y", feed))

                    for _ in range(window + 2):  # more callers than the window
                        tg.start_soon(caller)
                await anyio.wait_all_tasks_blocked()
                assert hook.steps("before") == list(range(window)), hook.steps("before")  # steps 1 .. 2 N
                assert gates.started == list(range(window)), gates.started  # step 1 kept one lane only
                assert hook.steps("after") == []  # step 1 is first
                gates.open(0)
            assert sorted(results) == list(range(12))
    assert hook.steps("after") == list(range(1, 13))
    assert hook.ends == 1


async def test_a_recoverable_error_in_after_run_re_runs_the_step_on_its_own_lane() -> None:
    """A step whose after_run fails with a recoverable error after its lane went on to a
    later step takes that lane again, re-creates its session and runs there again."""
    from ._in_flight_support import FailsOnce

    gates = Gates()
    gates.open_all = True
    creator = GatedCreator(gates)
    with anyio.fail_after(10):
        async with MonitoredSession(creator, [FailsOnce("after_run")], max_in_flight=2) as sess:
            assert [y async for y in sess.iterate("y", feeds(8))] == list(range(8))
            assert sess.statistics().recoveries == 1
    assert len(creator.sessions) == 3  # two lanes, one of them re-created once
    assert [run for s in creator.sessions for run in s.runs].count(0) == 2  # step 1 ran twice
