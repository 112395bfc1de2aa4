"""Run a generated scenario on the real runtime, then replay it in a small sequential
reference model of the documented behaviour and compare.

The runtime side (``run_scenario``): every test hook logs ``start``/``done``/
``raised``/``cancelled``/``stop`` events keyed by hook, phase and call number; the
driver logs a marker before each caller action, and records what each action got or
raised and how many tasks were running afterwards.

The model side (``Model``): replays the caller's actions one after another. Where the
runtime may legitimately differ from run to run (which hooks of a phase had started
when a sibling failed, whether a suspended hook was cancelled or finished), the model
reads the log, checks that what happened is allowed by the dispatcher's rules
(hooks start in list order; a hook failing before it suspends stops later ones from
starting; a failure cancels the others; the earliest hook's error wins) and carries
on. Everything else is computed and compared exactly: each hook's calls with their
arguments and results, each caller action's outcome, every session run's keys and
feeds, the sessions created and closed, the step counter, the number of tasks.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel

from hookrun import (
    AbortedError,
    HookTimeoutError,
    MonitoredSession,
    OutOfRangeError,
    RetryPolicy,
    RunOptions,
    SessionRunArgs,
    SessionRunHook,
    SingularMonitoredSession,
)
from hookrun.testing import ScriptedCreator, ScriptedSession

from .strategies import (
    CHECKPOINT,
    KEYS,
    PHASES,
    SLEEP,
    Action,
    HookPlan,
    Scenario,
)

__all__ = ["Event", "Model", "Observed", "check_scenario", "run_scenario"]

_ERROR_TYPES: dict[str, type[Exception]] = {
    "error": ValueError,
    "aborted": AbortedError,
    "oor": OutOfRangeError,
}
_RUN_PHASES = ("before_run", "after_run")


def make_error(effect: str, message: str) -> Exception:
    return _ERROR_TYPES[effect](message)


@dataclass
class Event:
    hook: str
    phase: str
    number: int
    kind: str  # start, done, raised, cancelled, stop, or "action" (a caller-action marker)
    data: Any = None


# -- the runtime side ---------------------------------------------------------------------


class _ScenarioHook(SessionRunHook):
    def __init__(self, plan: HookPlan, log: list[Event]) -> None:
        self.name = plan.name
        self.plan = plan
        self.log = log
        self.counts = dict.fromkeys(PHASES, 0)
        #: The task each call in progress started in, by (phase, number).
        self.tasks: dict[tuple[str, int], int] = {}

    def _start(self, phase: str, args: tuple[Any, ...]) -> tuple[int, Action]:
        number = self.counts[phase]
        self.counts[phase] += 1
        self.log.append(Event(self.name, phase, number, "start", (_salient(phase, args), _token(phase, args))))
        self.tasks[(phase, number)] = anyio.get_current_task().id
        return number, self.plan.action(phase, number)

    def _ended(self, phase: str, number: int) -> None:
        """A call ends: it must end in the task it started in (never finished by another
        task, or by the garbage collector, after being dropped half-way)."""
        if self.tasks.pop((phase, number)) != anyio.get_current_task().id:
            self.log.append(Event(self.name, phase, number, "foreign"))

    def _finish(self, phase: str, number: int, action: Action, args: tuple[Any, ...]) -> Any:
        self._ended(phase, number)
        effect = action.effect
        if effect in _ERROR_TYPES:
            self.log.append(Event(self.name, phase, number, "raised"))
            raise make_error(effect, f"{self.name}.{phase}#{number}")
        if effect == "stop" and phase in _RUN_PHASES:
            args[0].request_stop()
            self.log.append(Event(self.name, phase, number, "stop"))
        self.log.append(Event(self.name, phase, number, "done"))
        return self._request() if phase == "before_run" else None

    def _request(self) -> SessionRunArgs | None:
        feeds = {key: f"{self.name}:{key}" for key in self.plan.feeds}
        if self.plan.fetches is None and not feeds:
            return None
        return SessionRunArgs(self.plan.fetches, feeds or None)

    def _sync(self, phase: str, args: tuple[Any, ...]) -> Any:
        number, action = self._start(phase, args)
        return self._finish(phase, number, action, args)

    async def _async(self, phase: str, args: tuple[Any, ...]) -> Any:
        number, action = self._start(phase, args)
        started = anyio.current_time()
        try:
            if action.delay == CHECKPOINT:
                await anyio.lowlevel.checkpoint()
            elif action.delay == SLEEP:
                await anyio.sleep(action.sleep)
            if action.effect == "hang":
                await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            elapsed = anyio.current_time() - started
            self._ended(phase, number)
            self.log.append(Event(self.name, phase, number, "cancelled", elapsed))
            raise
        return self._finish(phase, number, action, args)


def _salient(phase: str, args: tuple[Any, ...]) -> Any:
    if phase == "after_create_session":
        return getattr(args[0], "name", args[0])
    if phase == "end":
        return getattr(args[0], "name", args[0])
    if phase == "before_run":
        return args[0].global_step
    if phase == "after_run":
        return (args[1].results, args[1].global_step)
    return None


def _token(phase: str, args: tuple[Any, ...]) -> object:
    """The object that identifies one run of a phase (kept alive by the log)."""
    if phase in _RUN_PHASES:
        return args[0]
    if phase == "after_create_session":
        return args[0]  # the new session (the coordinator is the monitored session's one)
    return None


_HOOK_CLASSES: dict[tuple[tuple[str, str], ...], type[_ScenarioHook]] = {}


def _hook_class(kinds: Mapping[str, str]) -> type[_ScenarioHook]:
    key = tuple(sorted(kinds.items()))
    cls = _HOOK_CLASSES.get(key)
    if cls is None:
        namespace: dict[str, Any] = {}
        for phase, kind in kinds.items():
            namespace[phase] = _sync_method(phase) if kind == "sync" else _async_method(phase)
        cls = type("ScenarioHook_" + "_".join(f"{p[:3]}{k[0]}" for p, k in key), (_ScenarioHook,), namespace)
        _HOOK_CLASSES[key] = cls
    return cls


def _sync_method(phase: str) -> Any:
    def method(self: _ScenarioHook, *args: Any) -> Any:
        return self._sync(phase, args)

    return method


def _async_method(phase: str) -> Any:
    async def method(self: _ScenarioHook, *args: Any) -> Any:
        return await self._async(phase, args)

    return method


def _answer_values() -> dict[Hashable, Any]:
    return {key: (lambda step, feeds, key=key: f"{key}@{step}") for key in KEYS}


@dataclass
class Observed:
    """What the runtime did: caller outcomes, the event log, the creator, the counter."""

    outcomes: list[tuple[Any, ...]]
    log: list[Event]
    creator: ScriptedCreator
    counter: int
    baseline_tasks: int
    tasks_after_exit: int
    #: After each caller action: (current raw session's name or None, step counter,
    #: [(steps, closed) of every created session], creation attempts). Used only to
    #: re-synchronise the model after a run the caller cancelled mid-way.
    snapshots: list[tuple[Any, ...]] = field(default_factory=list)


def describe(exc: BaseException) -> tuple[Any, ...]:
    if isinstance(exc, HookTimeoutError):
        return ("raise", "HookTimeoutError", exc.phase, getattr(exc.hook, "name", None))
    return ("raise", type(exc).__name__, str(exc))


async def run_scenario(scenario: Scenario) -> Observed:
    log: list[Event] = []
    hooks = [_hook_class(plan.kinds)(plan, log) for plan in scenario.hooks]
    creator = ScriptedCreator(
        _answer_values(),
        session_errors={
            s: {step: make_error(e, f"session{s}.step{step}") for step, e in steps.items()}
            for s, steps in scenario.session_errors.items()
        },
        errors={n: make_error(e, f"create#{n}") for n, e in scenario.creator_errors.items()},
        hang_at=dict(scenario.hang_at),
    )
    sess: MonitoredSession | SingularMonitoredSession
    if scenario.singular:
        sess = SingularMonitoredSession(creator, hooks, hook_timeout=scenario.hook_timeout, stop_grace_period=1)
    else:
        retry = RetryPolicy(max_attempts=scenario.max_attempts, initial_delay=0, jitter=False)
        sess = MonitoredSession(
            creator, hooks, hook_timeout=scenario.hook_timeout, stop_grace_period=1, retry=retry
        )
    options = None if scenario.session_timeout is None else RunOptions(timeout=scenario.session_timeout)
    outcomes: list[tuple[Any, ...]] = []
    snapshots: list[tuple[Any, ...]] = []
    baseline = len(anyio.get_running_tasks())
    race: dict[str, Any] = {}
    with anyio.fail_after(30):
        async with anyio.create_task_group() as helpers:  # the tasks of a close_and_leave action
            block = anyio.CancelScope()
            try:
                with block:
                    async with sess:
                        outcomes.append(("entered", _tasks(baseline, len(hooks))))
                        for number, action in enumerate(scenario.actions):
                            log.append(Event("", "", number, "action"))
                            if action.kind == "close_and_leave":  # the last action: never returns
                                await _close_and_leave(sess, action, options, block, helpers, race)
                            outcome = await _act(sess, action, options)
                            outcomes.append((*outcome, _tasks(baseline, len(hooks))))
                            snapshots.append(_snapshot(sess, creator))
                        log.append(Event("", "", len(scenario.actions), "action"))
                        if scenario.exit == "oor":
                            raise OutOfRangeError("body")
                        if scenario.exit == "error":
                            raise ValueError("body")
            except Exception as exc:
                outcomes.append(("exit", describe(exc)))
            else:
                outcomes.append(("exit", "left" if block.cancelled_caught else None))
    if race:
        outcomes.insert(len(outcomes) - 1, ("close_and_leave", race["ran"], race["joined"], race["other"]))
        snapshots.append(_snapshot(sess, creator))
    tasks_after = len(anyio.get_running_tasks())
    return Observed(outcomes, log, creator, _counter(sess), baseline, tasks_after, snapshots)


#: The dispatcher's pooled hook workers stay parked on the session's task group.
WORKER_TASK = "hookrun hook worker"


async def _close_and_leave(
    sess: MonitoredSession | SingularMonitoredSession, action: Any, options: RunOptions | None,
    block: anyio.CancelScope, helpers: Any, race: dict[str, Any],
) -> None:
    """Another task closes while this task (the block) runs a step, and the block is
    cancelled ``action.delay`` seconds later: the step, the close and the cancellation
    race. ``race`` gets the step's outcome, whether the close found the session closed
    already (``joined``) and what that ``aclose()`` returned or raised."""

    async def close() -> None:
        race["joined"] = sess._state.value == "closed"
        try:
            await sess.aclose()
        except Exception as exc:
            race["other"] = describe(exc)
        else:
            race["other"] = None

    async def leave() -> None:
        await anyio.sleep(action.delay)
        block.cancel()

    helpers.start_soon(close)
    helpers.start_soon(leave)
    race["ran"] = ("cancelled",)
    try:
        race["ran"] = ("ok", await sess.run(action.fetches, dict(action.feeds) or None, options))
    except Exception as exc:
        race["ran"] = describe(exc)
    await anyio.sleep_forever()


def _tasks(baseline: int, n_hooks: int) -> int:
    """Tasks running beyond the baseline, pooled hook workers excepted (at most one per hook)."""
    tasks = anyio.get_running_tasks()
    workers = sum(task.name == WORKER_TASK for task in tasks)
    assert workers <= n_hooks, f"{workers} hook workers for {n_hooks} hooks"
    return len(tasks) - workers - baseline


def _snapshot(sess: MonitoredSession | SingularMonitoredSession, creator: ScriptedCreator) -> tuple[Any, ...]:
    raw = sess.raw_session()
    return (
        None if raw is None else raw.name,
        _counter(sess),
        [(s.steps, s.closed) for s in creator.sessions],
        creator.attempts,
        sess._state.value == "recovering",  # a failed session waits to be replaced by the next run()
    )


def _counter(sess: MonitoredSession | SingularMonitoredSession) -> int:
    value = getattr(sess.step_counter, "value", None)
    assert isinstance(value, int)
    return value


async def _act(sess: MonitoredSession | SingularMonitoredSession, action: Any, options: RunOptions | None) -> tuple[Any, ...]:
    kind = action.kind
    if kind == "should_stop":
        return ("should_stop", sess.should_stop())
    if kind == "aclose":
        try:
            await sess.aclose()
        except Exception as exc:
            return ("aclose", describe(exc))
        return ("aclose", None)
    try:
        if kind == "cancel":
            with anyio.move_on_after(action.delay) as scope:
                value = await sess.run(action.fetches, dict(action.feeds) or None, options)
            if scope.cancelled_caught:
                return ("cancelled",)
        else:
            value = await sess.run(action.fetches, dict(action.feeds) or None, options)
    except Exception as exc:
        return describe(exc)
    return ("ok", value)


# -- the sequential reference model -----------------------------------------------------------


class Cut(Exception):
    """The model's step was interrupted by the caller's cancellation (seen in the log)."""


@dataclass
class _Session:
    name: str
    index: int
    steps: int = 0
    closed: int = 0
    runs: list[tuple[list[Hashable], dict[str, Any]]] = field(default_factory=list)


def _leaves(structure: object) -> list[Hashable]:
    if structure is None:
        return []
    if isinstance(structure, list | tuple):
        return [leaf for item in structure for leaf in _leaves(item)]
    if isinstance(structure, dict):
        return [leaf for value in structure.values() for leaf in _leaves(value)]
    assert isinstance(structure, Hashable)
    return [structure]


def _mapped(structure: object, values: Mapping[Hashable, Any]) -> Any:
    if structure is None:
        return None
    if isinstance(structure, list):
        return [_mapped(item, values) for item in structure]
    if isinstance(structure, tuple):
        return tuple(_mapped(item, values) for item in structure)
    if isinstance(structure, dict):
        return {key: _mapped(value, values) for key, value in structure.items()}
    assert isinstance(structure, Hashable)
    return values[structure]


class _StepError(Exception):
    """The model's expectation that a step raises ``expected`` (a ``describe`` tuple)."""

    def __init__(self, expected: tuple[Any, ...], recoverable: bool = False) -> None:
        super().__init__(expected)
        self.expected = expected
        self.recoverable = recoverable


class Model:
    """Sequential replay of a scenario; ``check`` asserts the runtime matched it."""

    def __init__(self, scenario: Scenario, observed: Observed) -> None:
        self.sc = scenario
        self.obs = observed
        self.hooks = scenario.hooks
        self.numbers: dict[tuple[str, str], int] = {}
        self.state = "new"
        self.hook_stop = False
        self.broken = False
        #: The current session failed with a recoverable error that was not recovered from
        #: (the retry policy gave up, or the caller cancelled the recovery): the next run()
        #: closes it and creates a new one before its step.
        self.failed = False
        self.counter = 0
        self.sessions: list[_Session] = []
        self.current: _Session | None = None
        self.attempts = 0
        self.cancelling = False
        self.tokens: list[tuple[str, object]] = []
        self.hint: tuple[Any, ...] | None = None
        self.segments: list[list[Event]] = []
        #: Events of each caller action (0: entering; last: leaving), by hook, phase, number.
        self.by_segment: list[dict[tuple[str, str, int], dict[str, Any]]] = []
        self.segment = 0
        self._index_log()

    def _index_log(self) -> None:
        segment: list[Event] = []
        self.segments = [segment]
        events: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.by_segment = [events]
        for event in self.obs.log:
            if event.kind == "action":
                segment, events = [], {}
                self.segments.append(segment)
                self.by_segment.append(events)
                continue
            segment.append(event)
            slot = events.setdefault((event.hook, event.phase, event.number), {})
            assert event.kind not in slot, f"duplicate {event}"
            slot[event.kind] = event.data

    @property
    def events(self) -> dict[tuple[str, str, int], dict[str, Any]]:
        return self.by_segment[self.segment] if self.segment < len(self.by_segment) else {}

    # -- phases ------------------------------------------------------------------------------

    def phase(self, phase: str, salient: Mapping[str, Any], cancelling: bool = False) -> list[Any]:
        """Replay one phase; return each hook's result (before_run: its request) or raise."""
        cancelling = cancelling or self.cancelling
        plans = [plan for plan in self.hooks if phase in plan.kinds]
        started: list[tuple[HookPlan, int, dict[str, Any]]] = []
        token: object = None
        for plan in plans:
            number = self.numbers.get((plan.name, phase), 0)
            slot = self.events.get((plan.name, phase, number))
            if slot is None or "start" not in slot:
                break
            this = slot["start"][1]
            if started and this is not token:
                break  # it started in a later run of this phase (a retried step)
            if not started:
                assert this is None or not any(
                    this is seen and phase == seen_phase for seen_phase, seen in self.tokens
                ), "one run of a phase seen twice"
                token = this
            started.append((plan, number, slot))
            self.numbers[(plan.name, phase)] = number + 1
        if token is not None:
            self.tokens.append((phase, token))
        errors: list[tuple[int, tuple[Any, ...], bool]] = []
        cancelled_any = False
        immediate: int | None = None
        results: list[Any] = []
        for position, (plan, number, slot) in enumerate(started):
            where = f"{plan.name}.{phase}#{number}"
            assert slot["start"][0] == salient.get(plan.name), (where, slot["start"][0], salient.get(plan.name))
            action = plan.action(phase, number)
            ends = [k for k in ("done", "raised", "cancelled") if k in slot]
            assert len(ends) == 1, (where, slot)
            end = ends[0]
            suspends = plan.kinds[phase] == "async" and (action.delay != 0 or action.effect == "hang")
            if action.effect in _ERROR_TYPES:
                assert end in (("raised", "cancelled") if suspends else ("raised",)), (where, end)
            elif action.effect == "hang":
                assert end == "cancelled", (where, end)
            else:
                assert end in (("done", "cancelled") if suspends else ("done",)), (where, end)
            wants_stop = action.effect == "stop" and phase in _RUN_PHASES and end == "done"
            assert ("stop" in slot) == wants_stop, (where, slot)
            if wants_stop:
                self.hook_stop = True
            if end == "raised":
                error = make_error(action.effect, where)
                errors.append((position, describe(error), isinstance(error, AbortedError)))
                if not suspends and immediate is None:
                    immediate = position
            if end == "cancelled":
                cancelled_any = True
                # A hang that ran out its hook_timeout, or was cancelled by a sibling's
                # failure at about the same time: either is allowed; the log cannot tell
                # which scope fired, so the caller's outcome (the hint) decides. Only the
                # hook's own timeout raises a HookTimeoutError naming it, so the hint is
                # enough; the time the hook saw is not (a loaded machine can stall the
                # process between the timeout's start and the hook's first line).
                # A hook called again in the same run() (a retried step) did not end its
                # attempt with a timeout: the attempt was retried, so its error was recoverable.
                timeout = ("raise", "HookTimeoutError", phase, plan.name)
                retried = (plan.name, phase, number + 1) in self.events
                if action.effect == "hang" and self.hint == timeout and not retried:
                    errors.append((position, timeout, False))
            results.append(self._request(plan) if phase == "before_run" and end == "done" else None)
        if immediate is not None:
            assert len(started) == immediate + 1, f"{phase}: hooks started after an immediate failure"
        if errors:
            errors.sort(key=lambda item: item[0])
            _, expected, recoverable = errors[0]
            raise _StepError(expected, recoverable)
        if len(started) < len(plans) or cancelled_any:
            assert cancelling, f"{phase}: hooks cut short without any failure: {started}"
            raise Cut(phase)
        return results

    def _request(self, plan: HookPlan) -> tuple[Any, dict[str, str]] | None:
        feeds = {key: f"{plan.name}:{key}" for key in plan.feeds}
        if plan.fetches is None and not feeds:
            return None
        return (plan.fetches, feeds)

    # -- lifecycle ----------------------------------------------------------------------------

    def enter(self) -> tuple[Any, ...] | None:
        """Model ``__aenter__``; return the exit outcome if entering failed."""
        self.state = "open"
        try:
            self.phase("begin", {})
            self.create(1)
        except _StepError as exc:
            self.state = "closed"
            return ("exit", exc.expected)
        return None

    def create(self, attempts: int) -> int:
        """Create a session (retrying while the budget allows); return the attempt count."""
        while True:
            try:
                self._create_once()
                return attempts
            except _StepError as exc:
                if self.sc.singular or not exc.recoverable or attempts >= self.sc.max_attempts:
                    raise
                attempts += 1

    def _create_once(self) -> None:
        number = self.attempts
        self.attempts += 1
        effect = self.sc.creator_errors.get(number)
        if effect is not None:
            raise _StepError(describe(make_error(effect, f"create#{number}")), effect == "aborted")
        session = _Session(f"session-{len(self.sessions)}", len(self.sessions))
        self.sessions.append(session)
        self.current = session
        try:
            self.phase("after_create_session", {plan.name: session.name for plan in self.hooks})
        except _StepError:
            self._close_current()
            raise

    def _close_current(self) -> None:
        if self.current is not None:
            self.current.closed += 1
            self.current = None

    def close(self, call_end: bool) -> tuple[Any, ...] | None:
        self.state = "closed"
        error = None
        if call_end and self.current is not None:  # no session (lost to a failed re-creation): no end
            name = self.current.name
            try:
                self.phase("end", {plan.name: name for plan in self.hooks})
            except _StepError as exc:
                error = exc.expected
        self._close_current()
        return error

    def should_stop(self) -> bool:
        # A session lost to a failed re-creation is created again by the next run(): not stopped.
        return self.state != "open" or self.hook_stop

    # -- one run() call -------------------------------------------------------------------------

    def run(self, fetches: object, feeds: Mapping[str, str], cancelling: bool) -> tuple[Any, ...]:
        if self.state != "open":
            return ("raise", "SessionClosedError", "MonitoredSession.run() called after the session closed"
                    if not self.sc.singular else
                    "SingularMonitoredSession.run() called after the session closed")
        if self.hook_stop:
            return ("raise", "RunAfterStopError", None)
        attempts = 1
        if self.failed and not self.sc.singular:
            # a session that failed is never stepped again: run() replaces it first
            self.failed = False
            self._close_current()
        if self.current is None and not self.sc.singular:
            # the session was lost to a failed re-creation: run() creates it again first
            try:
                attempts = self.create(attempts)
            except _StepError as failed:
                return failed.expected
        while True:
            try:
                return ("ok", self._attempt(fetches, feeds, cancelling))
            except _StepError as exc:
                if self.sc.singular or not exc.recoverable or attempts >= self.sc.max_attempts:
                    self.failed = exc.recoverable and not self.sc.singular
                    return exc.expected
                attempts += 1
                self._close_current()
                try:
                    attempts = self.create(attempts)
                except _StepError as failed:
                    self.broken = True
                    return failed.expected

    def _attempt(self, fetches: object, feeds: Mapping[str, str], cancelling: bool) -> Any:
        session = self.current
        if session is None:
            raise _StepError(("raise", "SessionClosedError", None))
        step = self.counter
        befores = [plan for plan in self.hooks if "before_run" in plan.kinds]
        requests = self.phase("before_run", {plan.name: step for plan in befores}, cancelling)
        keys = list(dict.fromkeys(_leaves(fetches)))
        hook_feeds: dict[str, str] = {}
        conflict = False
        fetched: dict[str, object] = {}
        for plan, request in zip(befores, requests, strict=True):
            if request is None:
                continue
            hook_fetches, hook_feed = request
            if hook_fetches is not None:
                fetched[plan.name] = hook_fetches
                keys += [k for k in dict.fromkeys(_leaves(hook_fetches)) if k not in keys]
            for key, value in hook_feed.items():
                conflict = conflict or key in hook_feeds
                hook_feeds.setdefault(key, value)
        conflict = conflict or any(key in hook_feeds for key in feeds)
        if conflict:
            raise _StepError(("raise", "FeedConflictError", None))
        merged = {**hook_feeds, **feeds}
        return self._session_run(session, step, keys, merged, fetches, fetched, cancelling)

    def _session_run(
        self,
        session: _Session,
        step: int,
        keys: list[Hashable],
        feeds: dict[str, str],
        fetches: object,
        fetched: Mapping[str, object],
        cancelling: bool,
    ) -> Any:
        real = self.obs.creator.sessions[session.index]
        if cancelling and len(real.runs) == session.steps:
            raise Cut("session run")
        number = session.steps
        session.steps += 1
        session.runs.append((keys, dict(feeds)))
        if number in self.sc.hang_at.get(session.index, ()):
            raise _StepError(("raise", "DeadlineExceededError", None))
        effect = self.sc.session_errors.get(session.index, {}).get(number)
        if effect is not None:
            error = make_error(effect, f"session{session.index}.step{number}")
            raise _StepError(describe(error), isinstance(error, AbortedError))
        missing = [key for key in keys if key not in KEYS and key not in feeds]
        if missing:
            raise _StepError(("raise", "KeyError", None))
        answers = {key: (f"{key}@{number}" if key in KEYS else feeds[str(key)]) for key in keys}
        self.counter += 1
        afters = [plan for plan in self.hooks if "after_run" in plan.kinds]
        salient = {
            plan.name: (_mapped(fetched.get(plan.name), answers), self.counter) for plan in afters
        }
        self.phase("after_run", salient, cancelling)
        return _mapped(fetches, answers)

    # -- the whole scenario ---------------------------------------------------------------------

    def expected_outcomes(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        self.hint = _error_of(self.obs.outcomes[0])
        failed = self.enter()
        if failed is not None:
            return [failed]
        out.append(("entered", self.tasks()))
        for number, action in enumerate(self.sc.actions):
            self.segment = number + 1
            observed = self.obs.outcomes[len(out)]
            self.hint = _error_of(observed)
            if action.kind == "close_and_leave":  # the last action: the block is left
                out.append(self._close_and_leave(observed, number))
                out.append(("exit", "left"))
                return out
            out.append((*self.act(action, observed, number), self.tasks()))
        self.segment = len(self.sc.actions) + 1
        self.hint = _error_of(self.obs.outcomes[-1])
        exit_error: tuple[Any, ...] | None
        if self.sc.exit == "error":
            self.close(call_end=False) if self.state == "open" else None
            exit_error = ("raise", "ValueError", "body")
        else:
            exit_error = self.close(call_end=True) if self.state == "open" else None
        out.append(("exit", exit_error))
        return out

    def tasks(self) -> int:
        # The coordinator's host: one per monitored session, from its first session to its close.
        return 1 if self.state == "open" and self.sessions else 0

    def act(self, action: Any, observed: tuple[Any, ...], number: int) -> tuple[Any, ...]:
        if action.kind == "should_stop":
            return ("should_stop", self.should_stop())
        if action.kind == "aclose":
            if self.state != "open":
                return ("aclose", None)
            return ("aclose", self.close(call_end=True))
        cancelling = action.kind == "cancel" and observed[0] == "cancelled"
        if cancelling:
            return self._cancelled_run(action, number)
        return self.run(action.fetches, action.feeds, cancelling=False)

    def _close_and_leave(self, observed: tuple[Any, ...], number: int) -> tuple[Any, ...]:
        """A step, a close from another task and the block's cancellation raced: whatever
        the step did, the close returns normally only if it had nothing left to do (the
        session was closed already, or every hook's end ran to its end), else it raises the
        error of an end hook or ``SessionClosedError`` (the block cut it short); never
        anything else. The model then takes the sessions and the counter as they ended
        (the checks of every started call, every session closed once and no task left
        still apply)."""
        kind, ran, joined, other = observed
        assert kind == "close_and_leave" and ran[0] in ("ok", "cancelled", "raise"), observed
        ends = {
            key: slot for key, slot in self.by_segment[number + 1].items() if key[1] == "end" and "start" in slot
        }
        end_errors = [
            describe(make_error(plan.action("end", key[2]).effect, f"{plan.name}.end#{key[2]}"))
            for plan in self.hooks for key, slot in ends.items() if key[0] == plan.name and "raised" in slot
        ]
        cut = any("cancelled" in slot for slot in ends.values())
        if joined:  # the block's own close came first: this one waits for it, and returns
            assert other is None and not ends, observed
        elif other is not None:
            left = ("raise", "SessionClosedError")
            timeout = other[:2] == ("raise", "HookTimeoutError")
            assert other[:2] == left or other in end_errors or timeout, (other, end_errors)
            if other[:2] == left:
                assert "was left (cancelled) while aclose() ran in another task" in other[2], other
        else:
            assert not cut, f"aclose() returned normally though end was cut short: {ends}"
        self._resync(number)
        self.state = "closed"
        return observed

    def _resync(self, number: int) -> None:
        """Take the sessions, the attempts and the counter from the runtime's snapshot
        after action ``number``."""
        current, counter, sessions, attempts, failed = self.obs.snapshots[number]
        real = self.obs.creator.sessions
        del self.sessions[len(sessions):]  # sessions the replay created that the runtime had not yet
        while len(self.sessions) < len(sessions):
            self.sessions.append(_Session(f"session-{len(self.sessions)}", len(self.sessions)))
        self.failed = failed
        for mine, theirs, (steps, closed) in zip(self.sessions, real, sessions, strict=False):
            mine.steps = steps
            mine.runs = [(list(keys), {str(k): v for k, v in feeds.items()}) for keys, feeds, _ in theirs.runs[:steps]]
            mine.closed = closed
        self.attempts = attempts
        self.current = next((s for s in self.sessions if s.name == current), None)
        self.counter = counter

    def _cancelled_run(self, action: Any, number: int) -> tuple[Any, ...]:
        """The caller's cancellation interrupted this run: check what happened is a prefix
        of an allowed run, then re-synchronise the model from the log and the sessions."""
        if self.state == "open" and not self.hook_stop:
            self.cancelling = True
            try:
                self.run(action.fetches, action.feeds, cancelling=True)
            except Cut:
                pass
            finally:
                self.cancelling = False
        segment = self.segments[number + 1]
        for event in segment:
            if event.kind == "start":
                key = (event.hook, event.phase)
                self.numbers[key] = max(self.numbers.get(key, 0), event.number + 1)
            if event.kind == "stop":
                self.hook_stop = True
        self._resync(number)
        return ("cancelled",)


def _error_of(outcome: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if outcome and outcome[0] == "raise":
        return outcome[:4] if outcome[1] == "HookTimeoutError" else outcome[:3]
    for item in outcome:
        if isinstance(item, tuple) and item and item[0] == "raise":
            return item
    return None


def _matches(expected: tuple[Any, ...], observed: tuple[Any, ...]) -> bool:
    if len(expected) != len(observed):
        return False
    for e, o in zip(expected, observed, strict=True):
        if isinstance(e, tuple) and isinstance(o, tuple):
            if not _matches(e, o):
                return False
        elif (e is not None and e != o) or (e is None and o is not None and not (isinstance(o, str))):
            return False
    return True


def check_scenario(scenario: Scenario, observed: Observed) -> None:
    """Assert the runtime's behaviour equals the model's, and every invariant."""
    model = Model(scenario, observed)
    expected = model.expected_outcomes()
    assert len(expected) == len(observed.outcomes), (expected, observed.outcomes)
    for exp, obs in zip(expected, observed.outcomes, strict=True):
        assert _matches(exp, obs), f"expected {exp}, observed {obs}\nall observed: {observed.outcomes}"
    real = observed.creator.sessions
    assert len(real) == len(model.sessions), (len(real), len(model.sessions))
    assert observed.creator.attempts == model.attempts
    for mine, theirs in zip(model.sessions, real, strict=True):
        assert theirs.closed == 1, f"{theirs!r} closed {theirs.closed} times"
        assert theirs.steps == mine.steps, (theirs, mine)
        assert [(keys, feeds) for keys, feeds, _ in theirs.runs] == mine.runs
    assert observed.counter == model.counter
    assert observed.tasks_after_exit == observed.baseline_tasks
    _check_log_invariants(scenario, observed)


def _check_log_invariants(scenario: Scenario, observed: Observed) -> None:
    """begin at most once; after_run only after a successful run; every start ended."""
    begins = [e.hook for e in observed.log if e.phase == "begin" and e.kind == "start"]
    assert len(set(begins)) == len(begins), f"begin called twice: {begins}"
    every = [item for events in Model(scenario, observed).by_segment for item in events.items()]
    for (hook, phase, number), slot in every:
        assert "foreign" not in slot, f"{hook}.{phase}#{number} ended in another task than it started in"
        if "start" in slot:
            assert sum(k in slot for k in ("done", "raised", "cancelled")) == 1, (hook, phase, number, slot)
        if phase == "after_run" and "start" in slot:
            assert slot["start"][0][1] >= 1
    ends = [e for e in observed.log if e.phase == "end" and e.kind == "start"]
    assert len({e.hook for e in ends}) == len(ends), "end called twice for one hook"


def scenario_sessions(observed: Observed) -> Sequence[ScriptedSession]:
    return observed.creator.sessions
