"""Check a lane scenario's log (``lanes_run.py``) against the rules of steps in flight.

The rules leave some orders free (which lane a step lands on, whether the
``before_run`` of step n+1 comes before or after the raw run of step n), so the
check does not replay one schedule: it reads the log, in the order things
happened, derives the steps (one per feed item: admission order, numbers,
attempts, failures) and asserts every rule fixes about them:

* one hook phase at a time (only raw runs overlap); every hook call ends once, in
  its own task; begin once, end once on a clean exit and never otherwise;
* each step's number fixed at admission: unique, increasing in admission order,
  kept across re-runs; ``iterate`` admits in feed order;
* ``before_run`` before each attempt of a step, again only after a recoverable
  failure of that step; ``after_run`` once per step, in step order, on a consistent
  cut (every earlier step done), with the step's own results;
* the results yielded (in feed order, or as a set when unordered) or returned to
  each ``run()`` caller; what was raised (the first unrecovered error, the
  earliest hook of its phase first);
* a stop (a hook's request, a clean-stop exception, ``StopAtStepHook``) admits
  at most the lanes left free; nothing after a fatal error or the block's
  cancellation but the cancelled runs;
* per-lane recovery: a session is closed early only after a recoverable failure
  on it, a re-run lands on a fresh session, every step within the retry budget;
  N sessions at entry, never more than N open, each closed once; no task left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .lanes_plan import CALLER_FETCH, HOOK_FETCH, LaneScenario
from .lanes_run import Ev, LaneObserved
from .model import describe, make_error

__all__ = ["Call", "Failure", "Instance", "LaneCheck"]

_ENDS = ("done", "raised", "cancelled")


@dataclass
class Call:
    hook: str
    phase: str
    number: int
    start: int
    ev: Ev
    end: str = ""
    end_at: int = -1
    effect: str = ""


@dataclass
class Instance:
    phase: str
    key: tuple[Any, ...]
    start: int
    calls: list[Call] = field(default_factory=list)

    @property
    def item(self) -> int:
        return self.calls[0].ev.item

    @property
    def session(self) -> str:
        return self.calls[0].ev.session

    def complete(self, expected: int) -> bool:
        return len(self.calls) == expected and all(c.end == "done" for c in self.calls)


@dataclass
class Failure:
    """One step attempt's (or one creation's) error: where, what, and its message."""

    at: int
    effect: str
    expected: tuple[Any, ...]
    item: int = -1
    session: str = ""
    phase: str = ""


class LaneCheck:
    def __init__(self, sc: LaneScenario, obs: LaneObserved) -> None:
        self.sc, self.obs, self.log = sc, obs, obs.log
        self.order = [plan.name for plan in sc.hooks]
        self.planned = {p: sum(p in plan.kinds for plan in sc.hooks) for p in ("before_run", "after_run")}
        self.calls: dict[tuple[str, str, int], Call] = {}
        self.instances: list[Instance] = []
        self.failures: list[Failure] = []
        self.raw: dict[int, list[tuple[int, Ev, Ev | None]]] = {}
        self.at: dict[str, int] = {}
        self._read()

    # -- reading the log --------------------------------------------------------------------

    def _read(self) -> None:
        active: dict[tuple[str, str, int], Instance] = {}
        runs: dict[tuple[int, int], int] = {}
        for i, ev in enumerate(self.log):
            if ev.kind in ("entered", "cancel", "leaving"):
                self.at.setdefault(ev.kind, i)
            elif ev.kind == "start":
                self._start(i, ev, active)
            elif ev.kind in _ENDS:
                call = self.calls[(ev.who, ev.phase, ev.number)]
                assert not call.end, f"{ev} ended twice"
                call.end, call.end_at, call.effect = ev.kind, i, str(ev.value or "")
                del active[(ev.who, ev.phase, ev.number)]
            elif ev.kind == "foreign":
                raise AssertionError(f"{ev.who}.{ev.phase}#{ev.number} ended in another task")
            elif ev.kind == "run":
                runs[(ev.item, ev.number)] = len(self.raw.setdefault(ev.item, []))
                self.raw[ev.item].append((i, ev, None))
            elif ev.kind in ("ran", "run-raised", "run-cancelled"):
                position = runs.pop((ev.item, ev.number))
                start, begun, _ = self.raw[ev.item][position]
                self.raw[ev.item][position] = (start, begun, ev)
                if ev.kind == "run-raised":
                    error = make_error(str(ev.value), f"run{ev.item}.{ev.number}")
                    self.failures.append(Failure(i, str(ev.value), describe(error), ev.item, ev.session))
            elif ev.kind == "create-failed":
                error = make_error(str(ev.value), f"create#{ev.number}")
                self.failures.append(Failure(i, str(ev.value), describe(error)))
        assert not active, f"hook calls never ended: {sorted(active)}"
        assert not runs, f"raw runs never ended: {sorted(runs)}"
        for instance in self.instances:
            self._instance_failure(instance)
        self.failures.sort(key=lambda f: f.at)

    def _start(self, i: int, ev: Ev, active: dict[tuple[str, str, int], Instance]) -> None:
        key = (ev.phase, id(ev.token), ev.item, ev.session)
        current = self.instances[-1] if self.instances else None
        if current is None or current.key != key or any(c.hook == ev.who for c in current.calls):
            current = Instance(ev.phase, key, i)
            self.instances.append(current)
        others = {id(inst) for inst in active.values()} - {id(current)}
        assert not others, f"{ev.who}.{ev.phase} (item {ev.item}) overlaps another hook phase"
        call = Call(ev.who, ev.phase, ev.number, i, ev)
        assert (ev.who, ev.phase, ev.number) not in self.calls
        self.calls[(ev.who, ev.phase, ev.number)] = call
        current.calls.append(call)
        active[(ev.who, ev.phase, ev.number)] = current

    def _instance_failure(self, instance: Instance) -> None:
        """A phase's error is its earliest hook's (in list order), wherever the others were."""
        raised = [c for c in instance.calls if c.end == "raised"]
        if not raised:
            return
        first = min(raised, key=lambda c: self.order.index(c.hook))
        error = make_error(first.effect, f"{first.hook}.{first.phase}#{first.number}")
        at = max(c.end_at for c in raised)
        self.failures.append(Failure(at, first.effect, describe(error), instance.item, instance.session, instance.phase))

    # -- derived facts ----------------------------------------------------------------------

    def of_item(self, item: int, phase: str) -> list[Instance]:
        return [inst for inst in self.instances if inst.phase == phase and inst.item == item]

    def first_seen(self, item: int) -> int:
        seen = [inst.start for inst in self.instances if inst.phase in ("before_run", "after_run") and inst.item == item]
        seen += [start for start, _, _ in self.raw.get(item, [])]
        return min(seen)

    def admitted(self) -> list[int]:
        items = {inst.item for inst in self.instances if inst.phase in ("before_run", "after_run")}
        return sorted(items | set(self.raw), key=self.first_seen)

    def absorbed(self, failure: Failure) -> bool:
        """A recoverable failure followed by another attempt (of its step, or a creation)."""
        if failure.effect != "aborted":
            return False
        # A caller raised it: its step's retries ran out, and a later close and creation
        # serve another step (with one lane, the next run() recovers the failed session).
        raised = failure.expected in self.obs.task_outcomes.values()
        if raised:
            return False
        creations = [i for i, ev in enumerate(self.log) if i > failure.at and ev.kind in ("created", "create-failed")]
        if failure.item < 0:  # a creation retried
            return bool(creations)
        for at in creations[:1]:  # its lane's recovery began: the failed session closed, then a creation
            closed = any(ev.kind == "closed" and ev.session == failure.session for ev in self.log[failure.at : at])
            other = any(failure.at < g.at < at for g in self.failures)
            if closed and not other:
                return True
        later = [s for s, _, _ in self.raw.get(failure.item, []) if s > failure.at]
        later += [inst.start for inst in self.of_item(failure.item, "before_run") if inst.start > failure.at]
        return bool(later)

    def attempts(self, item: int, upto: int) -> int:
        """Attempts of a step up to ``upto``: its runs, and the failed creations of the
        recoveries between them (the retry budget counts both)."""
        if self.planned["before_run"]:
            starts = [inst.start for inst in self.of_item(item, "before_run") if inst.start <= upto]
        else:
            starts = [start for start, _, _ in self.raw.get(item, []) if start <= upto]
        failed = [f.at for f in self.failures if f.item == item and f.effect == "aborted" and f.at <= upto]
        creations = 0
        for at in failed:
            following = [s for s in starts if s > at]
            until = following[0] if following else upto
            creations += sum(f.item < 0 and at < f.at < until for f in self.failures)
        return len(starts) + creations

    def fatal(self) -> Failure | None:
        fatals = self.fatals()
        return fatals[0] if fatals else None

    def fatals(self) -> list[Failure]:
        """The errors that end a step for good and cancel the others in flight: non-recoverable
        ones, and recoverable ones the retry budget could not absorb (one within the budget
        that was not retried was cut short by something else). With run() callers the
        session goes on after one, so there may be several."""
        if not hasattr(self, "_fatals"):
            ends = [
                f for f in self.failures
                if f.effect != "oor" and not self.absorbed(f)
                and (f.effect == "error" or f.item < 0 or self.attempts(f.item, f.at) >= self.sc.max_attempts)
            ]
            # A lane's failed re-creation left unretried: its budget ran out, unless a later
            # error ended the work first (then that error cut the recovery short).
            self._fatals = [
                f for f in ends
                if f.effect == "error" or f.item >= 0 or not any(g.at > f.at and g.item >= 0 for g in ends)
            ]
        return self._fatals

    def given_up(self, item: int, before: int) -> bool:
        """The step ended for good before ``before``: it failed or was cancelled (in a hook
        phase or in its raw run) and was never attempted again."""
        marks = [c.end_at for inst in self.instances if inst.item == item and inst.phase in ("before_run", "after_run")
                 for c in inst.calls if c.end in ("raised", "cancelled")]
        marks += [self.log.index(end) for _, _, end in self.raw.get(item, []) if end is not None and end.kind != "ran"]
        outcome = self.obs.task_outcomes.get(item, ("",))
        whole = any(inst.complete(self.planned["after_run"]) for inst in self.of_item(item, "after_run"))
        if outcome[0] == "raise" and not whole:  # its run() caller saw it fail
            return True
        for fatal in self.fatals():
            if fatal.item != item and self.first_seen(item) < fatal.at < before:
                done = [inst for inst in self.of_item(item, "after_run") if inst.start < fatal.at]
                if not any(inst.complete(self.planned["after_run"]) for inst in done):
                    return True  # in flight when another step failed for good: cancelled
        marks = [m for m in marks if m < before]
        if not marks:
            return False
        starts = [s for s, _, _ in self.raw.get(item, [])] + [inst.start for inst in self.of_item(item, "before_run")]
        return not any(s > max(marks) for s in starts)

    def after_run_failure(self, failure: Failure) -> bool:
        return failure.phase == "after_run"

    def succeeded(self, item: int) -> bool:
        runs = self.raw.get(item, [])
        if not runs or runs[-1][2] is None or runs[-1][2].kind != "ran":
            return False
        ran_at = self.log.index(runs[-1][2])
        if any(f.item == item and f.at > ran_at for f in self.failures):
            return False
        if self.planned["after_run"] == 0:
            return True
        return any(inst.start > ran_at and inst.complete(self.planned["after_run"]) for inst in self.of_item(item, "after_run"))

    def number(self, item: int) -> int | None:
        steps = [c.ev.step for inst in self.of_item(item, "after_run") for c in inst.calls]
        if self.sc.lanes == 1:  # one lane: a step re-run after its after_run failed is a new step
            return steps[-1] if steps else None
        assert len(set(steps)) <= 1, f"item {item}: after_run saw several step numbers {set(steps)}"
        return steps[0] if steps else None


def expected_value(item: int) -> str:
    return f"{CALLER_FETCH}@{item}"


def hook_value(item: int) -> str:
    return f"{HOOK_FETCH}@{item}"
