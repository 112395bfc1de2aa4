"""The lane check is not vacuous: a real run passes it, and the same run with its log
doctored to break one rule fails it with that rule's message."""

from __future__ import annotations

import copy
from collections.abc import Callable

import anyio
import pytest

from .lanes_plan import LaneHook, LaneScenario
from .lanes_rules import check_lanes
from .lanes_run import Ev, LaneObserved, run_lanes
from .strategies import CHECKPOINT, Action

HOOKS = (
    LaneHook("h0", {"before_run": "async", "after_run": "async"}, {"before_run": (Action(delay=CHECKPOINT),)}, fetch=True),
    LaneHook("h1", {"after_create_session": "sync", "before_run": "sync", "after_run": "sync", "end": "sync"}, {}),
)
SCENARIO = LaneScenario(
    lanes=2, mode="iterate", items=4, hooks=HOOKS, run_effects={(1, 0): "aborted"}, creator_errors={},
    max_attempts=2, last_step=None, releases=(1, 0, 1), cancel_at=None, exit="normal",
)


def _indices(obs: LaneObserved, kind: str, phase: str = "") -> list[int]:
    return [i for i, ev in enumerate(obs.log) if ev.kind == kind and (not phase or ev.phase == phase)]


def _swap_yields(obs: LaneObserved) -> None:
    obs.yielded[0], obs.yielded[1] = obs.yielded[1], obs.yielded[0]


def _overlap(obs: LaneObserved) -> None:
    """A before_run of a new item starts while an after_run call is in progress."""
    at = _indices(obs, "start", "after_run")[0]
    obs.log[at + 1 : at + 1] = [Ev("start", "h1", "before_run", 99, item=0, session="s0", step=0, token=object()),
                                Ev("done", "h1", "before_run", 99)]


def _renumber(obs: LaneObserved) -> None:
    """The last after_run sees a number one too high."""
    for i in _indices(obs, "start", "after_run")[-2:]:
        obs.log[i].step += 1


def _extra_run(obs: LaneObserved) -> None:
    """The failed item's retry runs on the session that failed."""
    failed = next(ev for ev in obs.log if ev.kind == "run-raised")
    retry = next(ev for ev in obs.log if ev.kind == "run" and ev.item == failed.item and ev.number == 1)
    retry.session = failed.session


def _close_twice(obs: LaneObserved) -> None:
    obs.sessions[0].closed += 1


def _leave_task(obs: LaneObserved) -> None:
    obs.tasks_after_exit += 1


def _after_run_early(obs: LaneObserved) -> None:
    """item 2's after_run is moved before item 1's (after_run out of step order)."""
    def block(item: int) -> tuple[int, int]:
        starts = [i for i in _indices(obs, "start", "after_run") if obs.log[i].item == item]
        return starts[0], starts[-1] + 2  # each after_run call: start, done

    (a0, a1), (b0, b1) = block(1), block(2)
    assert a1 <= b0
    obs.log[a0:b1] = obs.log[b0:b1] + obs.log[a1:b0] + obs.log[a0:a1]


def _step_on_failed(obs: LaneObserved) -> None:
    """The last item runs (hooks and raw run) on the session that failed, after its close."""
    failed = next(ev for ev in obs.log if ev.kind == "run-raised")
    last = obs.log[_indices(obs, "run")[-1]].item
    for ev in obs.log:
        if ev.item == last and ev.session:
            ev.session = failed.session


BREAKS: dict[str, tuple[Callable[[LaneObserved], None], str]] = {
    "yield order": (_swap_yields, "yielded"),
    "two phases at once": (_overlap, "overlaps another hook phase"),
    "a number changed": (_renumber, "got number|before_run saw|not increasing"),
    "re-run on the failed lane": (_extra_run, "re-ran on the failed|context had"),
    "a session closed twice": (_close_twice, "closed 2 times"),
    "a failed session stepped again": (_step_on_failed, "then stepped again"),
    "a task left": (_leave_task, "task was left running"),
    "after_run out of step order": (_after_run_early, "after_run of item 2 before step of item 1|not increasing"),
}


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def observed(request: pytest.FixtureRequest) -> LaneObserved:
    return anyio.run(run_lanes, SCENARIO, backend=str(request.param))


def test_the_real_run_keeps_every_rule(observed: LaneObserved) -> None:
    assert observed.yielded == ["a@0", "a@1", "a@2", "a@3"]
    assert len(observed.sessions) == 3  # two lanes, one re-created
    check_lanes(SCENARIO, observed)


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_rule_is_caught(observed: LaneObserved, name: str) -> None:
    doctored = copy.deepcopy(observed)
    breaks, message = BREAKS[name]
    breaks(doctored)
    with pytest.raises(AssertionError, match=message):
        check_lanes(SCENARIO, doctored)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_one_lane_admits_its_callers_in_the_order_they_called(backend: str) -> None:
    """One lane, four run() callers: a real run passes; the same run with two callers'
    calls swapped in the log fails the first-in-first-out rule."""
    scenario = LaneScenario(
        lanes=1, mode="tasks", items=4, hooks=HOOKS, run_effects={(1, 0): "aborted"}, creator_errors={},
        max_attempts=2, last_step=None, releases=(), cancel_at=None, exit="normal",
    )
    observed = anyio.run(run_lanes, scenario, backend=backend)
    check_lanes(scenario, observed)
    doctored = copy.deepcopy(observed)
    calls = [ev for ev in doctored.log if ev.kind == "call"]
    calls[0].item, calls[1].item = calls[1].item, calls[0].item
    with pytest.raises(AssertionError, match="called in the order"):
        check_lanes(scenario, doctored)
