"""``drive``: put hooks through a scripted life in a real monitored session, and record it.

The life is a script of steps (the values each session run answers with),
faults at given steps and creations, an optional clock moved between steps
and an optional cancellation from outside. The hooks run in a real
``MonitoredSession`` (or ``SingularMonitoredSession``): what the record shows
is what the runtime did, not a model of it.

With ``max_in_flight=N > 1`` the session runs up to N steps at once (``iterate``,
one lane per raw session), and each step is told its script step at admission
(``_StepOf``, a hook of the drive's own after the driven ones, feeds it under a
private key the runs take out again): script step ``k`` is the step admitted with
global step ``k`` past the first one, so a step re-run after its lane's recovery is
answered with its own values, whichever run ends first. ``lags`` makes runs end out
of order: the run of script step ``k`` lets every other task run ``lags[k]`` times
before it answers.

Invariants: the script advances only on a run that returned, so a step that
failed is answered again, with the same values, by the re-created session; the
drive is bounded in real time; when it returns, every scripted session was
closed exactly once and no hook call is still running.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from .._errors import SessionClosedError
from .._global_step import StepCounter
from .._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
)
from .._session._monitored import MonitoredSession, SingularMonitoredSession
from .._session._retry import RetryPolicy
from .._timer import Clock
from ._clock import MockClock
from ._drive_args import (
    StepScript,
    check_limits,
    check_max_in_flight,
    check_tick,
    faults_of,
    hooks_of,
    lags_of,
    script_of,
    sequence_of,
)
from ._faults import HANG, Fault, resolve_fault
from ._faults import cancel_after as _cancel_after
from ._record import Record, SessionRun, as_mapping
from ._tape import Tape

__all__ = ["Drive", "StepScript", "drive"]


#: The type of the ``drive`` fixture: :func:`drive` with its ``clock`` already given.
Drive = Callable[..., Awaitable["Record"]]

#: Recovery without waiting: a scripted life has no backend to give time to.
NO_WAIT = RetryPolicy(initial_delay=0.0, jitter=False)


async def drive(
    hooks: object,
    steps: int | Sequence[StepScript] = 1,
    *,
    values: Mapping[Any, Any] | None = None,
    errors: Mapping[int, Fault | Sequence[Fault]] | None = None,
    creation_errors: Sequence[Fault] = (),
    fetches: object = None,
    feed_dict: Mapping[Any, Any] | None = None,
    options: RunOptions | None = None,
    clock: Clock | None = None,
    tick: float = 0.0,
    raises: type[BaseException] | tuple[type[BaseException], ...] | None = None,
    cancel_after: int | None = None,
    singular: bool = False,
    retry: RetryPolicy | None = None,
    step_counter: StepCounter | None = None,
    hook_timeout: float | None = None,
    stop_grace_period: float = 1.0,
    timeout: float = 30.0,  # noqa: ASYNC109 - a bound in real time on the whole drive
    max_in_flight: int = 1,
    lags: Mapping[int, int] | Sequence[int] | None = None,
) -> Record:
    """Run ``hooks`` (one hook or a sequence) through ``steps`` and return the :class:`Record`.

    ``steps`` is a number of steps or a list of step scripts: a mapping of fetch key
    to value, or a callable ``(step, feed_dict) -> mapping``. A fetch missing there is
    answered from ``values`` (a value, or a callable ``(step, feed_dict)``); anything else,
    a fed key included, is a ``KeyError``, as from a ``StepSession``. The session is run
    until a hook requests stop or the script ends.

    Faults: ``errors`` maps a script step to a fault (or a list: one per attempt)
    raised by the session instead of answering; a step equal to the script's length
    is attempted too (``{len(steps): "oor"}`` ends the input). ``creation_errors``
    are raised by the first creations. ``cancel_after=N`` cancels the whole life from
    outside after N schedule points. ``raises`` is the exception expected to escape
    (it is then in ``record.error``; its absence is an ``AssertionError``); any other
    escapes.

    ``clock`` is read for each call's time; ``tick`` moves it (a ``MockClock``) that many
    seconds after every step: every task is first let run until it waits, then time
    passes, stopping at each deadline on the way to let the woken tasks run (so a
    background task that never waits, like a back-to-back ``coord.loop``, cannot be
    ticked). ``fetches``, ``feed_dict`` and ``options`` are the caller's arguments to
    each ``run``. Recovery does not wait (``retry``). ``timeout`` bounds the drive in
    real seconds.

    ``max_in_flight=N > 1`` runs up to N steps at once (``session.iterate``, one step per
    script step, fed ``feed_dict``; ``options`` cannot be given then), so ``before_run``
    of later steps may come between a step's ``before_run`` and its ``after_run``: what a
    hook declaring ``overlapping_steps = True`` must be right under. Each step is still
    answered from its own script step, a re-run after its lane's recovery too. ``lags``
    (a list by script step, or a mapping of script step to count) makes the run of a
    script step let every other task run that many times before it answers, so runs
    end out of order: ``lags=[3, 0, 0, 0]`` ends the runs of steps 1 to 3 before step
    0's. ``record.results`` are in step order.

    Args:
        hooks: The hook under test, or a list of hooks.
        steps: A number of steps, or one script per step: a mapping fetch key → value, or a
            callable ``(step, feed_dict)`` returning one.
        values: Answers for fetches a step's script lacks: key → value, or → callable
            ``(step, feed_dict)``.
        errors: Script step → a fault raised instead of answering (a list: one per attempt).
        creation_errors: Faults raised by the first session creations, in order.
        fetches: The caller's fetches of each ``run``.
        feed_dict: The caller's feeds of each ``run``.
        options: The caller's ``RunOptions`` of each ``run``.
        clock: The clock calls are timed with (a ``MockClock`` to move with ``tick``).
            ``None``: ``anyio.current_time``.
        tick: Seconds the clock moves after every step.
        raises: The exception type(s) expected to escape, then in ``record.error``.
        cancel_after: Cancel the whole life from outside after this many schedule points.
        singular: Use a ``SingularMonitoredSession`` (no recovery).
        retry: The ``RetryPolicy`` of recovery. ``None``: retry at once, for ever.
        step_counter: The global step counter. ``None``: a new ``LocalStepCounter``.
        hook_timeout: Seconds an async hook call may take. ``None``: no limit.
        stop_grace_period: The coordinator's grace period, in seconds.
        timeout: Real seconds the whole drive may take before a ``TimeoutError``.
        max_in_flight: How many steps may run at once (then driven with ``iterate``).
        lags: Per script step (a list, or a mapping step → count), how many times the run
            lets every other task run before it answers, so runs end out of order.

    Returns:
        The ``Record`` of every hook call and session run.
    """
    hook_list = hooks_of(hooks)
    lanes = check_max_in_flight(max_in_flight, options)
    tick = check_tick(tick, clock)
    if singular and retry is not None:
        raise ValueError("drive(singular=True) never recovers, so retry=... would be ignored; drop one")
    check_limits(cancel_after, timeout)
    record = Record(hook_list, lanes=lanes)
    life = _Life(record, steps, values, errors, creation_errors, lags)
    tape = Tape(record, clock or anyio.current_time, life.current_session)
    session_type = SingularMonitoredSession if singular else MonitoredSession
    extra: dict[str, Any] = {} if singular else {"retry": retry or NO_WAIT}
    session_hooks = hook_list if lanes == 1 else [*hook_list, _StepOf()]
    if lanes > 1:
        extra["max_in_flight"] = lanes
    escaped: list[BaseException] = []

    async def live() -> None:
        try:
            async with session_type(
                life,
                session_hooks,
                stop_grace_period=stop_grace_period,
                step_counter=step_counter,
                hook_timeout=hook_timeout,
                **extra,
            ) as session:
                if lanes > 1:
                    async for result in session.iterate(fetches, life.feeds(feed_dict)):
                        record.results.append(result)
                        if tick:
                            await _move(clock, tick)
                while lanes == 1 and not session.should_stop() and life.wants_run():
                    record.results.append(await session.run(fetches, feed_dict, options))
                    if tick:
                        await _move(clock, tick)
        except Exception as exc:
            escaped.append(exc)

    with tape.patched(), anyio.move_on_after(timeout) as bound:
        if cancel_after is None:
            await live()
        else:
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as scope:
                    tg.start_soon(_cancel_after, scope, cancel_after)
                    await live()
                record.cancelled = scope.cancelled_caught
                tg.cancel_scope.cancel()
    if bound.cancelled_caught:
        raise TimeoutError(_timed_out(timeout, record))
    _settle(record, escaped, raises)
    _check_invariants(record, tape)
    return record


class _Life:
    """The session creator of a drive, and the script its sessions share."""

    def __init__(
        self,
        record: Record,
        steps: int | Sequence[StepScript],
        values: Mapping[Any, Any] | None,
        errors: Mapping[int, Fault | Sequence[Fault]] | None,
        creation_errors: Sequence[Fault],
        lags: Mapping[int, int] | Sequence[int] | None = None,
    ) -> None:
        self.record = record
        self.script = script_of(steps)
        self.lags = lags_of(lags, len(self.script))
        self.values = as_mapping(values, "drive(values=...)")
        self.faults = faults_of(errors)
        late = [step for step in self.faults if step > len(self.script)]
        if late:
            raise ValueError(
                f"drive(errors=...) has a fault at step {min(late)}, past the script's end: "
                f"with {len(self.script)} steps the last that can fail is step {len(self.script)} "
                "(the run after the script, e.g. 'oor' for the end of input)"
            )
        self.creation_faults = [
            resolve_fault(fault, f"creation {n}") for n, fault in enumerate(sequence_of(creation_errors, "creation_errors"))
        ]
        self.index = 0  # the next script step: advanced by each run that returns

    def current_session(self, session: object = None) -> int:
        """The number of ``session`` if it is one of this life's (a step's lane's), else of
        the session created last."""
        if isinstance(session, _ScriptedRunSession) and session.life is self:
            return session.number
        return self.record.sessions - 1

    def wants_run(self) -> bool:
        return self.index < len(self.script) or bool(self.faults.get(self.index))

    def feeds(self, feed_dict: Mapping[Any, Any] | None) -> list[dict[Any, Any] | None]:
        """One feed per step to run with steps in flight (a copy each: a step's feed is its
        own), the step after the script's end too when a fault waits there."""
        count = len(self.script) + bool(self.faults.get(len(self.script)))
        return [None if feed_dict is None else dict(feed_dict) for _ in range(count)]

    async def create_session(self) -> _ScriptedRunSession:
        attempt = self.record.creation_attempts
        self.record.creation_attempts += 1
        await anyio.lowlevel.checkpoint()
        if attempt < len(self.creation_faults):
            await _apply(self.creation_faults[attempt])
        self.record.sessions += 1
        return _ScriptedRunSession(self, self.record.sessions - 1)

    def answer(self, index: int, fetches: Sequence[Hashable], feeds: Mapping[Any, Any]) -> list[Any]:
        step: Any = self.script[index] if index < len(self.script) else {}
        if callable(step):
            step = step(index, feeds)
        produced = as_mapping(step, f"drive(): the script of step {index}")
        return [self._value(key, index, feeds, produced) for key in fetches]

    def _value(self, key: Hashable, index: int, feeds: Mapping[Any, Any], produced: Mapping[Hashable, Any]) -> Any:
        if key in produced:
            return produced[key]
        if key in self.values:
            value = self.values[key]
            return value(index, feeds) if callable(value) else value
        known = sorted(map(repr, {*produced, *self.values}))
        fed = (
            f"; {key!r} is fed, but a fed key is not fetched back (a StepSession answers "
            "only from what its step returns)"
            if key in feeds else ""
        )
        raise KeyError(
            f"drive(): step {index} has no value for fetch {key!r}{fed}; give it in steps=[...] "
            f"or values={{...}} (known: {', '.join(known) or 'nothing'})"
        )


class _ScriptedRunSession:
    """One session of a drive: answers from the shared script, fails on cue."""

    def __init__(self, life: _Life, number: int) -> None:
        self.life = life
        self.number = number
        self.closed = 0

    def __repr__(self) -> str:
        return f"<scripted session {self.number} closed={self.closed}>"

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        if self.closed:
            raise SessionClosedError(f"{self!r} used after close")
        life = self.life
        feeds = dict(feed_dict)
        index = feeds.pop(_STEP_KEY, life.index)
        run = SessionRun(self.number, index, list(fetches), feeds, options)
        life.record.runs.append(run)
        try:
            await anyio.lowlevel.checkpoint()
            for _ in range(life.lags.get(index, 0)):
                await anyio.lowlevel.checkpoint()
            pending = life.faults.get(run.index)
            if pending:
                fault = pending.pop(0)
                run.outcome = "hang" if fault == HANG else "raised"
                await _apply(fault)
            run.values = life.answer(run.index, fetches, feeds)
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            run.outcome, run.error = ("cancelled", None) if cancelled else ("raised", exc)
            raise
        run.outcome = "returned"
        life.index += 1
        return run.values

    async def aclose(self) -> None:
        self.closed += 1
        self.life.record.closed += 1


class _StepKey:
    """The key under which ``_StepOf`` feeds a step its script step (no hook can feed it)."""

    def __repr__(self) -> str:
        return "<drive's script step>"


_STEP_KEY = _StepKey()


class _StepOf(SessionRunHook):
    """The drive's own last hook with steps in flight: feeds each step its script step, the
    global step it was admitted with past the first one's (a re-run keeps its number)."""

    overlapping_steps = True

    def __init__(self) -> None:
        self.first: int | None = None

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        if self.first is None:
            self.first = run_context.global_step
        return SessionRunArgs(feed_dict={_STEP_KEY: run_context.global_step - self.first})


async def _apply(fault: BaseException | str) -> None:
    if fault == HANG:
        await anyio.sleep_forever()
    assert isinstance(fault, BaseException)
    raise fault


async def _move(clock: Clock | None, seconds: float) -> None:
    """Let every task reach its wait, then let ``seconds`` pass on the clock: a ``MockClock``
    stops at each deadline on the way; another clock jumps, then the woken run."""
    await anyio.wait_all_tasks_blocked()
    if isinstance(clock, MockClock):
        await clock.advance(seconds)
    else:
        clock.jump(seconds)  # type: ignore[union-attr]  # checked by _check_tick
        await anyio.wait_all_tasks_blocked()


















def _settle(
    record: Record,
    escaped: list[BaseException],
    raises: type[BaseException] | tuple[type[BaseException], ...] | None,
) -> None:
    """Keep the expected escaped exception in the record; raise anything else."""
    error = escaped[0] if escaped else None
    if error is not None and raises is not None and isinstance(error, raises):
        record.error = error
    elif error is not None:
        raise error
    elif raises is not None and not record.cancelled:
        raise AssertionError(f"drive(raises={raises!r}): the session ended without raising it ({record!r})")


def _check_invariants(record: Record, tape: Tape) -> None:
    if tape.active:
        running = [f"{call.name}.{call.phase}" for call in record.calls if call.outcome == "running"]
        raise AssertionError(f"hook calls still running after the session closed: {', '.join(running)}")
    if record.closed != record.sessions:
        raise AssertionError(
            f"{record.sessions} sessions were created but {record.closed} closes happened "
            "(each must be closed exactly once)"
        )


def _timed_out(timeout: float, record: Record) -> str:
    stuck = ("running", "hang", "cancelled")  # cancelled: by the timeout, while still running
    calls = [f"{call.name}.{call.phase}" for call in record.calls if call.outcome in stuck]
    runs = [f"the session run of step {run.index}" for run in record.runs if run.outcome in stuck]
    return (
        f"drive() did not finish within timeout={timeout}s of real time; still running then: "
        f"{', '.join(calls + runs) or 'a session creation or the teardown'}"
    )
