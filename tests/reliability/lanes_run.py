"""Run a lane scenario (``lanes_plan.py``) on the real runtime and record what happened.

Every raw run waits on a gate. The driver task waits until every task is blocked,
then opens one waiting gate (chosen by the scenario), or cancels the block at the
scenario's point: the order in which the raw runs complete is the scenario's, so
the hook calls, the results and the outcome depend on the scenario and on the
runtime's decisions only. Everything is logged in one list, in the order it
happened: hook calls (start and end, with the step's item, session and numbers),
raw runs (start, end, cancellation), sessions created and closed, the caller's
results, and markers (entered, cancel, leaving).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import sniffio

from hookrun import MonitoredSession, OutOfRangeError, RetryPolicy, SessionRunArgs, SessionRunHook
from hookrun.hooks import StopAtStepHook

from .lanes_plan import CALLER_FETCH, HOOK_FETCH, LaneHook, LaneScenario
from .model import describe, make_error
from .strategies import CHECKPOINT

__all__ = ["Ev", "LaneObserved", "run_lanes"]

#: Tasks the runtime parks (pooled hook workers); not counted as tasks left behind.
WORKER_TASK = "hookrun hook worker"


@dataclass
class Ev:
    """One thing that happened. ``kind``: start/done/raised/cancelled/stop/foreign (hook
    calls), run/ran/run-raised/run-cancelled (raw runs), created/create-failed/closed,
    yielded, call (a ``run()`` caller calls it), entered, cancel, leaving."""

    kind: str
    who: str = ""
    phase: str = ""
    number: int = -1
    item: int = -1
    session: str = ""
    step: int = -1
    token: object = None
    value: Any = None


@dataclass
class LaneObserved:
    log: list[Ev]
    yielded: list[Any]
    task_outcomes: dict[int, tuple[Any, ...]]
    exit: tuple[Any, ...] | str | None
    counter: int
    sessions: list[LaneSession]
    baseline_tasks: int
    tasks_after_exit: int
    stuck: bool = False
    releases: int = 0


class LaneSession:
    def __init__(self, name: str, world: World) -> None:
        self.name = name
        self.world = world
        self.closed = 0

    async def run(self, fetches: Any, feed_dict: Mapping[Any, Any], options: Any, run_metadata: Any) -> list[Any]:
        world = self.world
        item = int(feed_dict["item"])
        attempt = world.attempts.get(item, 0)
        world.attempts[item] = attempt + 1
        world.log.append(Ev("run", session=self.name, item=item, number=attempt))
        gate = anyio.Event()
        entry = (item, attempt, gate)
        world.pending.append(entry)
        try:
            await gate.wait()
        except anyio.get_cancelled_exc_class():
            world.pending.remove(entry)
            world.log.append(Ev("run-cancelled", session=self.name, item=item, number=attempt))
            raise
        effect = world.sc.run_effects.get((item, attempt))
        if effect is not None:
            world.log.append(Ev("run-raised", session=self.name, item=item, number=attempt, value=effect))
            raise make_error(effect, f"run{item}.{attempt}")
        world.log.append(Ev("ran", session=self.name, item=item, number=attempt))
        return [f"{key}@{item}" for key in fetches]

    async def aclose(self) -> None:
        self.closed += 1
        self.world.log.append(Ev("closed", session=self.name))


class LaneCreator:
    def __init__(self, world: World) -> None:
        self.world = world
        self.attempts = 0
        self.sessions: list[LaneSession] = []

    async def create_session(self) -> LaneSession:
        number = self.attempts
        self.attempts += 1
        await anyio.lowlevel.checkpoint()
        effect = self.world.sc.creator_errors.get(number)
        if effect is not None:
            self.world.log.append(Ev("create-failed", number=number, value=effect))
            raise make_error(effect, f"create#{number}")
        session = LaneSession(f"s{len(self.sessions)}", self.world)
        self.sessions.append(session)
        self.world.log.append(Ev("created", session=session.name, number=number))
        return session


@dataclass
class World:
    sc: LaneScenario
    log: list[Ev] = field(default_factory=list)
    attempts: dict[int, int] = field(default_factory=dict)
    pending: list[tuple[int, int, anyio.Event]] = field(default_factory=list)


# -- hooks --------------------------------------------------------------------------------


class _LaneHook(SessionRunHook):
    overlapping_steps = True

    def __init__(self, plan: LaneHook, log: list[Ev]) -> None:
        self.name = plan.name
        self.plan = plan
        self.log = log
        self.counts: dict[str, int] = {}
        self.tasks: dict[tuple[str, int], int] = {}

    def _start(self, phase: str, args: tuple[Any, ...]) -> int:
        number = self.counts.get(phase, 0)
        self.counts[phase] = number + 1
        event = Ev("start", self.name, phase, number)
        if phase in ("before_run", "after_run"):
            ctx = args[0]
            event.item = int(ctx.original_args.feed_dict["item"])
            event.session = ctx.session.name
            event.token = ctx
            event.step = ctx.global_step if phase == "before_run" else args[1].global_step
            if phase == "after_run":
                event.value = args[1].results
        elif phase == "after_create_session":
            event.session = args[0].name
            event.token = args[1]
        self.log.append(event)
        self.tasks[(phase, number)] = anyio.get_current_task().id
        return number

    def _ended(self, phase: str, number: int) -> None:
        if self.tasks.pop((phase, number)) != anyio.get_current_task().id:
            self.log.append(Ev("foreign", self.name, phase, number))

    def _finish(self, phase: str, number: int, args: tuple[Any, ...]) -> Any:
        self._ended(phase, number)
        effect = self.plan.action(phase, number).effect
        if effect in ("error", "aborted", "oor"):
            self.log.append(Ev("raised", self.name, phase, number, value=effect))
            raise make_error(effect, f"{self.name}.{phase}#{number}")
        if effect == "stop":
            args[0].request_stop()
            self.log.append(Ev("stop", self.name, phase, number))
        self.log.append(Ev("done", self.name, phase, number))
        if phase == "before_run" and self.plan.fetch:
            return SessionRunArgs(HOOK_FETCH)
        return None

    def _sync(self, phase: str, args: tuple[Any, ...]) -> Any:
        return self._finish(phase, self._start(phase, args), args)

    async def _async(self, phase: str, args: tuple[Any, ...]) -> Any:
        number = self._start(phase, args)
        try:
            if self.plan.action(phase, number).delay == CHECKPOINT:
                await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            self._ended(phase, number)
            self.log.append(Ev("cancelled", self.name, phase, number))
            raise
        return self._finish(phase, number, args)


_CLASSES: dict[tuple[tuple[str, str], ...], type[_LaneHook]] = {}


def _hook_class(kinds: Mapping[str, str]) -> type[_LaneHook]:
    key = tuple(sorted(kinds.items()))
    cls = _CLASSES.get(key)
    if cls is None:
        namespace = {phase: _method(phase, kind) for phase, kind in kinds.items()}
        cls = type("LaneHook_" + "_".join(f"{p[:3]}{k[0]}" for p, k in key), (_LaneHook,), namespace)
        _CLASSES[key] = cls
    return cls


def _method(phase: str, kind: str) -> Any:
    if kind == "sync":

        def method(self: _LaneHook, *args: Any) -> Any:
            return self._sync(phase, args)

        return method

    async def amethod(self: _LaneHook, *args: Any) -> Any:
        return await self._async(phase, args)

    return amethod


# -- the driver ---------------------------------------------------------------------------


async def settle() -> None:
    """Return once every other task is blocked. anyio's ``wait_all_tasks_blocked`` sleeps
    0.1 s on asyncio each time a task is still runnable, and does not see a cancellation
    that a callback has yet to deliver; this polls every loop iteration and also waits for
    the loop's ready callbacks (asyncio internals: ``Task._fut_waiter``, ``loop._ready``)."""
    if sniffio.current_async_library() != "asyncio":
        await anyio.wait_all_tasks_blocked()
        return
    this = asyncio.current_task()
    loop = asyncio.get_running_loop()
    quiet = 0
    while quiet < 3:  # a cancellation is delivered by a callback, not a task: let them run
        await asyncio.sleep(0)
        blocked = all(task is this or _blocked(task) for task in asyncio.all_tasks())
        quiet = quiet + 1 if blocked and not getattr(loop, "_ready", ()) else 0


def _blocked(task: asyncio.Task[Any]) -> bool:
    waiter = getattr(task, "_fut_waiter", None)
    return waiter is not None and not waiter.done()


async def _drive(
    world: World, block: anyio.CancelScope, work: anyio.CancelScope, finished: anyio.Event, out: dict[str, Any]
) -> None:
    """Open one waiting gate each time every task is blocked, in the scenario's order."""
    releases = 0
    idle = 0
    while not finished.is_set():
        await settle()
        if finished.is_set():
            break
        if not world.pending:
            idle += 1
            if idle > 200:  # everything blocked, no raw run waiting, the block not done
                out["stuck"] = True
                block.cancel()
                return
            await anyio.sleep(0.001)
            continue
        idle = 0
        target = work if world.sc.cancel_work else block
        if world.sc.cancel_at == releases and not target.cancel_called:
            world.log.append(Ev("cancel"))
            target.cancel()
            continue
        waiting = sorted(world.pending, key=lambda entry: entry[:2])
        item, attempt, gate = waiting[world.sc.release_choice(releases) % len(waiting)]
        world.pending.remove((item, attempt, gate))
        releases += 1
        gate.set()
    out["releases"] = releases


async def _body(sess: MonitoredSession, world: World, yielded: list[Any], outcomes: dict[int, tuple[Any, ...]]) -> None:
    sc = world.sc
    feeds = [{"item": i} for i in range(sc.items)]
    if sc.mode == "tasks":

        async def one(item: int) -> None:
            world.log.append(Ev("call", item=item))  # no checkpoint before run(): its arrival
            try:
                value = await sess.run(CALLER_FETCH, feeds[item])
            except Exception as exc:
                outcomes[item] = describe(exc)
            else:
                outcomes[item] = ("ok", value)

        async with anyio.create_task_group() as tg:
            for item in range(sc.items):
                tg.start_soon(one, item)
        return
    # ``ordered`` is passed only when unordered, so N = 1 scenarios run on any runtime.
    options: dict[str, Any] = {"ordered": False} if sc.mode == "unordered" else {}
    steps = sess.iterate(CALLER_FETCH, feeds, **options)
    async for value in steps:
        world.log.append(Ev("yielded", value=value))
        yielded.append(value)


async def run_lanes(sc: LaneScenario) -> LaneObserved:
    world = World(sc)
    creator = LaneCreator(world)
    hooks: list[Any] = [_hook_class(plan.kinds)(plan, world.log) for plan in sc.hooks]
    if sc.last_step is not None:
        stop = StopAtStepHook(num_steps=sc.last_step) if sc.num_steps else StopAtStepHook(last_step=sc.last_step)
        hooks.append(stop)
    lanes: dict[str, Any] = {} if sc.lanes == 1 else {"max_in_flight": sc.lanes}
    retry = RetryPolicy(max_attempts=sc.max_attempts, initial_delay=0, jitter=False)
    sess = MonitoredSession(creator, hooks, retry=retry, stop_grace_period=1, **lanes)
    yielded: list[Any] = []
    outcomes: dict[int, tuple[Any, ...]] = {}
    out: dict[str, Any] = {"stuck": False, "releases": 0}
    baseline = len(anyio.get_running_tasks())
    exit_: tuple[Any, ...] | str | None = None
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            block = anyio.CancelScope()
            finished = anyio.Event()
            work = anyio.CancelScope()
            tg.start_soon(_drive, world, block, work, finished, out)
            try:
                with block:
                    async with sess:
                        world.log.append(Ev("entered"))
                        try:
                            with work:
                                await _body(sess, world, yielded, outcomes)
                        finally:
                            world.log.append(Ev("leaving"))
                        if sc.exit == "oor":
                            raise OutOfRangeError("body")
                        if sc.exit == "error":
                            raise ValueError("body")
            except Exception as exc:
                exit_ = describe(exc)
            else:
                exit_ = "cancelled" if block.cancelled_caught else None
            finally:
                finished.set()
    tasks_after = len(anyio.get_running_tasks())
    counter = getattr(sess.step_counter, "value", -1)
    return LaneObserved(
        world.log, yielded, outcomes, exit_, int(counter), creator.sessions, baseline, tasks_after,
        stuck=out["stuck"], releases=out["releases"],
    )
