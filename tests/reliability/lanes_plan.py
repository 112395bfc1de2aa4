"""Generated scenarios for steps in flight (``MonitoredSession(..., max_in_flight=N)``).

A lane scenario is plain data: N lanes (1, 2 or 4), hooks with per-phase behaviour
(``overlapping_steps = True``), the caller's work (``iterate`` in feed order or as
the steps complete, or one ``run()`` per item from concurrent tasks), failures of
the raw runs by (item, attempt), failures of the creator by attempt, an optional
``StopAtStepHook``, an optional cancellation of the block from outside, and the
**completion order** of the raw runs: every raw run waits on a gate, and the
driver (``lanes_run.py``), each time every task is blocked, opens one waiting gate
chosen by the next entry of ``releases``. The raw runs' durations are thereby a
function of the scenario, never of the machine's timing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hypothesis import strategies as st

from .strategies import CHECKPOINT, NO_DELAY, OK, Action

__all__ = ["LANE_PHASES", "MODES", "LaneHook", "LaneScenario", "lane_scenarios"]

LANE_PHASES = ("begin", "after_create_session", "before_run", "after_run", "end")
#: ``iterate``: ordered; ``unordered``: ``iterate(..., ordered=False)``; ``tasks``: one
#: ``run()`` per item, each from its own task, all started at once.
MODES = ("iterate", "unordered", "tasks")
#: What the caller fetches: the raw session answers ``f"{key}@{item}"``.
CALLER_FETCH = "a"
HOOK_FETCH = "b"


@dataclass(frozen=True)
class LaneHook:
    """``kinds[phase]``: "sync" or "async" (absent: not overridden); ``actions[phase][n]``
    is its n-th call's action (later calls: ``OK``); ``fetch``: asks for ``HOOK_FETCH``."""

    name: str
    kinds: Mapping[str, str]
    actions: Mapping[str, tuple[Action, ...]]
    fetch: bool = False

    def action(self, phase: str, number: int) -> Action:
        planned = self.actions.get(phase, ())
        return planned[number] if number < len(planned) else OK


@dataclass(frozen=True)
class LaneScenario:
    lanes: int
    mode: str
    items: int
    hooks: tuple[LaneHook, ...]
    #: (item, attempt) -> "error", "aborted" or "oor": that raw run raises it when released.
    run_effects: Mapping[tuple[int, int], str]
    #: creation attempt (0-based, in call order) -> "error" or "aborted".
    creator_errors: Mapping[int, str]
    max_attempts: int
    last_step: int | None
    #: Which waiting raw run each release opens (index into the waiting runs sorted by
    #: (item, attempt), modulo their number); past the end: the first.
    releases: tuple[int, ...]
    #: Cancel the whole block instead of the ``cancel_at``-th release (None: never).
    cancel_at: int | None
    exit: str  # "normal", "oor" (the body raises a clean-stop), "error"
    #: The cancellation cuts only the work (iterate / the run() callers): the block goes on.
    cancel_work: bool = False
    #: ``StopAtStepHook(num_steps=last_step)`` instead of ``last_step=`` (the counter starts at 0).
    num_steps: bool = False

    def release_choice(self, number: int) -> int:
        return self.releases[number] if number < len(self.releases) else 0


def _action(kind: str, phase: str) -> st.SearchStrategy[Action]:
    # Mostly ok: a scenario has many hook calls, and one fatal error ends it.
    effects: tuple[str, ...] = ("ok",) * 24 + ("error", "aborted", "aborted")
    if phase in ("begin", "after_create_session"):  # called before any step (N times for the second)
        effects = ("ok",) * 60 + ("error", "aborted", "aborted")
    if phase in ("before_run", "after_run"):
        effects += ("stop", "stop", "oor")
    chosen = st.sampled_from(effects)
    if kind == "sync":
        return st.builds(Action, effect=chosen)
    return st.builds(Action, delay=st.sampled_from((NO_DELAY, CHECKPOINT, CHECKPOINT)), effect=chosen)


@st.composite
def lane_hooks(draw: st.DrawFn, name: str) -> LaneHook:
    kinds: dict[str, str] = {}
    actions: dict[str, tuple[Action, ...]] = {}
    for phase in LANE_PHASES:
        kind = draw(st.sampled_from(("absent", "sync", "async", "async")))
        if kind == "absent":
            continue
        kinds[phase] = kind
        planned = draw(st.lists(_action(kind, phase), max_size=4))
        if any(a != OK for a in planned):
            actions[phase] = tuple(planned)
    fetch = "before_run" in kinds and draw(st.booleans())
    return LaneHook(name, kinds, actions, fetch)


@st.composite
def lane_scenarios(draw: st.DrawFn, lanes: tuple[int, ...] = (1, 2, 4)) -> LaneScenario:
    n = draw(st.sampled_from(lanes))
    items = draw(st.integers(2, 8) | st.integers(0, 8))
    hooks = tuple(draw(lane_hooks(f"h{i}")) for i in range(draw(st.integers(0, 3))))
    run_effects = draw(
        st.dictionaries(
            st.tuples(st.integers(0, max(items - 1, 0)), st.integers(0, 2)),
            st.sampled_from(("error", "aborted", "aborted", "aborted", "oor")),
            max_size=2,
        )
    )
    creator_errors = draw(
        # mostly a re-creation (attempts from n on), sometimes a creation at entry
        st.dictionaries(st.integers(n, n + 2) | st.integers(0, n + 2), st.sampled_from(("error", "aborted", "aborted", "aborted")), max_size=1)
        | st.just({})
    )
    last_step = draw(st.one_of(st.none(), st.none(), st.integers(1, 6)))
    releases = tuple(draw(st.lists(st.integers(0, 3), max_size=12)))
    cancel_at = draw(st.one_of(st.none(), st.none(), st.integers(0, 5)))
    return LaneScenario(
        lanes=n,
        # One lane: concurrent run() callers take turns, first in first out, as with lanes
        # (test_one_admission_rule.py), and a clean-stop error of run() is its caller's alone.
        mode=draw(st.sampled_from(MODES)),
        items=items,
        hooks=hooks,
        run_effects=run_effects,
        creator_errors=creator_errors,
        max_attempts=draw(st.integers(1, 3)),
        last_step=last_step,
        releases=releases,
        cancel_at=cancel_at,
        exit=draw(st.sampled_from(("normal", "normal", "oor", "error"))),
        cancel_work=draw(st.booleans()),
        num_steps=draw(st.booleans()),
    )
