"""Hypothesis strategies for generated scenarios: hooks with per-phase behaviour, a
scripted session and creator, a retry policy and a sequence of caller actions.

A scenario is plain data (frozen dataclasses); ``model.py`` runs it on the real
runtime and replays it in the sequential reference model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

PHASES = ("begin", "after_create_session", "before_run", "after_run", "end")
#: Fetch keys the scripted session knows (answered with ``f"{key}@{step}"``).
KEYS = ("a", "b", "c")
#: Effects of one hook call. ``stop``: request stop (before_run/after_run), else ok.
EFFECTS = ("ok", "stop", "error", "aborted", "oor", "hang")
#: Delays before the effect (async methods only): none, one checkpoint, a short sleep.
NO_DELAY, CHECKPOINT, SLEEP = 0, 1, 2
HOOK_TIMEOUT = 0.05
SESSION_TIMEOUT = 0.05


@dataclass(frozen=True)
class Action:
    """What one hook call does: an optional delay, then an effect."""

    delay: int = NO_DELAY
    sleep: float = 0.0
    effect: str = "ok"


OK = Action()


@dataclass(frozen=True)
class HookPlan:
    """One generated hook: ``kinds[phase]`` is "sync" or "async" (absent: not overridden);
    ``actions[phase][n]`` is its n-th call's action (later calls: ``OK``)."""

    name: str
    kinds: Mapping[str, str]
    actions: Mapping[str, tuple[Action, ...]]
    fetches: Any = None
    feeds: tuple[str, ...] = ()

    def action(self, phase: str, number: int) -> Action:
        planned = self.actions.get(phase, ())
        return planned[number] if number < len(planned) else OK


@dataclass(frozen=True)
class CallerAction:
    """``run`` (fetches, feeds), ``cancel`` (a run cancelled after ``delay``),
    ``should_stop``, ``aclose``, or ``close_and_leave`` (always the last action: a run
    while another task calls ``aclose()``, the block cancelled after ``delay``)."""

    kind: str
    fetches: Any = None
    feeds: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Scenario:
    singular: bool
    hooks: tuple[HookPlan, ...]
    session_errors: Mapping[int, Mapping[int, str]]
    hang_at: Mapping[int, tuple[int, ...]]
    creator_errors: Mapping[int, str]
    max_attempts: int
    actions: tuple[CallerAction, ...]
    exit: str  # "normal", "oor" (clean-stop raised by the body), "error"

    @property
    def hook_timeout(self) -> float | None:
        hangs = any(
            a.effect == "hang" for h in self.hooks for acts in h.actions.values() for a in acts
        )
        return HOOK_TIMEOUT if hangs else None

    @property
    def session_timeout(self) -> float | None:
        return SESSION_TIMEOUT if any(self.hang_at.values()) else None


def _action(kind: str, allow_hang: bool) -> st.SearchStrategy[Action]:
    effects = st.sampled_from(("ok",) * 6 + ("stop", "stop", "error", "aborted", "oor"))
    if kind == "sync":
        return st.builds(Action, effect=effects)
    if allow_hang:
        effects = st.one_of(effects, st.just("hang")) | effects
    return st.builds(
        Action,
        delay=st.sampled_from((NO_DELAY, NO_DELAY, CHECKPOINT, SLEEP)),
        sleep=st.sampled_from((0.0, 0.001, 0.002)),
        effect=effects,
    )


def _fetch_structure(name: str) -> st.SearchStrategy[Any]:
    leaf = st.sampled_from((*KEYS, f"{name}/feed"))
    return st.one_of(
        st.none(),
        leaf,
        st.lists(leaf, max_size=3),
        st.tuples(leaf, st.lists(leaf, max_size=2)),
        st.dictionaries(st.sampled_from(("x", "y")), leaf, max_size=2),
    )


@st.composite
def hook_plans(draw: st.DrawFn, name: str, allow_hang: bool) -> HookPlan:
    kinds: dict[str, str] = {}
    actions: dict[str, tuple[Action, ...]] = {}
    for phase in PHASES:
        kind = draw(st.sampled_from(("absent", "sync", "async", "async")))
        if kind == "absent":
            continue
        kinds[phase] = kind
        planned = draw(st.lists(_action(kind, allow_hang), max_size=3))
        if any(a != OK for a in planned):
            actions[phase] = tuple(planned)
    fetches = draw(_fetch_structure(name)) if "before_run" in kinds else None
    feeds: tuple[str, ...] = ()
    if "before_run" in kinds:
        feeds = tuple(draw(st.lists(st.sampled_from((f"{name}/feed", "shared")), max_size=2, unique=True)))
    return HookPlan(name, kinds, actions, fetches, feeds)


_ERRORS = st.sampled_from(("error", "aborted", "aborted", "oor"))


@st.composite
def caller_actions(draw: st.DrawFn) -> CallerAction:
    kind = draw(st.sampled_from(("run",) * 6 + ("should_stop", "cancel", "aclose")))
    fetches = draw(
        st.one_of(
            st.none(),
            st.sampled_from(KEYS),
            st.lists(st.sampled_from(KEYS), max_size=3),
            st.dictionaries(st.sampled_from(("p", "q")), st.sampled_from(KEYS), max_size=2),
        )
    )
    feeds = draw(st.sampled_from(({}, {}, {"cfeed": "caller-fed"}, {"shared": "caller-shared"})))
    delay = draw(st.sampled_from((0.0, 0.0005, 0.001, 0.003)))
    return CallerAction(kind, fetches, feeds, delay)


def _race(draw: st.DrawFn) -> tuple[CallerAction, ...]:
    """One scenario in five ends with a close from another task racing the block's cancellation."""
    if draw(st.integers(0, 4)) != 0:
        return ()
    action = draw(caller_actions())
    return (CallerAction("close_and_leave", action.fetches, action.feeds, action.delay),)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    allow_hang = draw(st.integers(0, 9)) == 0
    n_hooks = draw(st.integers(0, 4))
    hooks = tuple(draw(hook_plans(f"h{i}", allow_hang)) for i in range(n_hooks))
    session_errors = draw(
        st.dictionaries(
            st.integers(0, 2), st.dictionaries(st.integers(0, 5), _ERRORS, max_size=2), max_size=2
        )
    )
    hang_at: dict[int, tuple[int, ...]] = {}
    if draw(st.integers(0, 14)) == 0:
        hang_at = {draw(st.integers(0, 1)): (draw(st.integers(0, 3)),)}
    creator_errors = draw(
        st.dictionaries(st.integers(0, 3), st.sampled_from(("error", "aborted")), max_size=2)
    )
    return Scenario(
        singular=draw(st.integers(0, 4)) == 0,
        hooks=hooks,
        session_errors=session_errors,
        hang_at=hang_at,
        creator_errors=creator_errors,
        max_attempts=draw(st.integers(1, 3)),
        actions=tuple(draw(st.lists(caller_actions(), max_size=8))) + _race(draw),
        exit=draw(st.sampled_from(("normal", "normal", "oor", "error"))),
    )
