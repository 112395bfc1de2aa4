"""Always-on statistics of a monitored session: the collector and its options.

What is counted exactly: steps (run and failed), sessions created, recoveries, the
calls of every hook in every phase and the errors each raised. What is timed: every
call of ``begin``, ``after_create_session`` and ``end`` (they are rare), and every
call of ``before_run`` / ``after_run``, the session run and the whole step on
*sampled* steps only, so that the statistics can stay on: an unsampled step costs
an integer increment and a compare. Sampling is adaptive unless fixed with
``StatisticsOptions(sample_every=N)``: one step in N on average (each gap drawn
between N/2 and 3N/2, so that no hook working every so many steps is always
missed), N between 1 and 256, the smallest N for which timing costs at most half a percent of the step time *and* at
most a tenth of what the hooks and the runtime add to the step (the step time
minus the session run's, less the timing itself). A step that waits a millisecond
for a cheap remote run is then timed about one in ten, a step whose hooks do real
work every time.

A sampled step runs the same phases through *timed plans*: the same calls, each
wrapped (a plain function stays plain, an async one async, so the dispatcher takes
the same path), recording ``(slot, seconds)`` in a private list read when the step
ends, where the slow-hook warning is also decided (only when the step itself took
longer than ``slow_hook_seconds``: no call within it can have). The durations are
folded into the histograms in batches (every ``_FOLD`` records, and before every
``snapshot``: those of the steps that ended), so that a sampled step after a wait
does not pay a histogram update per call with cold caches; the record is the same. The frozen record and its table
are in ``_report.py``.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._dispatch._plan import Call, PhasePlan
from .._errors import HookTimeoutError
from .._log import log_warning
from .._validate import check_flag, check_int, check_number
from ._histogram import Histogram
from ._report import HookStatistics, SessionStatistics

__all__ = ["Collector", "StatisticsOptions"]

#: Phases run once per step; the others are the lifecycle phases, timed on every call.
STEP_PHASES = ("before_run", "after_run")
_MAX_GAP = 256
#: Adaptive sampling spends about this share of the step time on timing: half a percent,
#: a tenth of what a handful of no-op hooks may add to a millisecond step.
_COST_SHARE = 0.005
#: ... and at most this share of what the hooks and the runtime add to a step.
_HOOK_SHARE = 0.1
#: What timing one step costs, about: a base and a share per call timed, as measured
#: on a step that runs right after a wait of a millisecond (how slow steps run: the
#: timing then costs several times what it costs in a tight loop; 2-core machine).
_COST_BASE = 2e-5
_COST_PER_CALL = 2e-6
#: Records folded into the histograms at once (and before every snapshot).
_FOLD = 1024
_NEVER = sys.maxsize


@dataclass(frozen=True, slots=True)
class StatisticsOptions:
    """How a monitored session keeps its statistics (``MonitoredSession(statistics=...)``).

    ``enabled``: False keeps no statistics at all (``statistics()`` then raises).
    ``sample_every``: time one step in N (``1``: every step); ``None`` (the default)
    adapts it between 1 and 256 to keep the cost of timing at about half a percent.
    ``slow_hook_share`` and ``slow_hook_seconds``: a ``before_run`` / ``after_run``
    call of a timed step that took more than this share of its step *and* more than
    this many seconds is logged once per hook and phase (``slow_hook_share=None``
    turns the warning off). ``clock``: a zero-argument callable returning seconds
    (default ``time.perf_counter``), e.g. ``hookrun.testing.MockClock``.

    Args:
        enabled: Keep statistics at all.
        sample_every: Time one step in this many. ``None``: adapt it, between 1 and 256.
        slow_hook_share: Share of its step above which a hook call is logged as slow.
            ``None``: never.
        slow_hook_seconds: Seconds above which a hook call is logged as slow (both must
            hold).
        clock: A function of no arguments returning seconds. ``None``:
            ``time.perf_counter``.
    """

    enabled: bool = True
    sample_every: int | None = None
    slow_hook_share: float | None = 0.5
    slow_hook_seconds: float = 0.1
    clock: Callable[[], float] | None = None

    def __post_init__(self) -> None:
        check_flag("StatisticsOptions(enabled=...)", self.enabled)
        check_int("StatisticsOptions(sample_every=...)", self.sample_every, minimum=1, optional=True)
        share = self.slow_hook_share
        check_number("StatisticsOptions(slow_hook_share=...)", share, strict=True, optional=True)
        if share is not None and share > 1:
            raise ValueError(f"StatisticsOptions(slow_hook_share=...) must be None or in (0, 1], got {share!r}")
        check_number("StatisticsOptions(slow_hook_seconds=...)", self.slow_hook_seconds, unit="seconds")
        if self.clock is not None and not callable(self.clock):
            raise TypeError(f"StatisticsOptions(clock=...) must be callable, got {type(self.clock).__name__}")


def statistics_options(value: object) -> StatisticsOptions:
    """``statistics=`` as given to a session: a bool or a ``StatisticsOptions``."""
    if isinstance(value, StatisticsOptions):
        return value
    if isinstance(value, bool):
        return StatisticsOptions(enabled=value)
    raise TypeError(f"statistics must be True, False or a hookrun.StatisticsOptions, got {type(value).__name__}")


class _Slot:
    """What is known of one hook in one phase."""

    __slots__ = ("calls", "errors", "hist", "hook", "index", "name", "phase", "warned")

    def __init__(self, call: Call) -> None:
        self.index, self.hook, self.name, self.phase = call.index, call.hook, call.name, call.phase
        self.calls = 0  # lifecycle phases only: step phases derive it from the step counts
        self.errors = 0
        self.hist = Histogram()
        self.warned = False


class _Hist:
    """A record's target that is a histogram only (the step's and the run's)."""

    __slots__ = ("hist",)

    def __init__(self, hist: Histogram) -> None:
        self.hist = hist


class Collector:
    """The statistics of one monitored session (see the module docstring)."""

    __slots__ = (
        "_clock",
        "_gap",
        "_jitter",
        "_mark",
        "_options",
        "_originals",
        "_overhead",
        "_plans",
        "_run_slot",
        "_slots",
        "_step_slot",
        "_typical",
        "after",
        "before",
        "clock",
        "enabled",
        "failures",
        "first_started",
        "gap",
        "next_sample",
        "records",
        "recoveries",
        "recovery_seconds",
        "retry_wait_seconds",
        "run_hist",
        "sampled",
        "sessions_created",
        "step_hist",
        "step_retries",
        "steps",
    )

    def __init__(self, plans: dict[str, PhasePlan], options: StatisticsOptions) -> None:
        self._options = options
        self.enabled = options.enabled
        self._clock: Callable[[], float] = options.clock or time.perf_counter
        #: The clock itself, for the step to read without a method call.
        self.clock = self._clock
        self.steps = 0  # step attempts: the hot path's one increment
        self.next_sample = 1 if self.enabled else _NEVER
        self.first_started: float | None = None  # when the first timed step began
        self._gap = options.sample_every or 1
        self.gap = self._gap  # from one timed step to the next, as last picked
        self._typical: float | None = None
        self._overhead: float | None = None
        self._jitter = random.Random(len(plans)).random  # seeded: a run's sampling is repeatable
        #: Timed durations not yet folded into their histograms; this step's start at ``_mark``.
        self.records: list[tuple[_Slot | _Hist, float]] = []
        self._mark = 0
        self.failures = {"before_run": 0, "run": 0, "after_run": 0}
        self.sessions_created = self.recoveries = self.sampled = 0
        self.recovery_seconds = self.retry_wait_seconds = 0.0
        self.step_retries = 0  # runs retried on the same session (``retry_on``)
        self.step_hist, self.run_hist = Histogram(), Histogram()
        self._step_slot, self._run_slot = _Hist(self.step_hist), _Hist(self.run_hist)
        self._slots = {phase: [_Slot(call) for call in plan.calls] for phase, plan in plans.items()}
        self._plans = {
            phase: self._timed_plan(plan, self._slots[phase], exact=phase not in STEP_PHASES) if self.enabled else plan
            for phase, plan in plans.items()
        }
        self.before, self.after = self._plans["before_run"], self._plans["after_run"]
        self._originals = (plans["before_run"], plans["after_run"])

    def plan(self, phase: str) -> PhasePlan:
        """The plan to run a lifecycle phase with (timed when the statistics are on)."""
        return self._plans[phase]

    def now(self) -> float:
        return self._clock()

    # -- steps -------------------------------------------------------------------------------

    def start_sample(self) -> float:
        """A sampled step starts: its timed plans take over what the plain ones learnt
        (how many hooks waited last time); the time now."""
        before, after = self._originals
        self.before.waiters, self.after.waiters = before.waiters, after.waiters
        return self._clock()

    def busy_share(self) -> float:
        """With one step at a time, the mean number of steps in flight since the first timed
        step began: the share of that time a step ran, estimated from the timed steps."""
        mean = self.step_hist.latency().mean
        if self.first_started is None or mean is None:
            return 0.0
        elapsed = self._clock() - self.first_started
        return 1.0 if elapsed <= 0 else min(1.0, self.steps * mean / elapsed)

    def spread(self, in_flight: int) -> None:
        """Up to ``in_flight`` steps will be in flight: unless the rate is fixed, the steps
        admitted before the first timed one ends are not all timed."""
        if self._options.sample_every is None:
            self.gap = max(self.gap, in_flight)

    def end_sample(
        self, step: int | None, started: float, run_seconds: float | None, ok: bool, in_flight: int = 1,
        picked: int | None = None,
    ) -> None:
        """A sampled step ended: fold its timings in, warn about slow hooks, pick the next one.
        With steps in flight, ``in_flight`` steps shared its time, and the next one is
        counted from ``picked``, the step count when it was picked (else from now), not
        before the one a later timed step picked."""
        seconds = self._clock() - started
        before, after = self._originals
        before.waiters, after.waiters = self.before.waiters, self.after.waiters
        if self.first_started is None:
            self.first_started = started
        self.sampled += 1
        records, mark = self.records, self._mark
        calls = len(records) - mark
        share = self._options.slow_hook_share
        if share is not None and ok and seconds > self._options.slow_hook_seconds:
            self._warn_slow(records[mark:], step, seconds, share)
        if run_seconds is not None:
            records.append((self._run_slot, run_seconds))
        if ok:
            records.append((self._step_slot, seconds))
        self._mark = len(records)
        if self._mark >= _FOLD:
            self.fold()
        self.gap = gap = self._next_gap(seconds / in_flight, calls, None if run_seconds is None else seconds - run_seconds)
        if picked is None:
            self.next_sample = self.steps + gap
        else:  # never before the pick of a step timed since this one
            self.next_sample = max(self.next_sample, picked + gap)

    def _warn_slow(self, records: list[tuple[Any, float]], step: int | None, seconds: float, share: float) -> None:
        """Log each call of this step that took more than ``share`` of it and the floor."""
        floor = self._options.slow_hook_seconds
        for slot, took in records:
            if not slot.warned and took > floor and took > share * seconds:
                slot.warned = True
                log_warning(
                    "slow hook: %s took %.3gs in %s, %.0f%% of its step (%.3gs); logged once per hook and phase",
                    slot.name, took, slot.phase, 100.0 * took / seconds, seconds,
                    step=step, hook=slot.name, phase=slot.phase,
                )

    def fold(self) -> None:
        """Fold the durations of the timed steps that ended into their histograms (those of
        a timed step still running stay: its end reads them for the slow-hook warning)."""
        records, mark = self.records, self._mark
        for index in range(mark):
            slot, took = records[index]
            slot.hist.add(took)
        del records[:mark]
        self._mark = 0

    def _next_gap(self, seconds: float, calls: int, beside_run: float | None) -> int:
        """The next gap: ``seconds`` per step, ``calls`` timed, ``beside_run`` the step's time
        outside the session run (``None``: not known)."""
        if self._options.sample_every is not None:
            return self._gap
        # Moving averages of the timed steps: one step slowed by another process moves them little.
        typical = self._typical = seconds if self._typical is None else 0.75 * self._typical + 0.25 * seconds
        cost = _COST_BASE + _COST_PER_CALL * calls
        if typical <= 0:
            return _MAX_GAP
        gap = cost / (_COST_SHARE * typical)
        if beside_run is not None:  # what the hooks and the runtime added, the timing left out
            added = max(beside_run - cost, 0.0)
            overhead = self._overhead = added if self._overhead is None else 0.75 * self._overhead + 0.25 * added
            gap = max(gap, cost / (_HOOK_SHARE * overhead) if overhead > 0 else _MAX_GAP)
        # Jittered (mean kept): a fixed gap could keep missing a hook that works every N steps.
        return max(1, math.ceil(min(_MAX_GAP, gap) * (0.5 + self._jitter())))

    def failed(self, phase: str, exc: BaseException) -> None:
        """A step failed in ``phase`` (before_run, run, after_run): count it, and the hook's error."""
        self.failures[phase] += 1
        if phase in STEP_PHASES and isinstance(exc, Exception):
            slot = self.failing_slot(phase, exc)
            if slot is not None:
                slot.errors += 1

    def failing_slot(self, phase: str, exc: BaseException) -> _Slot | None:
        """The hook whose call raised ``exc`` in ``phase``: named by a ``HookTimeoutError``, else
        the outermost frame of the traceback that is one of the phase's hook methods."""
        slots = self._slots[phase]
        if isinstance(exc, HookTimeoutError) and exc.hook is not None:
            return next((slot for slot in slots if slot.hook is exc.hook), None)
        tb = exc.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            matches = [slot for slot in slots if _code_of(slot.hook, phase) is frame.f_code]
            if len(matches) == 1:
                return matches[0]
            if matches:
                owner = frame.f_locals.get("self")
                chosen = next((slot for slot in matches if slot.hook is owner), None)
                if chosen is not None:
                    return chosen
            tb = tb.tb_next
        return None

    # -- the record --------------------------------------------------------------------------

    def snapshot(self) -> SessionStatistics:
        """The frozen record of everything so far."""
        self.fold()
        failed = sum(self.failures.values())
        reached_after = self.steps - self.failures["before_run"] - self.failures["run"]
        hooks: list[HookStatistics] = []
        for phase, slots in self._slots.items():
            for slot in slots:
                calls = slot.calls
                if phase == "before_run":
                    calls = self.steps
                elif phase == "after_run":
                    calls = reached_after
                hooks.append(HookStatistics(slot.index, slot.name, phase, calls, slot.errors, slot.hist.latency()))
        hooks.sort(key=lambda h: h.index)
        return SessionStatistics(
            steps=self.steps - failed,
            failed_steps=failed,
            sessions_created=self.sessions_created,
            recoveries=self.recoveries,
            recovery_seconds=self.recovery_seconds,
            retry_wait_seconds=self.retry_wait_seconds,
            step_retries=self.step_retries,
            sampled_steps=self.sampled,
            step=self.step_hist.latency(),
            run=self.run_hist.latency(),
            hooks=tuple(hooks),
            mean_in_flight=self.busy_share(),
        )

    # -- timed plans -------------------------------------------------------------------------

    def _timed_plan(self, plan: PhasePlan, slots: Sequence[_Slot], *, exact: bool) -> PhasePlan:
        calls = [call.wrapped(self._wrap(call, slot, exact)) for call, slot in zip(plan.calls, slots, strict=True)]
        return PhasePlan(plan.phase, calls)

    def _wrap(self, call: Call, slot: _Slot, exact: bool) -> Callable[..., Any]:
        """``call.fn`` timed into ``slot``: plain stays plain, async stays async. ``exact``
        (lifecycle phases): counted and folded in at once; else recorded for the step's end."""
        fn, clock, records = call.fn, self._clock, self.records
        if exact:
            return _exact_async(fn, slot, clock) if call.is_async else _exact_plain(fn, slot, clock)
        if call.is_async:
            async def timed_async(*args: Any) -> Any:
                started = clock()
                try:
                    return await fn(*args)
                finally:
                    records.append((slot, clock() - started))

            return timed_async

        def timed_plain(*args: Any) -> Any:
            started = clock()
            try:
                return fn(*args)
            finally:
                records.append((slot, clock() - started))

        return timed_plain


def _exact_async(fn: Callable[..., Any], slot: _Slot, clock: Callable[[], float]) -> Callable[..., Any]:
    async def timed(*args: Any) -> Any:
        with _Exact(slot, clock):
            return await fn(*args)

    return timed


def _exact_plain(fn: Callable[..., Any], slot: _Slot, clock: Callable[[], float]) -> Callable[..., Any]:
    def timed(*args: Any) -> Any:
        with _Exact(slot, clock):
            return fn(*args)

    return timed


class _Exact:
    """One lifecycle call, timed into its slot on the spot: counted, an error noted, its
    duration folded in (the calls are rare: no batching)."""

    __slots__ = ("clock", "slot", "started")

    def __init__(self, slot: _Slot, clock: Callable[[], float]) -> None:
        self.slot, self.clock = slot, clock

    def __enter__(self) -> None:
        self.started = self.clock()

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        slot = self.slot
        slot.calls += 1
        slot.errors += kind is not None
        slot.hist.add(self.clock() - self.started)


def _code_of(hook: object, phase: str) -> object:
    method = getattr(hook, phase, None)
    func = getattr(method, "__func__", method)
    code = getattr(func, "__code__", None)
    if code is None:
        code = getattr(getattr(type(func), "__call__", None), "__code__", None)  # noqa: B004 - callable objects
    return code
