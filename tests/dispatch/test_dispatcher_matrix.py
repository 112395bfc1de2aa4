"""The dispatcher driven directly, the way pluggy tests its ``_multicall``: every phase
(and so every argument count) x every kind of hook call x every position in the list x
the dispatcher's state (its first runs, or after many quiet runs).

Each case runs a phase of three hooks: the hook under test at one position, an async
hook that returns at once and a plain function at the others. The hooks under test do
their kind of thing only once armed, so a warm dispatcher has run the same phase many
times before with every hook quiet.
"""

from __future__ import annotations

import contextvars
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import HookTimeoutError
from hookrun._dispatch._dispatcher import Dispatcher
from hookrun._hook_protocol import HOOK_METHODS

pytestmark = pytest.mark.anyio

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("matrix_var", default="unset")
ARITY = {"begin": 0, "after_create_session": 2, "before_run": 1, "after_run": 2, "end": 1, "on_exception": 2}
KINDS = ("plain", "returns", "sets_var", "suspends", "fails_before", "fails_after", "hangs")
FAILING = {"fails_before", "fails_after", "hangs"}
WARM_RUNS = 40
TIMEOUT = 0.05


class Boom(ValueError):
    """The error a failing hook raises."""


def make_hook(phase: str, kind: str, log: list[tuple[str, Any]]) -> object:
    """A hook whose ``phase`` method behaves as ``kind`` once ``hook.armed`` is set."""

    class Hook:
        armed = False
        name = f"{kind}_hook"

    async def async_method(*args: Any) -> Any:
        assert len(args) == ARITY[phase]
        seen = VAR.get()
        if not Hook.armed:
            return "quiet"
        log.append(("var", seen))
        if kind == "returns":
            return kind
        if kind == "sets_var":
            VAR.set("set by a hook")
            return kind
        if kind == "fails_before":
            raise Boom(kind)
        task = anyio.get_current_task().id
        with anyio.CancelScope():  # a scope of its own, opened before it suspends
            if kind == "hangs":
                await anyio.sleep_forever()
            await anyio.lowlevel.checkpoint()
        log.append(("same task", anyio.get_current_task().id == task))
        if kind == "fails_after":
            raise Boom(kind)
        return kind

    def plain_method(*args: Any) -> Any:
        assert len(args) == ARITY[phase]
        if Hook.armed:
            log.append(("var", VAR.get()))
        return "plain" if Hook.armed else "quiet"

    hook = Hook()
    setattr(hook, phase, plain_method if kind == "plain" else async_method)
    return hook


class Quick:
    """An async hook that returns at once, and records the context it saw."""

    def __init__(self, phase: str, log: list[tuple[str, Any]]) -> None:
        async def method(*args: Any) -> str:
            log.append(("var", VAR.get()))
            return "quick"

        setattr(self, phase, method)


class Plain:
    """A plain-function hook."""

    def __init__(self, phase: str) -> None:
        setattr(self, phase, lambda *args: "plainfiller")


async def run_phase(dispatcher: Dispatcher, phase: str) -> list[Any]:
    """Run ``phase`` the way the session does: under a cancel scope the caller entered."""
    plan = dispatcher.plans[phase]
    args = [tuple(f"arg{i}" for i in range(ARITY[phase]))] * len(plan.calls)
    if phase in ("before_run", "after_run"):
        with dispatcher.new_scope() as scope:
            started = dispatcher.start(plan, args, scope)
            return started if isinstance(started, list) else await started
        raise AssertionError("the step's scope swallowed the outcome")
    return await dispatcher.run(plan, args)


def hooks_for(phase: str, kind: str, position: int, log: list[tuple[str, Any]]) -> tuple[list[object], Any]:
    fillers: list[object] = [Quick(phase, log), Plain(phase)]
    target = make_hook(phase, kind, log)
    hooks = [*fillers[:position], target, *fillers[position:]]
    return hooks, target


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("phase", HOOK_METHODS)
async def test_phase_kind_position_state(phase: str, kind: str, position: int, warm: bool) -> None:
    """One hook of each kind, at each position, in each phase, cold and warm: results in
    list order, errors as themselves, timeouts named, contexts isolated, tasks kept."""
    log: list[tuple[str, Any]] = []
    async with anyio.create_task_group() as tg:
        hooks, target = hooks_for(phase, kind, position, log)
        dispatcher = Dispatcher(hooks, hook_timeout=TIMEOUT if kind == "hangs" else None, task_group=lambda: tg)
        VAR.set("caller")
        if warm:
            for _ in range(WARM_RUNS):
                assert (await run_phase(dispatcher, phase)).count("quiet") == 1
        log.clear()
        type(target).armed = True
        with anyio.fail_after(5):
            if kind in FAILING:
                expected: type[BaseException] = HookTimeoutError if kind == "hangs" else Boom
                with pytest.raises(expected) as info:
                    await run_phase(dispatcher, phase)
                if kind == "hangs":
                    assert isinstance(info.value, HookTimeoutError)
                    assert info.value.phase == phase and "hangs_hook" in str(info.value)
                else:
                    assert str(info.value) == kind
            else:
                results = await run_phase(dispatcher, phase)
                fillers = ["quick", "plainfiller"]
                assert results == [*fillers[:position], kind, *fillers[position:]]
        # every call started once (the quick filler and the target each log the context they saw)
        started = sum(what == "var" for what, _ in log)
        assert started == 2 or (kind in FAILING and started == 1 and position == 0), log
        assert VAR.get() == "caller"
        assert all(seen == "caller" for what, seen in log if what == "var"), log
        assert all(same for what, same in log if what == "same task"), log
        tg.cancel_scope.cancel()


def waiter(phase: str, events: dict[str, Any]) -> object:
    """Waits for ever (inside a cancel scope of its own) once armed; records its cancellation."""

    class Waiter:
        armed = False

    async def method(*args: Any) -> None:
        if not Waiter.armed:
            return
        try:
            with anyio.CancelScope():
                events["waiting"].set()
                await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            events["cancelled"] = True
            raise

    setattr(Waiter, phase, staticmethod(method))
    return Waiter()


def failer(phase: str, how: str, events: dict[str, Any]) -> object:
    """Fails once armed: at once, after the waiter is waiting, or as a plain function."""

    class Failer:
        armed = False

    if how == "plain":

        def plain(*args: Any) -> None:
            if Failer.armed:
                raise Boom(how)

        setattr(Failer, phase, staticmethod(plain))
        return Failer()

    async def method(*args: Any) -> None:
        if not Failer.armed:
            return
        if how == "after":
            await events["waiting"].wait()
        raise Boom(how)

    setattr(Failer, phase, staticmethod(method))
    return Failer()


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("order", ["waiter_first", "failer_first"])
@pytest.mark.parametrize("how", ["before", "after", "plain"])
@pytest.mark.parametrize("phase", HOOK_METHODS)
async def test_a_failing_hook_cancels_a_sibling_that_waits_for_the_first_time(
    phase: str, how: str, order: str, warm: bool
) -> None:
    """A hook that waits for the first time (in a scope of its own) is cancelled at once when
    a sibling fails, whatever the phase did before; the error reaches the caller at once."""
    events: dict[str, Any] = {"waiting": anyio.Event(), "cancelled": False}
    hooks = [waiter(phase, events), failer(phase, how, events), Plain(phase)]
    if order == "failer_first":
        hooks[:2] = hooks[1::-1]
    async with anyio.create_task_group() as tg:
        dispatcher = Dispatcher(hooks, task_group=lambda: tg)
        if warm:
            for _ in range(WARM_RUNS):
                await run_phase(dispatcher, phase)
        for hook in hooks[:2]:
            type(hook).armed = True  # type: ignore[attr-defined]
        with anyio.fail_after(5), pytest.raises(Boom, match=how):
            await run_phase(dispatcher, phase)
        waited = events["waiting"].is_set()
        assert events["cancelled"] == waited
        assert waited or (how in ("before", "plain") and order == "failer_first")
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
@pytest.mark.parametrize("phase", HOOK_METHODS)
async def test_outside_cancellation_cancels_every_waiting_hook(phase: str, warm: bool) -> None:
    """Cancelling the caller cancels the hook it drives and those on workers, and returns at once."""
    cancelled: list[int] = []
    started = anyio.Event()
    count = 0

    def make(i: int) -> object:
        class Hook:
            armed = False

        async def method(*args: Any) -> None:
            nonlocal count
            if not Hook.armed:
                return
            count += 1
            if count == 3:
                started.set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(i)
                raise

        setattr(Hook, phase, staticmethod(method))
        return Hook()

    hooks = [make(i) for i in range(3)]
    async with anyio.create_task_group() as tg:
        dispatcher = Dispatcher(hooks, task_group=lambda: tg)
        if warm:
            for _ in range(WARM_RUNS):
                await run_phase(dispatcher, phase)
        for hook in hooks:
            type(hook).armed = True  # type: ignore[attr-defined]
        with anyio.fail_after(5):
            with anyio.CancelScope() as outside:

                async def cancel_when_started() -> None:
                    await started.wait()
                    outside.cancel()

                tg.start_soon(cancel_when_started)
                await run_phase(dispatcher, phase)
            assert outside.cancelled_caught
        assert sorted(cancelled) == [0, 1, 2]
        tg.cancel_scope.cancel()


def test_every_phase_and_kind_is_covered() -> None:
    """The matrix names every phase and arity the runtime has."""
    assert set(ARITY) == set(HOOK_METHODS)
    assert {ARITY[p] for p in HOOK_METHODS} == {0, 1, 2}
    assert len(KINDS) == 7
