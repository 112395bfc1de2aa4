"""Leaving the ``async with`` block while another task's ``aclose()`` runs: the block's
cancellation stops that close's ``end`` (each hook call is cancelled and unwinds in the
task that started it), the block waits for the close to finish before tearing its task
group down, and that ``aclose()`` raises ``SessionClosedError``. A phase that can no
longer start workers (the block has left) cancels the call it drives instead of
dropping it."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import MonitoredSession, SessionClosedError, SessionRunHook, SingularMonitoredSession

pytestmark = pytest.mark.anyio

LIMIT = 10.0
RUNS = 40
LEFT = r"was left \(cancelled\) while aclose\(\) ran in another task: the hooks' end was cut short"


class _Raw:
    """``run`` waits for ``gate`` (``running`` says a run started); counts its closes."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.running = anyio.Event()
        self.closed = 0

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.running.set()
        await self.gate.wait()
        return [1 for _ in fetches]

    async def aclose(self) -> None:
        self.closed += 1


class _Tracked(SessionRunHook):
    """Its ``phase`` opens a cancel scope and waits inside it (for ``release``, or one
    checkpoint); it records the task each call started in and the task its ``finally``
    ran in, so a call dropped half-way (finished later by the garbage collector, or
    never) shows."""

    def __init__(self, phase: str, release: anyio.Event | None = None) -> None:
        self.release = release
        self.started: list[int] = []
        self.finished: list[int] = []
        setattr(self, phase, self._call)

    async def _call(self, *args: Any) -> None:
        self.started.append(anyio.get_current_task().id)
        try:
            with anyio.CancelScope():
                if self.release is None:
                    await anyio.lowlevel.checkpoint()
                else:
                    await self.release.wait()
        finally:
            self.finished.append(anyio.get_current_task().id)

    def ended_in_own_task(self) -> bool:
        return self.finished == self.started


def _hooks(phase: str, release: anyio.Event | None = None) -> list[_Tracked]:
    return [_Tracked(phase, release), _Tracked(phase, release)]  # the second one runs in a worker


async def _close_cut_short(sess: Any, outcome: list[BaseException]) -> None:
    """Another task's aclose(), cut short by the block's leaving: it raises SessionClosedError."""
    with pytest.raises(SessionClosedError, match=LEFT) as info:
        await sess.aclose()
    outcome.append(info.value)


async def _close_cancelling_the_block(session_type: type[Any], hooks: list[_Tracked], *, wait_for_end: bool) -> None:
    """A step runs in the block; another task closes (waiting for the step, or, with
    ``wait_for_end``, already in the hooks' end); then the block is cancelled."""
    raw = _Raw()

    async def creator() -> _Raw:
        return raw

    sess = session_type(creator, hooks)
    outcome: list[BaseException] = []
    body = anyio.CancelScope()

    async def block() -> None:
        with body:
            async with sess:
                await sess.run(["x"])
                await anyio.sleep_forever()

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(block)
            await raw.running.wait()
            tg.start_soon(_close_cut_short, sess, outcome)
            await anyio.wait_all_tasks_blocked()  # the close waits for the step
            if wait_for_end:
                raw.gate.set()
                while len(hooks[-1].started) < 1:  # both hooks are in end
                    await anyio.lowlevel.checkpoint()
                await anyio.wait_all_tasks_blocked()
            body.cancel()
    assert body.cancelled_caught and len(outcome) == 1
    assert raw.closed == 1 and sess.raw_session() is None
    assert all(hook.ended_in_own_task() for hook in hooks), [(h.started, h.finished) for h in hooks]


@pytest.mark.parametrize("session_type", [MonitoredSession, SingularMonitoredSession])
async def test_leaving_the_block_while_a_close_waits_for_its_step_stops_that_close(session_type: type[Any]) -> None:
    """The block is cancelled while another task's aclose() waits for the block's step:
    every end call that started is cancelled and unwinds in its own task (none is left
    half-run), the session is closed once, that aclose() raises SessionClosedError; many
    times over, so that every interleaving of the two tasks shows."""
    for _ in range(RUNS):
        await _close_cancelling_the_block(session_type, _hooks("end"), wait_for_end=False)


async def test_leaving_the_block_while_a_close_runs_end_cancels_end_in_its_own_tasks() -> None:
    """The block is cancelled while another task's aclose() has both hooks in end (one in
    the closing task, one in a worker): both are cancelled in their own tasks; the block
    waits for that close before it tears down its task group."""
    for _ in range(RUNS):
        hooks = _hooks("end", anyio.Event())
        await _close_cancelling_the_block(MonitoredSession, hooks, wait_for_end=True)
        assert all(len(hook.started) == 1 for hook in hooks)


async def test_a_close_whose_end_is_done_is_not_disturbed_by_leaving_the_block() -> None:
    """end finished before the block is cancelled: that aclose() returns normally."""
    raw = _Raw()
    raw.gate.set()

    async def creator() -> _Raw:
        return raw

    hooks = _hooks("end")
    body = anyio.CancelScope()
    sess = MonitoredSession(creator, hooks)
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:

            async def block() -> None:
                with body:
                    async with sess:
                        await anyio.sleep_forever()

            tg.start_soon(block)
            await anyio.wait_all_tasks_blocked()
            await sess.aclose()
            body.cancel()
    assert raw.closed == 1 and all(hook.ended_in_own_task() and len(hook.started) == 1 for hook in hooks)


async def test_a_phase_that_cannot_start_workers_cancels_the_call_it_drives() -> None:
    """A step in another task reaches a phase after the block has left (an error exit does
    not wait for it): its first hook suspends, no worker can start, so that hook is
    cancelled in its own task and run() raises SessionClosedError; none is left half-run."""
    raw = _Raw()

    async def creator() -> _Raw:
        return raw

    hooks = _hooks("after_run")
    sess = MonitoredSession(creator, hooks)
    outcome: list[BaseException] = []

    async def step() -> None:
        with pytest.raises(SessionClosedError, match="is not open") as info:
            await sess.run(["x"])
        outcome.append(info.value)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            with pytest.raises(ValueError, match="body"):
                async with sess:
                    tg.start_soon(step)
                    await raw.running.wait()
                    raise ValueError("body")
            raw.gate.set()
    assert len(outcome) == 1 and raw.closed == 1
    assert hooks[0].started and hooks[0].ended_in_own_task() and hooks[1].started == []


class _UnwindsSlowly(SessionRunHook):
    """Its ``end`` waits for ever; cancelled, it tells ``unwinding`` and finishes its clean-up,
    shielded, once ``release`` is set."""

    def __init__(self) -> None:
        self.unwinding, self.release = anyio.Event(), anyio.Event()
        self.tasks: list[int] = []

    async def end(self, session: Any) -> None:
        self.tasks.append(anyio.get_current_task().id)
        try:
            await anyio.sleep_forever()
        finally:
            self.unwinding.set()
            with anyio.CancelScope(shield=True):
                await self.release.wait()
            self.tasks.append(anyio.get_current_task().id)


class _FailsInEnd(SessionRunHook):
    def __init__(self) -> None:
        self.go = anyio.Event()

    async def end(self, session: Any) -> None:
        await self.go.wait()
        raise ValueError("end failed")


async def _open_block(sess: Any, body: anyio.CancelScope, tg: Any) -> anyio.Event:
    """Enter ``sess`` in a task of ``tg`` inside ``body``; the event returned is set once
    that block is left."""
    entered, left = anyio.Event(), anyio.Event()

    async def block() -> None:
        with body:
            async with sess:
                entered.set()
                await anyio.sleep_forever()
        left.set()

    tg.start_soon(block)
    await entered.wait()
    return left


async def test_an_end_error_before_the_block_left_is_kept() -> None:
    """An end hook failed and its sibling was still unwinding when the block was left:
    the phase ends with that failure, which that aclose() raises; nothing is half-run."""
    raw = _Raw()

    async def creator() -> _Raw:
        return raw

    fails, slow = _FailsInEnd(), _UnwindsSlowly()
    sess = MonitoredSession(creator, [fails, slow])
    body = anyio.CancelScope()
    outcome: list[BaseException] = []

    async def close() -> None:
        with pytest.raises(ValueError, match="end failed") as info:
            await sess.aclose()
        outcome.append(info.value)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            await _open_block(sess, body, tg)
            tg.start_soon(close)
            await anyio.wait_all_tasks_blocked()  # both hooks in end
            fails.go.set()
            await slow.unwinding.wait()  # the failure cancelled the sibling, which unwinds
            body.cancel()
            await anyio.wait_all_tasks_blocked()  # the block waits for the close
            slow.release.set()
    assert len(outcome) == 1 and raw.closed == 1 and len(slow.tasks) == 2 and slow.tasks[0] == slow.tasks[1]


async def test_the_block_stops_waiting_for_a_close_that_does_not_stop(caplog: pytest.LogCaptureFixture) -> None:
    """A hook's end that ignores the cancellation (a long shielded clean-up): the block
    gives up waiting after its bound, says so, and leaves; the close ends later on its
    own, the hook in its own task, and that aclose() still raises SessionClosedError."""
    raw = _Raw()

    async def creator() -> _Raw:
        return raw

    slow = _UnwindsSlowly()
    sess = MonitoredSession(creator, [_Tracked("end", anyio.Event()), slow], stop_grace_period=0)
    body = anyio.CancelScope()
    outcome: list[BaseException] = []

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            left = await _open_block(sess, body, tg)
            tg.start_soon(_close_cut_short, sess, outcome)
            await anyio.wait_all_tasks_blocked()
            body.cancel()
            await slow.unwinding.wait()
            await left.wait()  # the block gives up waiting after one second
            assert "took longer than stop_grace_period=0.0s to stop; gave up waiting" in caplog.text
            assert outcome == [] and raw.closed == 0
            slow.release.set()
    assert len(outcome) == 1 and raw.closed == 1 and slow.tasks[0] == slow.tasks[1]


class _Settled(_Tracked):
    """A ``_Tracked`` hook in ``end`` that also records each ``on_exception`` it receives."""

    def __init__(self) -> None:
        super().__init__("end")
        self.exceptions: list[BaseException] = []

    async def on_exception(self, session: Any, exception: BaseException) -> None:
        self.exceptions.append(exception)


@pytest.mark.parametrize("wait_for_end", [False, True])
async def test_every_hook_hears_end_or_on_exception_once_when_the_block_is_left(wait_for_end: bool) -> None:
    """However the block's cancellation and the other task's close interleave, every hook
    gets exactly one of end (begun) or on_exception, never both, never neither."""
    for _ in range(RUNS):
        hooks: list[Any] = [_Settled(), _Settled()]
        if wait_for_end:
            for hook in hooks:
                hook.release = anyio.Event()
        await _close_cancelling_the_block(MonitoredSession, hooks, wait_for_end=wait_for_end)
        for hook in hooks:
            assert len(hook.started) + len(hook.exceptions) == 1, (hook.started, hook.exceptions)


async def test_a_close_cut_before_end_began_gives_each_hook_on_exception() -> None:
    """The close waits for a step running in a third task when the block is cancelled: end
    never begins, so every hook gets on_exception with the SessionClosedError that the
    close raises (never neither)."""
    raw = _Raw()

    async def creator() -> _Raw:
        return raw

    hooks = [_Settled(), _Settled()]
    sess = MonitoredSession(creator, hooks)
    body = anyio.CancelScope()
    outcome: list[BaseException] = []

    async def block() -> None:
        with body:
            async with sess:
                await anyio.sleep_forever()

    async def step() -> None:
        await sess.run(["x"])  # its run began before the close: it is let finish

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(block)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(step)
            await raw.running.wait()
            tg.start_soon(_close_cut_short, sess, outcome)
            await anyio.wait_all_tasks_blocked()  # the close waits for the third task's step
            body.cancel()
            await anyio.wait_all_tasks_blocked()
            raw.gate.set()
    assert len(outcome) == 1 and raw.closed == 1
    for hook in hooks:
        assert hook.started == [] and hook.exceptions == [outcome[0]]
