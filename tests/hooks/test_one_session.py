"""A hook that keeps the state of one session serves one monitored session at a time:
entering a second session with it while the first is open is refused, naming the hook,
before any ``begin``; once the first session is closed it may serve another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import MonitoredSession, SingularMonitoredSession
from hookrun.hooks import (
    CheckpointSaverHook,
    LoggingTensorHook,
    NanTensorHook,
    StepCounterHook,
    StopAtStepHook,
    every,
    on_after_run,
)
from hookrun.testing import RecordingHook, ScriptedCreator

from ._support import ListWriter

pytestmark = pytest.mark.anyio


class Counter(hookrun.SessionRunHook):
    """A checkpointable hook counting its session's steps."""

    def __init__(self, name: str) -> None:
        self.checkpoint_key = name
        self.n = 0

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.n += 1

    def state_dict(self) -> dict[str, int]:
        return {"n": self.n}

    def load_state_dict(self, state: Any) -> None:
        self.n = state["n"]


def _noop(run_context: Any, run_values: Any) -> None:
    """A function hook's body."""


async def test_a_checkpoint_saver_in_two_open_sessions_is_refused(tmp_path: Path) -> None:
    """The second entry raises naming the saver and the open session; its hooks' begin never runs."""
    saver = CheckpointSaverHook(tmp_path, save_steps=1)
    witness = RecordingHook()
    async with MonitoredSession(ScriptedCreator({"x": 1}), [saver]) as first:
        second = MonitoredSession(ScriptedCreator({"x": 1}), [witness, saver])
        refused = r"hook CheckpointSaverHook\(.*\) already serves another monitored session, which is still open"
        with pytest.raises(RuntimeError, match=refused + r" \(MonitoredSession\(open"):
            await second.__aenter__()
        assert witness.calls == []
        await first.run("x")
    async with second:  # refused entries leave it unentered: it may be entered now
        await second.run("x")
    assert witness.calls[0].phase == "begin"


async def test_sequential_reuse_is_allowed(tmp_path: Path) -> None:
    """Once the first session is closed, the same hooks serve the next one."""
    hooks = [CheckpointSaverHook(tmp_path, save_steps=1), StopAtStepHook(num_steps=2)]
    for _ in range(2):
        async with SingularMonitoredSession(ScriptedCreator({"x": 1}), hooks) as session:
            while not session.should_stop():
                await session.run("x")
    assert hookrun.latest_checkpoint(tmp_path) is not None


async def test_a_session_whose_entry_failed_no_longer_holds_its_hooks() -> None:
    """A failed entry closes the session: its hooks are free for another."""
    hook = StopAtStepHook(num_steps=1)
    failing = MonitoredSession(ScriptedCreator(errors={0: ValueError("no session")}), [hook])
    with pytest.raises(ValueError, match="no session"):
        await failing.__aenter__()
    async with MonitoredSession(ScriptedCreator({"x": 1}), [hook]) as session:
        await session.run("x")


async def test_the_saver_saves_the_hooks_of_the_session_it_serves(tmp_path: Path) -> None:
    """Two sessions built with one saver before either is entered: each checkpoint holds the
    state of the hooks of the session that wrote it, never the other's."""
    saver = CheckpointSaverHook(tmp_path, save_steps=1)
    mine, other = Counter("counter"), Counter("counter")
    other.n = 100
    first = SingularMonitoredSession(ScriptedCreator({"x": 1}), [mine, saver])
    SingularMonitoredSession(ScriptedCreator({"x": 1}), [other, saver])  # binds the saver too
    async with first:
        for _ in range(3):
            await first.run("x")
    restored = await hookrun.Checkpointer(tmp_path).restore()
    assert restored is not None and restored.step == 3
    assert restored.state["hooks"] == {"counter": {"n": 3}}


@pytest.mark.parametrize(
    "make",
    [
        lambda: StopAtStepHook(num_steps=5),
        lambda: StepCounterHook(every_n_steps=1, summary_writer=ListWriter()),
        lambda: LoggingTensorHook(["x"], every_n_iter=1),
        lambda: on_after_run(trigger=every(steps=2))(_noop),
    ],
    ids=["StopAtStepHook", "StepCounterHook", "LoggingTensorHook", "scheduled function hook"],
)
async def test_every_hook_with_per_session_state_is_refused(make: Any) -> None:
    """The built-in hooks with state (timers, counters, triggers) serve one open session."""
    hook = make()
    async with MonitoredSession(ScriptedCreator({"x": 1}), [hook]):
        with pytest.raises(RuntimeError, match=r"already serves another monitored session"):
            async with MonitoredSession(ScriptedCreator({"x": 1}), [hook]):
                pass  # pragma: no cover


@pytest.mark.parametrize(
    "make",
    [lambda: NanTensorHook("x"), lambda: on_after_run(_noop), RecordingHook],
    ids=["NanTensorHook", "function hook", "user hook"],
)
async def test_hooks_without_per_session_state_may_serve_two_sessions(make: Any) -> None:
    """A hook with nothing per session (and any hook of yours) may serve two sessions at once."""
    hook = make()
    async with (
        MonitoredSession(ScriptedCreator({"x": 1}), [hook]) as first,
        MonitoredSession(ScriptedCreator({"x": 1}), [hook]) as second,
    ):
        assert await first.run("x") == 1 and await second.run("x") == 1


async def test_two_entries_at_once_cannot_both_win() -> None:
    """Two tasks entering sessions sharing a hook at the same time: exactly one is refused."""
    hook = StopAtStepHook(num_steps=5)
    outcomes: list[str] = []

    async def enter(release: anyio.Event) -> None:
        try:
            async with MonitoredSession(ScriptedCreator({"x": 1}), [hook]):
                outcomes.append("entered")
                await release.wait()
        except RuntimeError as error:
            assert "already serves" in str(error)
            outcomes.append("refused")
            release.set()

    release = anyio.Event()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(enter, release)
            tg.start_soon(enter, release)
    assert sorted(outcomes) == ["entered", "refused"]


async def test_a_hook_of_yours_can_ask_for_the_same_check() -> None:
    """A class attribute serves_one_session = True makes a hook of yours serve one open session."""

    class PerSession(hookrun.SessionRunHook):
        serves_one_session = True

    hook = PerSession()
    async with MonitoredSession(ScriptedCreator({"x": 1}), [hook]):
        with pytest.raises(RuntimeError, match=r"hook <.*PerSession object at .*> already serves"):
            await MonitoredSession(ScriptedCreator({"x": 1}), [hook]).__aenter__()


async def test_a_frozen_hook_can_be_claimed_and_a_slotted_one_is_told_what_to_add() -> None:
    """The record of the session served is no field: a frozen dataclass hook takes it; a hook
    whose __slots__ leave no room gets a TypeError naming the slot to add."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Frozen(hookrun.SessionRunHook):
        serves_one_session = True

    class Slotted:
        __slots__ = ()
        serves_one_session = True

        def after_run(self, run_context: Any, run_values: Any) -> None:
            """A hook method: the object is a hook."""

    async with MonitoredSession(ScriptedCreator({"x": 1}), [Frozen()]) as session:
        assert await session.run("x") == 1
    with pytest.raises(TypeError, match=r"leave no room .*: add '_hookrun_serving' to them"):
        await MonitoredSession(ScriptedCreator({"x": 1}), [Slotted()]).__aenter__()
