"""hookrun.testing.drive: the script, the faults, the record and the checks it makes."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import (
    AbortedError,
    HookTimeoutError,
    LocalStepCounter,
    MonitoredSession,
    RetryPolicy,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepSession,
    in_thread,
)
from hookrun.hooks import StopAtStepHook
from hookrun.testing import FaultyHook, MockClock, RecordingHook, drive

pytestmark = pytest.mark.anyio


class Fetcher(SessionRunHook):
    """Fetches ``key`` every step and keeps the results."""

    def __init__(self, key: str = "x", name: str | None = None) -> None:
        self.key, self.seen = key, list[Any]()
        if name is not None:
            self.name = name

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self.key)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self.seen.append(run_values.results)


class AsyncStopper(SessionRunHook):
    """Requests stop in after_run at ``at`` (global step before the run), after suspending."""

    def __init__(self, at: int, name: str) -> None:
        self.at, self.name = at, name

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await anyio.lowlevel.checkpoint()
        if run_context.global_step == self.at:
            run_context.request_stop()


class Suspender(SessionRunHook):
    """An async after_run that suspends a few times and never asks to stop."""

    name = "suspender"

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        for _ in range(3):
            await anyio.lowlevel.checkpoint()


async def test_a_single_hook_or_a_list() -> None:
    """drive takes one hook or a sequence; the record lists them."""
    hook = Fetcher()
    assert (await drive(hook, steps=2, values={"x": 1})).hooks == [hook]
    assert (await drive([hook, StopAtStepHook(last_step=1)], values={"x": 1})).steps == 1


@pytest.mark.parametrize("bad", [None, "hook", {"a": 1}])
async def test_hooks_must_be_hooks(bad: object) -> None:
    """None, a string or a mapping is not a hook."""
    with pytest.raises(TypeError, match="drive\\(\\) needs a hook or a sequence of hooks"):
        await drive(bad)


async def test_values_come_from_the_step_then_values() -> None:
    """A step's own mapping wins over values=; callables get (step, feed_dict)."""
    hook = RecordingHook(request=SessionRunArgs(["a", "b", "c"], feed_dict={"c": "fed"}))
    record = await drive(
        hook,
        steps=[{"a": "own", "c": "not fed"}, lambda step, feed: {"a": f"made {step} {sorted(feed)}"}],
        values={"a": "shared", "b": lambda step, feed: step * 10, "c": "not fed"},
    )
    assert [call.args["results"] for call in hook.calls if call.phase == "after_run"] == [
        ["own", 0, "not fed"],
        ["made 1 ['c']", 10, "not fed"],
    ]
    assert record.received(hook) == [["own", 0, "not fed"], ["made 1 ['c']", 10, "not fed"]]


async def test_a_fed_key_is_not_fetched_back_as_in_production() -> None:
    """Fetching a key one only feeds fails in the kit exactly as with a StepSession."""
    hook = RecordingHook(request=SessionRunArgs(["a", "c"], feed_dict={"c": "fed"}))
    with pytest.raises(KeyError, match=r"step 0 has no value for fetch 'c'; 'c' is fed, but a fed key is not fetched back"):
        await drive(hook, values={"a": 1})

    async def create() -> StepSession:
        return StepSession(lambda feeds: {"a": 1})

    async with MonitoredSession(create, [RecordingHook(request=SessionRunArgs(["a", "c"], feed_dict={"c": "fed"}))]) as sess:
        with pytest.raises(KeyError, match=r"no value for fetch 'c'"):
            await sess.run()


async def test_a_missing_value_names_the_step_and_the_known_keys() -> None:
    """A fetch nothing answers is a KeyError naming the step and what exists."""
    with pytest.raises(KeyError, match=r"step 0 has no value for fetch 'x'.*known: 'y'"):
        await drive(Fetcher("x"), steps=[{"y": 1}])


@pytest.mark.parametrize(
    ("steps", "error", "match"),
    [
        (-1, ValueError, "must be >= 0 steps"),
        ("abc", TypeError, "must be a list"),
        ([{"x": 1}, 5], TypeError, "step 1 must be a mapping"),
    ],
)
async def test_bad_steps(steps: Any, error: type[Exception], match: str) -> None:
    """Bad scripts are refused before anything runs, naming the culprit."""
    with pytest.raises(error, match=match):
        await drive(Fetcher(), steps=steps)


async def test_a_fault_list_fails_the_first_attempts() -> None:
    """errors={1: [f, f]} fails step 1 twice: three sessions, and step 1 answered once."""
    hook = Fetcher()
    record = await drive(
        hook, steps=3, values={"x": lambda step, feed: step}, errors={1: ["aborted", AbortedError]}
    )
    assert record.sessions == 3 and record.recoveries == 2 and record.closed == 3
    assert hook.seen == [0, 1, 2]
    assert [(run.index, run.outcome) for run in record.runs] == [
        (0, "returned"), (1, "raised"), (1, "raised"), (1, "returned"), (2, "returned")
    ]
    assert [call.session for call in record.of(hook, "after_run")] == [0, 2, 2]


async def test_end_of_input_after_the_script_is_a_clean_stop() -> None:
    """errors={len(steps): "oor"} ends the input: end runs and nothing escapes."""
    hook = RecordingHook()
    record = await drive(hook, steps=2, errors={2: "oor"})
    assert record.steps == 2 and record.error is None
    assert hook.phases()[-1] == "end" and record.phases(hook)[-1] == "end"


async def test_an_ordinary_error_escapes() -> None:
    """An unexpected error escapes drive as it would escape the caller's code."""
    with pytest.raises(RuntimeError, match="scripted 'error' fault at step 1"):
        await drive(Fetcher(), steps=3, values={"x": 0}, errors={1: "error"})


async def test_raises_keeps_the_expected_error() -> None:
    """raises= puts the escaped error in record.error; a different one still escapes."""
    record = await drive(Fetcher(), steps=3, values={"x": 0}, errors={1: "error"}, raises=RuntimeError)
    assert isinstance(record.error, RuntimeError) and record.steps == 1
    with pytest.raises(RuntimeError):
        await drive(Fetcher(), steps=3, values={"x": 0}, errors={1: "error"}, raises=KeyError)


async def test_raises_fails_when_nothing_was_raised() -> None:
    """raises= with a clean life is an AssertionError saying so."""
    with pytest.raises(AssertionError, match="ended without raising it"):
        await drive(Fetcher(), values={"x": 0}, raises=RuntimeError)


async def test_creation_errors_are_retried_when_recoverable() -> None:
    """Recoverable creation faults are retried; an ordinary one escapes."""
    record = await drive(RecordingHook(), steps=1, creation_errors=["unavailable", AbortedError])
    assert record.creation_attempts == 3 and record.sessions == 1
    with pytest.raises(RuntimeError, match="creation 0"):
        await drive(RecordingHook(), creation_errors=["error"])




async def test_singular_sessions_do_not_recover() -> None:
    """singular=True: a recoverable fault escapes instead of re-creating the session."""
    record = await drive(Fetcher(), steps=3, values={"x": 0}, errors={1: "aborted"},
                         singular=True, raises=AbortedError)
    assert record.sessions == 1 and record.steps == 1


async def test_a_hanging_sibling_meets_the_hook_timeout() -> None:
    """FaultyHook("before_run", "hang") with hook_timeout is a HookTimeoutError naming it."""
    sibling = FaultyHook("before_run", "hang", at=1, name="stuck")
    record = await drive([Fetcher(), sibling], steps=3, values={"x": 0}, hook_timeout=0.05,
                         raises=HookTimeoutError)
    assert isinstance(record.error, HookTimeoutError) and record.error.hook is sibling
    assert [call.outcome for call in record.of(sibling)] == ["returned", "cancelled"]


async def test_a_stopping_sibling_is_named_as_the_stopper() -> None:
    """FaultyHook("after_run", "stop", at=2) stops the life after step 2 and is recorded so."""
    hook, sibling = Fetcher(), FaultyHook("after_run", "stop", at=2)
    record = await drive([hook, sibling], steps=10, values={"x": 0})
    assert record.stop is not None and record.stop.hook is sibling
    assert record.stopped_at == 2 and record.steps == 3
    assert not any(call.requested_stop for call in record.of(hook))


async def test_stop_is_attributed_exactly_among_concurrent_async_hooks() -> None:
    """Of several async hooks suspended in one after_run phase, only the one that asked is
    the stopper, whatever order they finish in."""
    hooks = [Suspender(), AsyncStopper(1, "stopper"), Suspender()]
    record = await drive(hooks, steps=5)
    assert record.stop is not None and record.stop.name == "stopper" and record.stopped_at == 1
    assert [call.name for call in record.calls if call.requested_stop] == ["stopper"]


async def test_faulty_hook_overrides_only_its_phase() -> None:
    """A FaultyHook only implements its phase, so it adds no other calls."""
    sibling = FaultyHook("end", "error", at=5)
    record = await drive(sibling, steps=2)
    assert record.phases() == ["end"] and sibling.calls == 1
    assert type(sibling).before_run is SessionRunHook.before_run


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("run", "error"), {}, "phase must be one of"),
        (("begin", "stop"), {}, "unknown fault 'stop'"),
        (("after_run", "boom"), {}, "unknown fault 'boom'.*'aborted'"),
        (("after_run", "error"), {"at": -1}, "at must be an int >= 0"),
        (("after_run", "error"), {"times": 0}, "times must be an int >= 1"),
    ],
)
def test_faulty_hook_validation(args: tuple[str, str], kwargs: dict[str, Any], match: str) -> None:
    """Bad phases, faults and counts are ValueErrors naming them."""
    with pytest.raises(ValueError, match=match):
        FaultyHook(args[0], args[1], **kwargs)


async def test_unknown_session_fault_is_refused() -> None:
    """errors= with an unknown word, or a bad step, is a ValueError before anything runs."""
    with pytest.raises(ValueError, match="unknown fault 'explode' at step 0"):
        await drive(Fetcher(), errors={0: "explode"})
    with pytest.raises(ValueError, match="keys are script steps"):
        await drive(Fetcher(), errors={-1: "error"})
    with pytest.raises(ValueError, match="fault at step 5, past the script's end"):
        await drive(Fetcher(), steps=3, errors={5: "oor"})


async def test_cancel_after_cancels_from_outside_and_checks_the_invariants() -> None:
    """cancel_after=N cancels the life; the record says so, every session is closed."""
    hook = Fetcher()
    record = await drive(hook, steps=50, values={"x": 0}, cancel_after=5)
    assert record.cancelled and record.steps < 50 and record.closed == record.sessions
    assert not (await drive(hook, steps=1, values={"x": 0}, cancel_after=10_000)).cancelled


async def test_methods_are_restored_after_the_drive() -> None:
    """drive leaves no trace on the hooks: class methods and instance methods come back."""
    hook, threaded = Fetcher(), in_thread(Fetcher("y"))
    before_threaded = vars(threaded)["before_run"]
    await drive([hook, threaded], values={"x": 0, "y": 1})
    assert "before_run" not in vars(hook) and "after_run" not in vars(hook)
    assert vars(threaded)["before_run"] is before_threaded


async def test_errors_name_the_hook_itself() -> None:
    """A hook's error is raised from the hook's own call, and recorded against it."""
    hook = RecordingHook(raises={"after_run": ValueError("bad")})
    record = await drive(hook, steps=3, raises=ValueError)
    assert record.raised(hook) == [record.error] and record.steps == 1


async def test_slotted_hooks_are_refused_clearly() -> None:
    """A hook without an instance __dict__ cannot be recorded: the TypeError says how to fix it."""

    class Slotted:
        __slots__ = ()

        def before_run(self, run_context: SessionRunContext) -> None:
            return None

    with pytest.raises(TypeError, match=r"uses __slots__.*add '__dict__'"):
        await drive(Slotted())


async def test_times_follow_the_clock_and_tick() -> None:
    """Each call is stamped with the clock; tick moves a MockClock after every step."""
    clock, hook = MockClock(100), Fetcher()
    record = await drive(hook, steps=3, values={"x": 0}, clock=clock, tick=10)
    assert [call.time for call in record.of(hook, "before_run")] == [100, 110, 120]
    assert clock() == 130


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"tick": 5}, TypeError, "needs a clock with jump"),
        ({"tick": -1, "clock": MockClock()}, ValueError, "tick=...\\) must be a number of seconds >= 0"),
        ({"cancel_after": -2}, ValueError, "cancel_after"),
        ({"timeout": 0}, ValueError, "timeout"),
        ({"singular": True, "retry": RetryPolicy()}, ValueError, "never recovers"),
    ],
)
async def test_bad_knobs(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    """tick needs a jumpable clock; counts and bounds are checked."""
    with pytest.raises(error, match=match):
        await drive(Fetcher(), values={"x": 0}, **kwargs)


async def test_a_hang_nothing_cancels_is_a_timeout_naming_it() -> None:
    """A session run that hangs with no bound is a TimeoutError after timeout= (real time)."""
    with pytest.raises(TimeoutError, match="step 1"):
        await drive(Fetcher(), steps=3, values={"x": 0}, errors={1: "hang"}, timeout=0.2)


async def test_the_callers_arguments_and_results() -> None:
    """fetches= and feed_dict= are the caller's; record.results holds what run() returned."""
    record = await drive(Fetcher(), steps=2, values={"x": 1, "y": 3}, fetches=["x", "y"], feed_dict={"f": 2})
    assert record.results == [[1, 3], [1, 3]]
    assert record.runs[0].feed_dict == {"f": 2}


async def test_a_step_counter_sets_the_steps() -> None:
    """With step_counter=LocalStepCounter(5) the hook sees steps 5, 6, ..."""
    hook = Fetcher()
    record = await drive(hook, steps=3, values={"x": 0}, step_counter=LocalStepCounter(5))
    assert record.requested_at(hook) == [5, 6, 7]


async def test_hooks_are_found_by_name() -> None:
    """The record's questions take a hook's name; an unknown or ambiguous one is a LookupError."""
    record = await drive([Fetcher(name="a"), Fetcher(name="b"), Fetcher(name="b")], values={"x": 0})
    assert record.phases("a") == ["before_run", "after_run"]
    with pytest.raises(LookupError, match="2 hooks are named 'b'"):
        record.phases("b")
    with pytest.raises(LookupError, match="is not one of the hooks"):
        record.phases("c")
    assert "steps=1" in repr(record)


async def test_each_hook_sees_its_step_and_the_shared_stop_flag() -> None:
    """A hook is given one context per step (the same in before_run and after_run) that
    reads the step and the stop flag every hook shares."""
    seen: list[tuple[bool, int, bool]] = []

    class Watcher(SessionRunHook):
        def before_run(self, run_context: SessionRunContext) -> None:
            self.ctx = run_context

        def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
            seen.append((run_context is self.ctx, run_context.global_step, run_context.stop_requested))

    stopper = FaultyHook("before_run", "stop", at=1)
    record = await drive([stopper, Watcher()], steps=5)
    assert seen == [(True, 0, False), (True, 1, True)]
    assert record.stop is not None and record.stop.hook is stopper


def test_the_kit_public_names() -> None:
    """hookrun.testing exports exactly its documented names, sorted, all importable."""
    import hookrun.testing as kit

    assert kit.__all__ == [
        "HANG", "STOP", "Call", "Drive", "Fault", "FaultyHook", "HookCall", "MockClock",
        "Record", "RecordingHook", "ScriptedCreator", "ScriptedSession", "SessionRun",
        "StepScript", "cancel_after", "drive",
    ]
    assert all(hasattr(kit, name) for name in kit.__all__)


def test_importing_hookrun_or_the_kit_imports_no_pytest() -> None:
    """`import hookrun` does not load the kit, and the kit does not load pytest."""
    import subprocess
    import sys

    code = (
        "import sys, hookrun, hookrun.hooks; assert 'hookrun.testing' not in sys.modules; "
        "import hookrun.testing; assert 'pytest' not in sys.modules and '_pytest' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
