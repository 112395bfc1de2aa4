"""A session that failed with a recoverable error is never stepped again: not when the
retry policy gives up or the recovery is cancelled (the next ``run()`` on that lane closes
the failed session and creates a new one), not by a step waiting for the lane when it
failed. Each test runs with one lane and with two."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import pytest

from hookrun import (
    AbortedError,
    MonitoredSession,
    RetryPolicy,
    SessionRunContext,
    SessionRunValues,
    StepSession,
)

pytestmark = pytest.mark.anyio


class Sessions:
    """A creator whose raw sessions record their own number in ``ran`` at each run; a run
    whose feeds name a caller in ``gates`` waits for its gate."""

    def __init__(self) -> None:
        self.made: list[StepSession] = []
        self.ran: list[int] = []
        self.gates: dict[Any, anyio.Event] = {}

    def __call__(self) -> StepSession:
        name = len(self.made)

        async def run(feeds: Mapping[Any, Any] | None) -> dict[str, Any]:
            self.ran.append(name)
            gate = self.gates.get((feeds or {}).get("who"))
            if gate is not None:
                await gate.wait()
            return {"y": name}

        session = StepSession(run)
        self.made.append(session)
        return session


class FailsFirstBeforeRun:
    """The first ``before_run`` raises ``AbortedError``; records the session it failed on."""

    overlapping_steps = True

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.failed_on: int | None = None

    def before_run(self, run_context: SessionRunContext) -> None:
        if self.failed_on is None:
            self.failed_on = self.sessions.made.index(run_context.session)
            raise AbortedError("lost")


@pytest.mark.parametrize("n", [1, 2])
async def test_a_session_whose_recovery_was_given_up_is_never_stepped_again(n: int) -> None:
    sessions = Sessions()
    hook = FailsFirstBeforeRun(sessions)
    async with MonitoredSession(sessions, [hook], max_in_flight=n, retry=RetryPolicy(max_attempts=1)) as sess:
        with pytest.raises(AbortedError):
            await sess.run("y")
        for _ in range(2 * n):  # every lane serves a step
            await sess.run("y")
    assert hook.failed_on is not None
    assert hook.failed_on not in sessions.ran
    assert len(sessions.ran) == 2 * n


class LosesTheFirstAfterRun:
    """The first ``after_run`` raises ``AbortedError``; records the session it failed on,
    and ``ran`` as it was then."""

    overlapping_steps = True

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.failed_on: int | None = None
        self.ran_then: list[int] = []

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self.failed_on is None:
            self.failed_on = self.sessions.made.index(run_context.session)
            self.ran_then = list(self.sessions.ran)
            raise AbortedError("lost")


@pytest.mark.parametrize("n", [1, 2])
async def test_a_caller_waiting_for_the_lane_of_a_step_that_lost_its_session_does_not_run_on_it(n: int) -> None:
    """``first`` and the other callers hold every lane; ``waiting`` waits for one. ``first``'s
    run returns (its lane goes to ``waiting``) and its ``after_run`` loses the session: the
    session is re-created before ``waiting`` (or ``first``, re-run) runs on that lane."""
    sessions = Sessions()
    callers = ["first", *range(1, n), "waiting"]
    sessions.gates = {who: anyio.Event() for who in callers}
    hook = LosesTheFirstAfterRun(sessions)
    results: dict[Any, Any] = {}
    retry = RetryPolicy(initial_delay=0, jitter=False)
    async with MonitoredSession(sessions, [hook], max_in_flight=n, retry=retry) as sess:

        async def call(who: Any) -> None:
            results[who] = await sess.run("y", {"who": who})

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for who in callers:
                    tg.start_soon(call, who)
                    await anyio.wait_all_tasks_blocked()
                sessions.gates["first"].set()
                await anyio.wait_all_tasks_blocked()
                for gate in sessions.gates.values():
                    gate.set()
    assert hook.failed_on is not None
    assert hook.failed_on not in sessions.ran[len(hook.ran_then) :]
    assert set(results) == set(callers)


@pytest.mark.parametrize("n", [1, 2])
async def test_a_session_whose_recovery_was_cancelled_is_never_stepped_again(n: int) -> None:
    """The first step's caller is cancelled while it waits to retry: the next ``run()`` on
    that lane resumes the recovery (closes the failed session, creates one)."""
    sessions = Sessions()
    hook = FailsFirstBeforeRun(sessions)
    slow = RetryPolicy(initial_delay=3600, max_delay=3600, jitter=False)
    async with MonitoredSession(sessions, [hook], max_in_flight=n, retry=slow) as sess:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sess.run, "y")
                await anyio.wait_all_tasks_blocked()  # waiting to retry
                tg.cancel_scope.cancel()
            for _ in range(2 * n):  # every lane serves a step
                await sess.run("y")
    assert hook.failed_on is not None
    assert hook.failed_on not in sessions.ran
    assert len(sessions.ran) == 2 * n


class LosesTheSessionInAfterRun:
    """``after_run`` of the step fed ``{"who": "first"}`` waits for ``release`` (holding the
    hook phases), then raises ``AbortedError``; every ``before_run`` records its session."""

    overlapping_steps = True

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.release = anyio.Event()
        self.before: list[tuple[Any, int]] = []
        self.failed = False

    def before_run(self, run_context: SessionRunContext) -> None:
        who = (run_context.original_args.feed_dict or {}).get("who")
        self.before.append((who, self.sessions.made.index(run_context.session)))

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        who = (run_context.original_args.feed_dict or {}).get("who")
        if who == "first" and not self.failed:
            await self.release.wait()
            self.failed = True
            raise AbortedError("lost")


async def test_a_step_waiting_for_the_hook_phases_when_its_lanes_session_is_lost_runs_on_a_new_one() -> None:
    """A step handed the lane of a step whose run returned waits for the hook phases while
    that step's ``after_run`` loses the lane's session: it replaces it before its own
    ``before_run`` and run."""
    sessions = Sessions()
    sessions.gates = {"other": anyio.Event()}
    hook = LosesTheSessionInAfterRun(sessions)
    retry = RetryPolicy(initial_delay=0, jitter=False)
    results: dict[str, Any] = {}
    async with MonitoredSession(sessions, [hook], max_in_flight=2, retry=retry) as sess:

        async def call(who: str) -> None:
            results[who] = await sess.run("y", {"who": who})

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for who in ("first", "other", "waiting"):  # first: lane 0, other: lane 1, waiting: waits
                    tg.start_soon(call, who)
                    await anyio.wait_all_tasks_blocked()
                # first's run returned: its lane went to waiting, which waits for first's after_run
                assert ("waiting", 0) not in hook.before
                hook.release.set()
                await anyio.wait_all_tasks_blocked()
                sessions.gates["other"].set()
    assert hook.failed and set(results) == {"first", "other", "waiting"}
    waiting = [made for who, made in hook.before if who == "waiting"]
    assert waiting and 0 not in waiting
    assert sessions.ran.count(0) == 1  # only first's run, before the loss


@pytest.mark.parametrize("n", [1, 2])
async def test_a_step_functions_session_whose_recovery_was_given_up_is_never_stepped_again(n: int) -> None:
    """A step function loses its session and the retry policy gives up: the next step on
    that lane replaces the session first."""
    sessions = Sessions()
    failed_on: list[int] = []

    async def lose(step_context: Any) -> None:
        failed_on.append(sessions.made.index(step_context.session))
        raise AbortedError("lost")

    async with MonitoredSession(sessions, max_in_flight=n, retry=RetryPolicy(max_attempts=1)) as sess:
        with pytest.raises(AbortedError):
            await sess.run_step_fn(lose)
        for _ in range(2 * n):  # every lane serves a step
            await sess.run("y")
    assert failed_on and failed_on[0] not in sessions.ran
    assert len(sessions.ran) == 2 * n


async def test_a_session_lost_by_a_step_another_steps_failure_cancelled_is_never_stepped_again() -> None:
    """Step ``a`` fails for good (a ``ValueError``), which cancels step ``b``; ``b``'s run cannot
    be cancelled at once and then finds its session lost: that lane's next step replaces it."""
    made: list[StepSession] = []
    ran: list[int] = []
    b_runs = anyio.Event()

    def create() -> StepSession:
        name = len(made)

        async def run(feeds: Mapping[Any, Any] | None) -> dict[str, Any]:
            who = (feeds or {}).get("who")
            ran.append(name)
            if who == "a":
                await b_runs.wait()
                raise ValueError("a fails for good")
            if who == "b":
                b_runs.set()
                with anyio.CancelScope(shield=True):  # a remote call that cannot be cut short
                    await anyio.sleep(0.01)
                raise AbortedError("b's session is lost")
            return {"y": name}

        session = StepSession(run)
        made.append(session)
        return session

    errors: dict[str, BaseException] = {}
    async with MonitoredSession(create, max_in_flight=2, retry=RetryPolicy(initial_delay=0, jitter=False)) as sess:

        async def call(who: str) -> None:
            try:
                await sess.run("y", {"who": who})
            except Exception as exc:
                errors[who] = exc

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "a")
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(call, "b")
            b_session = ran[1]
            before = len(ran)
            for _ in range(4):  # every lane serves steps
                await sess.run("y")
    assert isinstance(errors["a"], ValueError) and "b" in errors
    assert b_session not in ran[before:]


async def _step_function_gets_firsts_lane(
    sessions: Sessions, hook: object, hooked: Callable[[Any], Awaitable[Any]],
    then: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """Two lanes: ``first`` (lane 0) and ``other`` (lane 1) run, a step function calling
    ``hooked`` waits for a lane; ``first``'s run returns (its lane goes to the step
    function), ``then()`` runs, then ``other``'s run returns. What each call returned."""
    sessions.gates = {"first": anyio.Event(), "other": anyio.Event()}
    retry = RetryPolicy(initial_delay=0, jitter=False)
    results: dict[str, Any] = {}
    async with MonitoredSession(sessions, [hook], max_in_flight=2, retry=retry) as sess:

        async def call(who: str) -> None:
            results[who] = await sess.run("y", {"who": who})

        async def step_fn() -> None:
            results["fn"] = await sess.run_step_fn(hooked)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for start in (functools.partial(call, "first"), functools.partial(call, "other"), step_fn):
                    tg.start_soon(start)  # first: lane 0, other: lane 1, the step function waits
                    await anyio.wait_all_tasks_blocked()
                sessions.gates["first"].set()  # first's run returns: lane 0 goes to the step function
                await anyio.wait_all_tasks_blocked()
                await then()
                await anyio.wait_all_tasks_blocked()
                sessions.gates["other"].set()
    return results


async def _run_with_hooks(step_context: Any) -> Any:
    return await step_context.run_with_hooks("y", {"who": "fn"})


async def test_a_step_function_holding_the_lane_of_a_step_that_lost_its_session_does_not_hang() -> None:
    """A step function is handed the lane of a step whose run returned, then that step's
    ``after_run`` loses the lane's session: the step is re-run on the first lane free
    (waiting for its own would wait for ever: the step function's hooked run waits for the
    step's ``after_run``), and every call returns."""
    sessions = Sessions()
    hook = LosesTheSessionInAfterRun(sessions)

    async def lose() -> None:
        hook.release.set()  # first's after_run loses session 0

    results = await _step_function_gets_firsts_lane(sessions, hook, _run_with_hooks, lose)
    assert hook.failed and set(results) == {"first", "other", "fn"}
    first = [made for who, made in hook.before if who == "first"]
    assert first[0] == 0 and len(first) == 2 and first[1] != 0  # re-run once, on a sound session


class LosesTheSessionAtOnce:
    """``after_run`` of the step fed ``{"who": "first"}`` raises ``AbortedError`` at once, the
    first time; every ``before_run`` records its caller and session."""

    overlapping_steps = True

    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.before: list[tuple[Any, int]] = []
        self.failed = False

    def before_run(self, run_context: SessionRunContext) -> None:
        who = (run_context.original_args.feed_dict or {}).get("who")
        self.before.append((who, self.sessions.made.index(run_context.session)))

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        who = (run_context.original_args.feed_dict or {}).get("who")
        if who == "first" and not self.failed:
            self.failed = True
            raise AbortedError("lost")


async def test_a_step_function_handed_the_lane_just_before_the_loss_does_not_hang() -> None:
    """The lane goes to a waiting step function as the step's run returns, and that step's
    ``after_run`` loses the session at once (no wait to retry): the step re-runs on the
    first lane free, the step function's hooked run is called again on a new session."""
    sessions = Sessions()
    hook = LosesTheSessionAtOnce(sessions)

    async def nothing() -> None:
        pass

    results = await _step_function_gets_firsts_lane(sessions, hook, _run_with_hooks, nothing)
    assert hook.failed and set(results) == {"first", "other", "fn"}
    assert ("fn", 0) not in hook.before  # the step function's hooked run never used the lost session


async def test_a_step_functions_hooked_run_after_another_step_lost_its_lanes_session_calls_it_again() -> None:
    """A step function holds a lane whose session another step's ``after_run`` lost: its next
    hooked run raises the loss (``AbortedError``) instead of running on that session, and the
    function is called again with a new session."""
    sessions = Sessions()
    hook = LosesTheSessionInAfterRun(sessions)
    lost = anyio.Event()
    seen: list[int] = []

    async def hooked(step_context: Any) -> Any:
        seen.append(sessions.made.index(step_context.session))
        await lost.wait()
        return await _run_with_hooks(step_context)

    async def lose() -> None:
        assert seen == [0]
        hook.release.set()  # first's after_run loses session 0
        await anyio.wait_all_tasks_blocked()
        lost.set()  # the step function's hooked run, once session 0 is lost

    results = await _step_function_gets_firsts_lane(sessions, hook, hooked, lose)
    assert set(results) == {"first", "other", "fn"}
    assert seen[0] == 0 and len(seen) == 2 and seen[1] != 0  # called again, with a new session
    assert ("fn", 0) not in hook.before
