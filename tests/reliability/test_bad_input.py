"""Bad input: every misuse raises a clear error that names the culprit (issue 5)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    Coordinator,
    HookTimeoutError,
    MonitoredSession,
    RetryPolicy,
    RunMetadata,
    RunOptions,
    SessionClosedError,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SingularMonitoredSession,
    StepContext,
    StepSession,
)
from hookrun.testing import ScriptedCreator, ScriptedSession


class _Named(SessionRunHook):
    def __init__(self, name: str) -> None:
        self.name = name


class _Returns(_Named):
    """before_run returns whatever it is given."""

    def __init__(self, name: str, value: object) -> None:
        super().__init__(name)
        self.value = value

    async def before_run(self, run_context: SessionRunContext) -> Any:
        return self.value


class _CountingSession(ScriptedSession):
    """Returns ``answer`` (whatever it is) instead of one value per fetch."""

    def __init__(self, answer: object) -> None:
        super().__init__()
        self.answer = answer

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Hashable, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> Any:
        return self.answer


class _OneSession:
    def __init__(self, session: object) -> None:
        self.session = session

    async def create_session(self) -> object:
        return self.session


# -- hooks ---------------------------------------------------------------------------------


def test_non_hook_object_is_named() -> None:
    """An object with none of the hook methods is refused at construction, by position."""
    with pytest.raises(TypeError, match=r"hooks\[1\] = 42 \(int\) is not a hook"):
        MonitoredSession(ScriptedCreator(), [_Named("ok"), 42])


def test_hook_class_instead_of_instance_is_named() -> None:
    """Passing a hook class rather than an instance says to instantiate it."""
    with pytest.raises(TypeError, match=r"hooks\[0\] is the class _Named, not a hook object"):
        MonitoredSession(ScriptedCreator(), [_Named])


def test_single_hook_not_in_a_list() -> None:
    """A bare hook (not a list of hooks) is refused with a hint."""
    with pytest.raises(TypeError, match="wrap a single hook in a list"):
        MonitoredSession(ScriptedCreator(), _Returns("solo", None))  # type: ignore[arg-type]


def test_hook_attribute_not_callable_is_named() -> None:
    """A hook whose before_run is not callable is refused, naming hook and method."""

    class Broken:
        name = "broken"
        before_run = 3

    with pytest.raises(TypeError, match=r"hook broken: attribute 'before_run' is not callable"):
        MonitoredSession(ScriptedCreator(), [Broken()])


@pytest.mark.anyio
@pytest.mark.parametrize("value", [{"fetches": "x"}, ("x",), "x", 0])
async def test_before_run_wrong_type_names_hook(value: object) -> None:
    """before_run returning something else than None/SessionRunArgs names the hook."""
    hooks = [_Returns("fine", None), _Returns("wrong", value)]
    async with MonitoredSession(ScriptedCreator({"x": 1}), hooks) as sess:
        with anyio.fail_after(5), pytest.raises(
            TypeError, match=rf"hook wrong: before_run returned {type(value).__name__}; expected None"
        ):
            await sess.run("x")


@pytest.mark.anyio
async def test_plain_hook_returning_coroutine_names_hook() -> None:
    """A plain-def hook method that returns a coroutine is a TypeError naming the hook."""

    class Sneaky(_Named):
        def before_run(self, run_context: SessionRunContext) -> Any:
            return anyio.lowlevel.checkpoint()

    async with MonitoredSession(ScriptedCreator(), [Sneaky("sneaky")]) as sess:
        with anyio.fail_after(5), pytest.raises(
            TypeError, match=r"hook sneaky: before_run is a plain function but returned an awaitable"
        ):
            await sess.run()


@pytest.mark.anyio
async def test_hook_timeout_names_hook_phase_and_limit() -> None:
    """A hook exceeding hook_timeout raises HookTimeoutError naming hook, phase and limit."""

    class Slow(_Named):
        async def after_run(self, run_context: SessionRunContext, run_values: object) -> None:
            await anyio.sleep_forever()

    async with MonitoredSession(ScriptedCreator(), [Slow("slow")], hook_timeout=0.01) as sess:
        with anyio.fail_after(5), pytest.raises(
            HookTimeoutError, match=r"hook slow took longer than hook_timeout=0.01s in after_run"
        ):
            await sess.run()


# -- fetches, feeds, options, session answers ------------------------------------------------


@pytest.mark.anyio
async def test_unhashable_fetch_key_from_caller() -> None:
    """An unhashable fetch key of the caller names the caller and the key's type."""
    async with MonitoredSession(ScriptedCreator(), [_Returns("h", None)]) as sess:
        with anyio.fail_after(5), pytest.raises(
            TypeError, match=r"the caller fetches an unhashable key bytearray\(b.y.\) of type bytearray"
        ):
            await sess.run([bytearray(b"y")])


@pytest.mark.anyio
async def test_unhashable_fetch_key_from_hook() -> None:
    """An unhashable fetch key of a hook names the hook."""
    greedy = _Returns("greedy", SessionRunArgs({"a": [bytearray(b"x")]}))
    async with MonitoredSession(ScriptedCreator(), [greedy]) as sess:
        with anyio.fail_after(5), pytest.raises(
            TypeError, match=r"hook greedy fetches an unhashable key bytearray\(b'x'\)"
        ):
            await sess.run()


@pytest.mark.anyio
async def test_set_as_fetch_structure_is_named() -> None:
    """A set is not a fetch structure (it has no order to pack back into)."""
    async with SingularMonitoredSession(ScriptedCreator(), []) as sess:
        with anyio.fail_after(5), pytest.raises(TypeError, match="the caller fetches a set"):
            await sess.run({"a", "b"})


@pytest.mark.anyio
async def test_options_of_wrong_type_name_the_party() -> None:
    """Options that are not RunOptions name the party that passed them."""
    bad = _Returns("opt", SessionRunArgs(None, None, {"timeout": 1}))  # type: ignore[arg-type]
    async with MonitoredSession(ScriptedCreator(), [bad]) as sess:
        with anyio.fail_after(5), pytest.raises(
            TypeError, match=r"hook opt passed options of type dict; expected hookrun.RunOptions"
        ):
            await sess.run()
        with anyio.fail_after(5), pytest.raises(TypeError, match=r"the caller passed options of type dict"):
            await sess.run(options={"timeout": 1})  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize("hooked", [False, True])
@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ([1], r"_CountingSession.run returned 1 values for 2 fetches"),
        ([1, 2, 3], r"_CountingSession.run returned 3 values for 2 fetches"),
        ({"a": 1, "b": 2}, r"_CountingSession.run returned dict; expected a sequence of 2 values"),
        ("ab", r"_CountingSession.run returned str; expected a sequence of 2 values"),
        (None, r"_CountingSession.run returned NoneType"),
    ],
)
async def test_session_with_wrong_number_of_values_is_named(answer: object, match: str, hooked: bool) -> None:
    """A session returning the wrong number (or kind) of values names its type and both counts."""
    hooks = [_Returns("h", None)] if hooked else []
    async with SingularMonitoredSession(_OneSession(_CountingSession(answer)), hooks) as sess:
        with anyio.fail_after(5), pytest.raises(TypeError, match=match):
            await sess.run(["a", "b"])


# -- sync where async is required, and vice versa ----------------------------------------------


def test_creator_needing_arguments_is_refused() -> None:
    """A create_session or a factory that needs arguments is refused at construction, named."""

    class NeedsPath:
        def create_session(self, path: str) -> ScriptedSession:
            return ScriptedSession()

    with pytest.raises(TypeError, match=r"create_session .*NeedsPath.create_session needs arguments \(path\)"):
        MonitoredSession(NeedsPath(), [])  # type: ignore[arg-type]  # the mistake under test
    with pytest.raises(TypeError, match=r"session_creator is the class ScriptedCreator; pass an instance"):
        MonitoredSession(ScriptedCreator, [])


def test_creator_of_wrong_type_is_refused() -> None:
    """Something that is neither a creator nor a factory names its type."""
    with pytest.raises(TypeError, match=r"session_creator must be a function of no arguments.*got int 3"):
        MonitoredSession(3, [])  # type: ignore[arg-type]  # the mistake under test


@pytest.mark.anyio
async def test_creator_returning_non_session_is_named() -> None:
    """A creator returning something without async run() is a TypeError naming it."""
    with anyio.fail_after(5), pytest.raises(
        TypeError, match=r"the session creator returned 42 \(int\), which is not a session"
    ):
        async with MonitoredSession(_OneSession(42), []):
            pass


@pytest.mark.anyio
async def test_session_with_sync_run_is_refused() -> None:
    """A session whose run is a plain def is not a session."""

    class SyncRun:
        def run(self, *args: object) -> list[object]:
            return []

    with anyio.fail_after(5), pytest.raises(TypeError, match=r"\(SyncRun\), which is not a session"):
        async with MonitoredSession(_OneSession(SyncRun()), []):
            pass


@pytest.mark.anyio
async def test_sync_step_fn_for_run_step_fn_is_refused() -> None:
    """run_step_fn needs an async function."""

    def step_fn(step_context: StepContext) -> None:
        return None

    async with MonitoredSession(ScriptedCreator(), []) as sess:
        with pytest.raises(TypeError, match=r"run_step_fn needs an async function"):
            await sess.run_step_fn(step_fn)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_step_fn_with_wrong_arity_is_refused() -> None:
    """A step_fn with two required arguments is refused, naming them."""

    async def step_fn(a: StepContext, b: int) -> None:
        return None

    async with MonitoredSession(ScriptedCreator(), []) as sess:
        with pytest.raises(ValueError, match=r"Got \('a', 'b'\) instead"):
            await sess.run_step_fn(step_fn)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_step_session_sync_fn_returning_awaitable() -> None:
    """StepSession with a plain step_fn that returns a coroutine says to use 'async def'
    and closes the coroutine."""
    made: list[Any] = []

    def step_fn(feed_dict: object) -> Any:
        made.append(anyio.lowlevel.checkpoint())
        return made[-1]

    session = StepSession(step_fn)
    try:
        with anyio.fail_after(5), pytest.raises(
            TypeError, match=r"StepSession\('.*step_fn'\): step_fn is a plain function but returned an awaitable"
        ):
            await session.run([], {})
        assert made[0].cr_frame is None, "the coroutine was left unclosed"
    finally:
        for coro in made:
            coro.close()


def test_step_session_needs_callable() -> None:
    """StepSession refuses a non-callable step_fn."""
    with pytest.raises(TypeError, match=r"StepSession needs a callable step_fn, got 3"):
        StepSession(3)  # type: ignore[arg-type]


# -- intervals and timeouts ----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (-1, ValueError), (float("nan"), ValueError),
                                             ("1", TypeError), (True, TypeError)])
def test_hook_timeout_must_be_positive(value: object, error: type[Exception]) -> None:
    """hook_timeout must be a number > 0 (a value of another type is a TypeError)."""
    with pytest.raises(error, match=r"hook_timeout must be a number of seconds > 0"):
        MonitoredSession(ScriptedCreator(), [], hook_timeout=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), (-0.5, ValueError), (float("nan"), ValueError),
                                             (None, TypeError)])
def test_stop_grace_period_must_not_be_negative(value: object, error: type[Exception]) -> None:
    """stop_grace_period must be a number >= 0 (a value of another type is a TypeError)."""
    with pytest.raises(error, match=r"stop_grace_period must be a number of seconds >= 0"):
        MonitoredSession(ScriptedCreator(), [], stop_grace_period=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_attempts": 0}, r"max_attempts=\.\.\.\) must be None or an int >= 1"),
        ({"max_attempts": -2}, r"max_attempts=\.\.\.\) must be None or an int >= 1"),
        ({"initial_delay": -1}, r"initial_delay=\.\.\.\) must be a number of seconds >= 0"),
        ({"max_delay": -0.1}, r"max_delay=\.\.\.\) must be a number of seconds >= 0"),
        ({"multiplier": 0.5}, r"multiplier=\.\.\.\) must be a number >= 1"),
        ({"max_time": 0}, r"max_time=\.\.\.\) must be None or a number of seconds > 0"),
        ({"max_time": -1}, r"max_time=\.\.\.\) must be None or a number of seconds > 0"),
    ],
)
def test_retry_policy_fields_are_checked(kwargs: dict[str, Any], match: str) -> None:
    """Every RetryPolicy field is validated at construction, naming the field."""
    with pytest.raises(ValueError, match=match):
        RetryPolicy(**kwargs)


def test_retry_must_be_a_policy() -> None:
    """retry= must be a RetryPolicy."""
    with pytest.raises(TypeError, match=r"retry must be a hookrun.RetryPolicy, got dict"):
        MonitoredSession(ScriptedCreator(), [], retry={"max_attempts": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -1, float("nan")])
def test_run_options_timeout_must_be_positive(value: float) -> None:
    """RunOptions.timeout must be > 0."""
    with pytest.raises(ValueError, match=r"RunOptions\(timeout=\.\.\.\) must be None or a number of seconds > 0"):
        RunOptions(timeout=value)


@pytest.mark.anyio
@pytest.mark.parametrize("value", [-1, -0.001, float("nan"), True])
async def test_coordinator_loop_interval_must_not_be_negative(value: float) -> None:
    """Coordinator.loop refuses a negative interval (0 and None mean back to back)."""
    async with Coordinator() as coord:
        with pytest.raises(ValueError, match=r"loop\(interval=\.\.\.\) must be None or a number of seconds >= 0"):
            coord.loop(value, lambda: None)


def test_coordinator_grace_period_must_not_be_negative() -> None:
    """Coordinator(stop_grace_period=-1) is refused."""
    with pytest.raises(ValueError, match=r"Coordinator\(stop_grace_period=\.\.\.\) must be a number of seconds >= 0"):
        Coordinator(stop_grace_period=-1)


def test_recoverable_must_hold_exception_classes() -> None:
    """recoverable= holds exception classes only."""
    with pytest.raises(TypeError, match=r"recoverable must hold exception classes, got 'x'"):
        MonitoredSession(ScriptedCreator(), [], recoverable=["x"])  # type: ignore[list-item]


# -- using the session wrongly ----------------------------------------------------------------


@pytest.mark.anyio
async def test_run_outside_async_with() -> None:
    """run() before entering says so."""
    sess = MonitoredSession(ScriptedCreator(), [])
    with pytest.raises(SessionClosedError, match=r"MonitoredSession.run\(\) called outside 'async with'"):
        await sess.run()


@pytest.mark.anyio
async def test_run_after_close() -> None:
    """run() after leaving the block says the session closed."""
    async with MonitoredSession(ScriptedCreator(), []) as sess:
        pass
    with pytest.raises(SessionClosedError, match=r"run\(\) called after the session closed"):
        await sess.run()
    with pytest.raises(SessionClosedError, match=r"run_step_fn\(\) called after the session closed"):
        await sess.run_step_fn(_noop_step)


async def _noop_step(step_context: StepContext) -> None:
    return None


@pytest.mark.anyio
async def test_entering_twice_is_refused() -> None:
    """A monitored session can be entered only once (nested or after closing)."""
    sess = MonitoredSession(ScriptedCreator(), [])
    async with sess:
        with pytest.raises(RuntimeError, match=r"MonitoredSession can be entered only once \(it is open\)"):
            await sess.__aenter__()
    with pytest.raises(RuntimeError, match=r"can be entered only once \(it is closed\)"):
        await sess.__aenter__()


@pytest.mark.anyio
async def test_run_re_entered_from_a_hook_is_refused() -> None:
    """A hook calling run() of its own session during a step gets a clear error."""
    holder: list[MonitoredSession] = []

    class Reenters(_Named):
        async def before_run(self, run_context: SessionRunContext) -> None:
            await holder[0].run()

    async with MonitoredSession(ScriptedCreator(), [Reenters("reenter")]) as sess:
        holder.append(sess)
        with anyio.fail_after(5), pytest.raises(RuntimeError, match=r"from inside one of its own steps"):
            await sess.run()


@pytest.mark.anyio
async def test_two_tasks_at_once_take_turns() -> None:
    """A second task calling run() (or run_step_fn()) while a step is in progress waits for
    that step, in arrival order, never interleaved with it."""
    creator = ScriptedCreator({"x": 1}, hang_at={0: [0]})
    done: list[Any] = []
    async with MonitoredSession(creator, []) as sess:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                hung = anyio.CancelScope()

                async def hang() -> None:
                    with hung:
                        await sess.run("x")
                    done.append("cancelled")

                async def run() -> None:
                    done.append(("run", await sess.run("x")))

                async def step_fn() -> None:
                    await sess.run_step_fn(_noop_step)
                    done.append("run_step_fn")

                tg.start_soon(hang)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(run)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(step_fn)
                await anyio.wait_all_tasks_blocked()
                assert done == [] and creator.sessions[0].steps == 1  # both wait for the step in progress
                hung.cancel()
        assert done == ["cancelled", ("run", 1), "run_step_fn"]
        assert creator.sessions[0].steps == 2
        assert await sess.run("x") == 1

