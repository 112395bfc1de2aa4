"""The rules of steps in flight, each asserted over a lane scenario's log (see
``lanes_check.py`` for how the log is read and what the rules leave free)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .lanes_check import Failure, LaneCheck, expected_value, hook_value
from .lanes_plan import LaneScenario
from .lanes_run import LaneObserved

__all__ = ["check_lanes", "features"]


def check_lanes(sc: LaneScenario, obs: LaneObserved) -> LaneCheck:
    """Assert the runtime kept every rule of steps in flight in this scenario; return the
    facts read from its log."""
    assert not obs.stuck, "every task blocked with no raw run waiting: the runtime hung"
    assert obs.tasks_after_exit == obs.baseline_tasks, "a task was left running"
    for session in obs.sessions:
        assert session.closed == 1, f"{session.name} closed {session.closed} times"
    c = LaneCheck(sc, obs)
    for rule in (_calls, _exit, _admission, _numbers, _before_run, _after_run, _results, _stops, _cut, _sessions):
        rule(c)
    return c


def features(c: LaneCheck) -> list[str]:
    """What a scenario exercised (for hypothesis' statistics)."""
    seen = [f"{c.sc.lanes} lanes", c.sc.mode, f"{c.sc.lanes} lanes, {c.sc.mode}"]
    if any(c.absorbed(f) for f in c.failures):
        seen.append("recovered")
    if c.fatal() is not None:
        seen.append("fatal error")
    if _stop_at(c) is not None or c.sc.last_step is not None:
        seen.append("stopped")
    if "cancel" in c.at:
        seen.append("work cancelled" if c.sc.cancel_work else "block cancelled")
    running = overlap = 0
    for ev in c.log:
        running += (ev.kind == "run") - (ev.kind in ("ran", "run-raised", "run-cancelled"))
        overlap = max(overlap, running)
    seen.append(f"{overlap} runs at once")
    return seen


def _fatal(c: LaneCheck) -> Failure | None:
    leaving = c.at.get("leaving", len(c.log))
    fatal = c.fatal()
    return fatal if fatal is not None and fatal.at < leaving else None


def _cut_at(c: LaneCheck) -> int:
    """Where the work was cut short: the block's cancellation, or (iterate) a fatal error."""
    fatal = _fatal(c)
    cut = c.at.get("cancel", len(c.log))
    if fatal is not None and c.sc.mode != "tasks":
        cut = min(cut, fatal.at)
    return cut


def _calls(c: LaneCheck) -> None:
    """Each hook call ended as its plan allows; a hook failing before it suspends keeps the
    later hooks of its phase from starting; a phase is whole unless cut or failed."""
    plans = {plan.name: plan for plan in c.sc.hooks}
    for call in c.calls.values():
        plan = plans[call.hook]
        action = plan.action(call.phase, call.number)
        where = f"{call.hook}.{call.phase}#{call.number}"
        assert call.end, f"{where} never ended"
        errors = action.effect in ("error", "aborted", "oor")
        suspends = plan.kinds[call.phase] == "async" and action.delay != 0
        allowed = ("raised",) if errors else ("done",)
        assert call.end in ((*allowed, "cancelled") if suspends else allowed), (where, call.end)
    for inst in c.instances:
        ordered = sorted(inst.calls, key=lambda call: c.order.index(call.hook))
        assert [call.hook for call in inst.calls] == [call.hook for call in ordered], f"{inst.phase}: hooks started out of list order"
        immediate = [
            call for call in ordered
            if call.end == "raised" and (plans[call.hook].kinds[call.phase] == "sync" or plans[call.hook].action(call.phase, call.number).delay == 0)
        ]
        if immediate:
            assert ordered[-1] is immediate[0], f"{inst.phase}: a hook started after {immediate[0].hook} failed"
        planned = sum(inst.phase in plan.kinds for plan in c.sc.hooks)
        if len(inst.calls) < planned:
            broken = any(call.end in ("raised", "cancelled") for call in inst.calls)
            assert broken or "cancel" in c.at, f"{inst.phase} (item {inst.item}) cut short: {inst.calls}"
    begins = [inst for inst in c.instances if inst.phase == "begin"]
    assert len(begins) <= 1, "begin ran twice"


def _block_cancelled(c: LaneCheck) -> bool:
    return "cancel" in c.at and not c.sc.cancel_work


def expected_exit(c: LaneCheck) -> Any:
    if _block_cancelled(c):
        return "cancelled"
    fatal = _fatal(c)
    if fatal is not None and c.sc.mode != "tasks" and fatal.at < c.at.get("cancel", len(c.log)):
        return fatal.expected
    if c.sc.exit == "error":
        return ("raise", "ValueError", "body")
    ends = [f for f in c.failures if f.at > c.at["leaving"] and f.item < 0 and f.effect]
    return ends[0].expected if ends else None


def _exit(c: LaneCheck) -> None:
    """What left the block; ``end`` ran (once) exactly on a clean exit."""
    if "entered" not in c.at:
        raised = {f.expected for f in c.failures}
        assert c.obs.exit in raised, (c.obs.exit, raised)
        return
    expected = expected_exit(c)
    assert c.obs.exit == expected, f"exit: expected {expected}, observed {c.obs.exit}"
    ends = [inst for inst in c.instances if inst.phase == "end"]
    fatal = _fatal(c)
    unfailed = c.sc.mode == "tasks" or fatal is None or fatal.at > c.at.get("cancel", len(c.log))
    clean = c.sc.exit != "error" and not _block_cancelled(c) and unfailed
    has_end = any("end" in plan.kinds for plan in c.sc.hooks)
    # A lane left without a session (its re-creation failed or was cut): end still runs
    # while some lane has one; with one lane, that means no end.
    clean = clean and _open_at(c, c.at["leaving"]) > 0
    assert len(ends) == (1 if clean and has_end else 0), f"end phases: {len(ends)} (clean exit: {clean})"


def _open_at(c: LaneCheck, at: int) -> int:
    """Sessions created, set up (every after_create_session done) and not closed at ``at``."""
    created = [ev.session for ev in c.log[:at] if ev.kind == "created"]
    closed = {ev.session for ev in c.log[:at] if ev.kind == "closed"}
    broken = {
        inst.session for inst in c.instances
        if inst.phase == "after_create_session" and inst.start < at and any(x.end != "done" for x in inst.calls)
    }
    return len([s for s in created if s not in closed and s not in broken])


def _admission(c: LaneCheck) -> None:
    """iterate admits in feed order, one lane its run() callers in the order they called
    (first in first out); everything is admitted unless stopped, cut or bounded."""
    admitted = c.admitted()
    if c.sc.mode != "tasks":
        assert admitted == list(range(len(admitted))), f"admitted out of feed order: {admitted}"
    elif c.sc.lanes == 1:  # with lanes, a caller handed a lane may start after a later one
        called = [ev.item for ev in c.log if ev.kind == "call" and ev.item in admitted]
        assert admitted == called, f"admitted {admitted}, called in the order {called}"
    stopped = _stop_at(c) is not None or _fatal(c) is not None or "cancel" in c.at
    if c.sc.last_step is not None:  # a number given up with nothing else in flight is handed out again
        done = [item for item in admitted if c.succeeded(item)]
        assert len(done) <= c.sc.last_step, f"StopAtStepHook(last_step={c.sc.last_step}) overshot: {done}"
    if not stopped and not _renumbered(c):
        bound = c.sc.items if c.sc.last_step is None else min(c.sc.items, c.sc.last_step)
        # run() callers: a step a clean stop ended is its caller's error and stops nothing,
        # but may leave StopAtStepHook's count short (its number, given up, may be handed out again).
        ended = len({f.item for f in c.failures if f.effect == "oor" and f.item >= 0}) if c.sc.mode == "tasks" else 0
        if c.sc.last_step is None or not ended:
            assert len(admitted) == bound, f"admitted {admitted}, expected {bound} steps"
        else:
            assert bound <= len(admitted) <= bound + ended, f"admitted {admitted}, expected {bound} (+{ended}) steps"


def _renumbered(c: LaneCheck) -> bool:
    """One lane keeps the one-step rules: a step whose after_run failed moved the counter,
    and its re-run is a new step."""
    return c.sc.lanes == 1 and any(f.item >= 0 and c.after_run_failure(f) for f in c.failures)


def _numbers(c: LaneCheck) -> None:
    """A step's number: fixed at admission, kept across re-runs, increasing in admission order."""
    admitted = c.admitted()
    renumbered = _renumbered(c)
    numbers = [(item, c.number(item)) for item in admitted]
    known = [n for _, n in numbers if n is not None]
    assert known == sorted(set(known)), f"step numbers not increasing in admission order: {numbers}"
    for rank, (item, number) in enumerate(numbers):
        befores = c.of_item(item, "before_run")
        if renumbered:  # the last attempt's number
            befores = befores[-1:]
        began = {call.ev.step for inst in befores for call in inst.calls}
        assert len(began) <= 1, f"item {item}: before_run saw global steps {began} (the number must be kept)"
        if number is not None and began and not renumbered:
            assert began == {number - 1}, f"item {item}: before_run saw global step {began}, after_run {number}"
        if number is not None and not renumbered and all(n is not None for _, n in numbers[:rank]):
            assert number == rank + 1, f"item {item} (admitted {rank + 1}th) got number {number}"
    runs = [[end is not None and end.kind == "ran" for _, _, end in c.raw.get(item, [])] for item in admitted]
    ran = sum(map(sum, runs)) if renumbered else sum(map(any, runs))
    raised = any(outcome[0] == "raise" for outcome in c.obs.task_outcomes.values())
    cut = "cancel" in c.at or _fatal(c) is not None or raised  # a step that ran may be given up before counting
    counted = sum(bool(c.of_item(item, "after_run")) for item in admitted)
    if c.sc.lanes == 1:  # the counter counts the runs that succeeded
        assert (counted if cut else ran) <= c.obs.counter <= ran, f"step counter {c.obs.counter}: {counted} counted, {ran} ran"
        return
    # N lanes: the counter moves to a step's number in its after_run, past the numbers given
    # up before it; a number given up past the last one counted is handed out again.
    top = max(known, default=0)
    assert max(counted, top) <= c.obs.counter <= len(admitted), f"step counter {c.obs.counter}: {top} the last number counted"
    if not cut:
        assert c.obs.counter >= ran, f"step counter {c.obs.counter}, {ran} steps ran"
        if c.planned["after_run"]:
            assert c.obs.counter == top, f"step counter {c.obs.counter}, the last number counted {top}"


def _before_run(c: LaneCheck) -> None:
    """before_run (whole) before each attempt, on the attempt's lane; again only after a
    recoverable failure of the step; within the retry budget."""
    for item in c.admitted():
        befores = c.of_item(item, "before_run")
        runs = c.raw.get(item, [])
        assert len(runs) <= c.sc.max_attempts and len(befores) <= c.sc.max_attempts, f"item {item}: over budget"
        for k in range(1, len(befores)):
            between = [f for f in c.failures if f.item == item and befores[k - 1].start < f.at < befores[k].start]
            assert any(f.effect == "aborted" for f in between), f"item {item}: before_run called again without a failure"
        if not c.planned["before_run"]:
            continue
        previous = -1
        for start, ev, end in runs:
            ready = [b for b in befores if previous < b.start < start and b.complete(c.planned["before_run"])]
            assert ready, f"item {item}: raw run without a whole before_run first"
            assert ready[-1].session == ev.session, f"item {item}: ran on {ev.session}, context had {ready[-1].session}"
            previous = c.log.index(end) if end is not None else start


def _after_run(c: LaneCheck) -> None:
    """after_run once per step, in step order, on a consistent cut, with its own results."""
    admitted = c.admitted()
    plans = {plan.name: plan for plan in c.sc.hooks}
    for rank, item in enumerate(admitted):
        afters = c.of_item(item, "after_run")
        whole = [inst for inst in afters if inst.complete(c.planned["after_run"])]
        assert len(whole) <= 1, f"item {item}: after_run ran {len(whole)} times"
        for inst in afters:
            ended = [end for _, _, end in c.raw.get(item, []) if end is not None and c.log.index(end) < inst.start]
            assert ended and ended[-1].kind == "ran", f"item {item}: after_run without a successful run"
            assert ended[-1].session == inst.session, f"item {item}: after_run's session is not the run's"
            for earlier in admitted[:rank]:
                done = any(e.start < inst.start and e.complete(c.planned["after_run"]) for e in c.of_item(earlier, "after_run"))
                dead = c.given_up(earlier, inst.start)
                assert done or dead, f"after_run of item {item} before step of item {earlier} was done"
            for call in inst.calls:
                wanted = hook_value(item) if plans[call.hook].fetch else None
                assert call.ev.value == wanted, (call.hook, item, call.ev.value)


def _results(c: LaneCheck) -> None:
    """Yielded in feed order (or as they complete), or returned to each run() caller."""
    admitted = c.admitted()
    wanted = [expected_value(item) for item in admitted if c.succeeded(item)]
    cut = "cancel" in c.at or _fatal(c) is not None
    got = c.obs.yielded
    if c.sc.mode == "iterate":
        assert got == (wanted[: len(got)] if cut else wanted), f"yielded {got}, expected {wanted}"
    elif c.sc.mode == "unordered":  # yielded once its raw run returned, maybe before its after_run
        assert len(set(got)) == len(got), f"a step yielded twice: {got}"
        yields = [i for i, ev in enumerate(c.log) if ev.kind == "yielded"]
        for at, value in zip(yields, got, strict=True):
            item = int(str(value).split("@")[1])
            ran = [end for _, _, end in c.raw.get(item, []) if end is not None and end.kind == "ran"]
            assert ran and c.log.index(ran[0]) < at, f"yielded {value} before its run returned"
        assert cut or set(wanted) <= set(got), f"yielded {got}, expected at least {wanted}"
    else:
        for item in range(c.sc.items):
            outcome = c.obs.task_outcomes.get(item)
            if outcome is None:
                assert "cancel" in c.at or "entered" not in c.at, f"run() of item {item} never returned"
                continue
            if item in admitted and c.succeeded(item) and outcome[0] == "ok":
                assert outcome == ("ok", expected_value(item)), outcome
                continue
            assert outcome[0] == "raise", f"run() of item {item}: {outcome}"
            if outcome[1] == "RunAfterStopError":  # refused: a hook asked to stop (never another's clean stop)
                assert _stop_at(c) is not None or c.sc.last_step is not None, f"run() of item {item}: {outcome}"
            own = [f for f in c.failures if f.item == item and not c.absorbed(f)]
            if own and _fatal(c) in (None, own[0]):
                assert outcome == own[0].expected, (item, outcome, own[0].expected)


def _stop_at(c: LaneCheck) -> int | None:
    """Where the first stop was requested: a hook's request, or (iterate) a step's clean-stop
    error, the end of the input. A clean stop from a ``run()`` caller's step is that caller's
    error, as with one lane: it stops nothing (``_results`` checks the caller got it)."""
    leaving = c.at.get("leaving", len(c.log))
    stops = [i for i, ev in enumerate(c.log[:leaving]) if ev.kind == "stop"]
    if c.sc.mode != "tasks":
        stops += [f.at for f in c.failures if f.effect == "oor" and f.at < leaving]
    return min(stops) if stops else None


def _stops(c: LaneCheck) -> None:
    """Once a stop is requested, only steps holding a lane then, or admitted into the lanes
    left free, run."""
    stop = _stop_at(c)
    if stop is None:
        return
    admitted = c.admitted()
    new = [item for item in admitted if c.first_seen(item) > stop]
    holding = []
    for item in admitted:
        if c.first_seen(item) > stop:
            continue
        ended = any(end is not None and end.kind == "ran" and c.log.index(end) < stop for _, _, end in c.raw.get(item, []))
        if not ended and not c.given_up(item, stop + 1):
            holding.append(item)
    assert len(new) + len(holding) <= c.sc.lanes, f"after the stop: {holding} in flight, {new} admitted"


def _cut(c: LaneCheck) -> None:
    """After a cancellation (or, for iterate, a fatal error) nothing new happens: no raw run
    starts or completes, no hook phase starts; only the runs in flight are cancelled."""
    cut = _cut_at(c)
    fatal = _fatal(c)
    if fatal is not None and c.sc.mode == "tasks":  # the steps in flight at the error are cancelled
        in_flight = {item for item in c.admitted() if c.first_seen(item) < fatal.at and item != fatal.item}
        for item in in_flight:
            for start, _, end in c.raw.get(item, []):
                assert start < fatal.at, f"item {item} started a raw run after the error"
                if end is not None and c.log.index(end) > fatal.at:
                    assert end.kind == "run-cancelled", f"item {item}'s run completed after the error"
            for inst in c.instances:
                if inst.item == item and inst.phase in ("before_run", "after_run"):
                    assert inst.start < fatal.at, f"{inst.phase} (item {item}) started after the error"
    leaving = c.at.get("leaving", len(c.log))
    for ev in c.log[cut + 1 : leaving]:
        assert ev.kind not in ("run", "ran", "run-raised"), f"after the cut at {cut}: {ev}"
    for inst in c.instances:
        if cut < inst.start < leaving:
            raise AssertionError(f"{inst.phase} (item {inst.item}) started after the cut")


def _sessions(c: LaneCheck) -> None:
    """N sessions at entry, never more than N open; a session closed early only after a
    recoverable failure on it; a re-run on a fresh session; after_create_session for each."""
    open_: set[str] = set()
    peak = 0
    fatal = _fatal(c)
    early = min(_cut_at(c), c.at.get("leaving", len(c.log)), len(c.log) if fatal is None else fatal.at)
    failed = {f.session for f in c.failures if f.effect == "aborted" and f.session}
    failed |= {inst.session for inst in c.instances if inst.phase == "after_create_session" and any(x.end != "done" for x in inst.calls)}
    running: dict[str, int] = {}
    for i, ev in enumerate(c.log):
        if ev.kind == "run":  # a lane runs one step at a time; at most N runs at once
            running[ev.session] = running.get(ev.session, 0) + 1
            assert running[ev.session] == 1, f"two runs at once on {ev.session}"
            assert sum(running.values()) <= c.sc.lanes, f"{sum(running.values())} runs at once"
        elif ev.kind in ("ran", "run-raised", "run-cancelled"):
            running[ev.session] -= 1
        elif ev.kind == "created":
            open_.add(ev.session)
            peak = max(peak, len(open_))
        elif ev.kind == "closed":
            open_.discard(ev.session)
            if i < early:
                assert ev.session in failed, f"{ev.session} closed though nothing failed on it"
        elif ev.kind == "entered":
            assert len(open_) == c.sc.lanes, f"{len(open_)} sessions open at entry, {c.sc.lanes} lanes"
    assert peak <= c.sc.lanes, f"{peak} sessions open at once, {c.sc.lanes} lanes"
    for f in c.failures:
        if f.item >= 0 and c.absorbed(f):
            later = [ev for start, ev, _ in c.raw.get(f.item, []) if start > f.at]
            assert not later or later[0].session != f.session, f"item {f.item} re-ran on the failed {f.session}"
    for f in c.failures:  # a session that failed with a recoverable error is never stepped again
        if f.effect != "aborted" or not f.session:
            continue
        since = f.at
        stepped = [ev.item for runs in c.raw.values() for start, ev, _ in runs if start > since and ev.session == f.session]
        stepped += [inst.item for inst in c.instances if inst.phase == "before_run" and inst.start > since and inst.session == f.session]
        assert not stepped, f"{f.session} failed ({f.expected}), then stepped again for items {stepped}"
    ran_on = {ev.session for runs in c.raw.values() for _, ev, _ in runs}
    for plan in c.sc.hooks:
        if "after_create_session" not in plan.kinds:
            continue
        seen = Counter(call.ev.session for call in c.calls.values() if call.hook == plan.name and call.phase == "after_create_session")
        assert all(n == 1 for n in seen.values()), f"{plan.name}: after_create_session {seen}"
        missing = ran_on - set(seen)
        assert not missing, f"{plan.name}: no after_create_session for {missing}"
