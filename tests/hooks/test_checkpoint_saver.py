"""CheckpointSaverHook: TensorFlow's save timing and listener counts, background writes
that never hold up a step, a save due during a write waits for it, best-k retention."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import Checkpointer, MonitoredSession, StepSession
from hookrun._checkpoint import _checkpointer
from hookrun.hooks import CheckpointSaverHook, CheckpointSaverListener, StopAtStepHook

from ._support import FakeClock

pytestmark = pytest.mark.anyio


class CountingListener(CheckpointSaverListener):
    """Counts every call; ``after_save`` answers ``stop``."""

    def __init__(self, stop: bool = False) -> None:
        self.counts: Counter[str] = Counter()
        self.steps: list[int] = []
        self.stop = stop

    def begin(self) -> None:
        self.counts["begin"] += 1

    async def before_save(self, session: Any, global_step_value: int) -> None:
        self.counts["before_save"] += 1

    def after_save(self, session: Any, global_step_value: int) -> bool:
        self.counts["after_save"] += 1
        self.steps.append(global_step_value)
        return self.stop

    def end(self, session: Any, global_step_value: int) -> None:
        self.counts["end"] += 1


class Model:
    """A checkpointable session: its state is a weight that grows every step."""

    def __init__(self) -> None:
        self.weight = 0
        self.session = StepSession(self.step)

    async def step(self, feed_dict: Mapping[Any, Any]) -> dict[str, Any]:
        self.weight += 1
        return {"loss": 10.0 / self.weight, "weight": self.weight}

    async def run(self, *args: Any) -> Any:
        return await self.session.run(*args)

    def state_dict(self) -> dict[str, int]:
        return {"weight": self.weight}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weight = state["weight"]


async def run_steps(hooks: list[object], steps: int, model: Model | None = None) -> Model:
    model = model or Model()

    async def create() -> Model:
        return model

    with anyio.fail_after(20):
        async with MonitoredSession(create, hooks) as session:
            for _ in range(steps):
                await session.run()
    return model


async def test_listener_counts_in_a_monitored_session(tmp_path: Path) -> None:
    """save_steps=1 over 2 steps: saves at creation and after each step; end does not save again."""
    listener = CountingListener()
    hook = CheckpointSaverHook(tmp_path, save_steps=1, listeners=[listener])
    await run_steps([hook], 2)
    assert listener.counts == {"begin": 1, "before_save": 3, "after_save": 3, "end": 1}
    assert listener.steps == [0, 1, 2]


async def test_save_secs_saves_at_creation_and_at_end(tmp_path: Path) -> None:
    """save_secs with no time passing: one save at creation, one at end (TensorFlow's counts)."""
    listener = CountingListener()
    hook = CheckpointSaverHook(tmp_path, save_secs=2, listeners=[listener], clock=FakeClock())
    await run_steps([hook], 1)
    assert listener.counts == {"begin": 1, "before_save": 2, "after_save": 2, "end": 1}
    assert listener.steps == [0, 1]


async def test_save_secs_saves_when_the_interval_passed(tmp_path: Path) -> None:
    """A time-based hook saves after the run at which its interval has passed."""
    clock = FakeClock()
    listener = CountingListener()
    hook = CheckpointSaverHook(tmp_path, save_secs=10, listeners=[listener], clock=clock)

    async def create() -> StepSession:
        async def step(feed_dict: Mapping[Any, Any]) -> None:
            clock.advance(4)

        return StepSession(step)

    with anyio.fail_after(20):
        async with MonitoredSession(create, [hook]) as session:
            for _ in range(6):
                await session.run()
    assert listener.steps == [0, 3, 6]


async def test_save_steps_saves_periodically_and_at_end(tmp_path: Path) -> None:
    """save_steps=2 over 5 steps saves steps 0, 2, 4 and 5 (at end)."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=None)
    await run_steps([CheckpointSaverHook(save_steps=2, checkpointer=checkpointer)], 5)
    assert [info.step for info in checkpointer.all()] == [0, 2, 4, 5]


async def test_checkpoint_holds_the_step_the_session_and_the_hooks(tmp_path: Path) -> None:
    """A checkpoint holds the global step, the session's state and every checkpointable hook."""
    stop = StopAtStepHook(num_steps=10)
    hook = CheckpointSaverHook(tmp_path, save_steps=100, checkpointables=[stop])
    await run_steps([stop, hook], 3)
    restored = await Checkpointer(tmp_path).restore()
    assert restored is not None and restored.step == 3
    assert restored.state == {
        "global_step": 3,
        "session": {"weight": 3},
        "hooks": {"StopAtStepHook": {"num_steps": 10, "last_step": 10}},
    }


async def test_listener_stops_training_in_after_save(tmp_path: Path) -> None:
    """A listener returning True from after_save stops the session; at creation it is ignored."""
    listener = CountingListener(stop=True)
    hook = CheckpointSaverHook(tmp_path, save_steps=1, listeners=[listener])

    async def create() -> Model:
        return Model()

    with anyio.fail_after(20):
        async with MonitoredSession(create, [hook]) as session:
            await hook.wait_saved()
            assert not session.should_stop()
            await session.run()
            await hook.wait_saved()
            assert session.should_stop()
    assert listener.steps == [0, 1]


class BlockedFsync:
    """Replaces os.fsync in the checkpoint writer: the first call waits until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.real = os.fsync
        monkeypatch.setattr(os, "fsync", self)

    def __call__(self, fd: int) -> None:
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(10)
        self.real(fd)

    async def wait_entered(self) -> None:
        await anyio.to_thread.run_sync(self.entered.wait)


async def test_steps_run_while_a_checkpoint_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A background write does not hold up the next steps."""
    hook = CheckpointSaverHook(tmp_path, save_steps=100)
    blocked = BlockedFsync(monkeypatch)

    async def create() -> Model:
        return Model()

    with anyio.fail_after(20):
        async with MonitoredSession(create, [hook]) as session:
            await blocked.wait_entered()  # the creation save is inside its fsync
            for _ in range(3):
                await session.run()
            assert not blocked.release.is_set()
            blocked.release.set()
    assert [info.step for info in hook.checkpointer.all()] == [0, 3]


async def test_a_save_due_during_a_write_waits_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With save_steps=1 the first step's save waits for the creation save still being written."""
    hook = CheckpointSaverHook(tmp_path, save_steps=1, max_to_keep=None)
    blocked = BlockedFsync(monkeypatch)
    finished: list[int] = []

    async def create() -> Model:
        return Model()

    with anyio.fail_after(20):
        async with MonitoredSession(create, [hook]) as session:
            await blocked.wait_entered()

            async def step() -> None:
                await session.run()
                finished.append(1)

            async with anyio.create_task_group() as tg:
                tg.start_soon(step)
                await anyio.wait_all_tasks_blocked()
                assert finished == []
                blocked.release.set()
            assert finished == [1]
    assert [info.step for info in hook.checkpointer.all()] == [0, 1]


async def test_a_failed_background_write_stops_the_session_and_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails in the background stops the session and is raised when it closes."""
    hook = CheckpointSaverHook(tmp_path, save_steps=1)

    def broken(*args: Any, **kwargs: Any) -> int:
        raise OSError(28, "No space left on device")

    async def create() -> Model:
        return Model()

    monkeypatch.setattr(_checkpointer, "write_file", broken)
    with anyio.fail_after(20), pytest.raises(OSError, match="No space left"):
        async with MonitoredSession(create, [hook]) as session:
            await hook.wait_saved()
            assert session.should_stop()


async def test_monitor_and_keep_best_keep_the_best_checkpoints(tmp_path: Path) -> None:
    """monitor="loss" with keep_best=1 keeps the lowest-loss checkpoint next to the newest."""
    losses = iter([3.0, 1.0, 2.0, 4.0, 5.0])

    async def create() -> StepSession:
        async def step(feed_dict: Mapping[Any, Any]) -> dict[str, float]:
            return {"loss": next(losses)}

        return StepSession(step)

    hook = CheckpointSaverHook(tmp_path, save_steps=1, monitor="loss", keep_best=1, max_to_keep=1)
    with anyio.fail_after(20):
        async with MonitoredSession(create, [hook]) as session:
            for _ in range(5):
                await session.run()
    kept = hook.checkpointer.all()
    assert [(info.step, info.metric) for info in kept] == [(2, 1.0), (5, 5.0)]


def test_validation_messages(tmp_path: Path) -> None:
    """Bad arguments fail at construction with messages naming them."""
    with pytest.raises(ValueError, match=r"Can not provide both every_secs and every_steps\."):
        CheckpointSaverHook(tmp_path, save_secs=1, save_steps=1)
    with pytest.raises(ValueError, match=r"Either every_secs or every_steps should be provided\."):
        CheckpointSaverHook(tmp_path)
    with pytest.raises(ValueError, match="keep_best ranks checkpoints by a metric; give monitor="):
        CheckpointSaverHook(tmp_path, save_steps=1, keep_best=2)
    with pytest.raises(ValueError, match="needs checkpoint_dir or checkpointer"):
        CheckpointSaverHook(save_steps=1)
    with pytest.raises(ValueError, match="is not the checkpointer's directory"):
        CheckpointSaverHook(tmp_path / "a", save_steps=1, checkpointer=Checkpointer(tmp_path / "b"))
    with pytest.raises(TypeError, match="listener 42 has none of begin"):
        CheckpointSaverHook(tmp_path, save_steps=1, listeners=[42])
    with pytest.raises(ValueError, match="set keep_best and mode on the Checkpointer"):
        CheckpointSaverHook(save_steps=1, checkpointer=Checkpointer(tmp_path), monitor="m", keep_best=2)


def test_unwritable_directory_fails_at_construction(tmp_path: Path) -> None:
    """The hook's directory is checked when the hook is built."""
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="cannot be written"):
        CheckpointSaverHook(tmp_path / "file" / "ckpt", save_steps=1)


async def test_a_session_cancelled_mid_write_leaves_no_partial_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while a save is being written (no grace period), nothing half-written appears."""
    checkpointer = Checkpointer(tmp_path)
    await checkpointer.save(5, {"global_step": 5})
    hook = CheckpointSaverHook(save_steps=1, checkpointer=checkpointer)
    blocked = BlockedFsync(monkeypatch)

    async def create() -> Model:
        return Model()

    async def run(scope: anyio.CancelScope) -> None:
        with scope:
            async with MonitoredSession(create, [hook], stop_grace_period=0):
                await anyio.sleep_forever()

    scope = anyio.CancelScope()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, scope)
            await blocked.wait_entered()  # the creation save of step 0 is inside its fsync
            scope.cancel()
            await anyio.wait_all_tasks_blocked()  # the write was told to stop
            blocked.release.set()
    assert sorted(os.listdir(tmp_path)) == ["ckpt-5", "index.json"]
    assert hookrun.latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-5")


class Tally(hookrun.SessionRunHook):
    """A checkpointable hook with async state methods and a chosen key."""

    checkpoint_key = "tally"

    def __init__(self) -> None:
        self.count = 0

    def after_run(self, run_context: hookrun.SessionRunContext, run_values: hookrun.SessionRunValues) -> None:
        self.count += 1

    async def state_dict(self) -> dict[str, int]:
        return {"count": self.count}

    async def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.count = state["count"]


async def test_hooks_inside_sequential_and_custom_keys_are_saved(tmp_path: Path) -> None:
    """Members of sequential() are saved; checkpoint_key names a hook; async state_dict works."""
    tally, stop = Tally(), StopAtStepHook(last_step=50)
    combined = hookrun.sequential(stop, tally)
    hook = CheckpointSaverHook(tmp_path, save_steps=100, checkpointables=[combined])
    await run_steps([combined, hook], 2)
    restored = await Checkpointer(tmp_path).restore()
    assert restored is not None
    assert restored.state["hooks"] == {"StopAtStepHook": {"num_steps": None, "last_step": 50}, "tally": {"count": 2}}


async def test_a_state_dict_that_is_not_a_mapping_is_named(tmp_path: Path) -> None:
    """A hook whose state_dict returns a list fails the save with a TypeError naming it."""

    class Bad(hookrun.SessionRunHook):
        def after_run(self, run_context: Any, run_values: Any) -> None:
            pass

        def state_dict(self) -> list[int]:
            return [1]

        def load_state_dict(self, state: Any) -> None:
            pass

    bad = Bad()
    hook = CheckpointSaverHook(tmp_path, save_steps=1, checkpointables=[bad])
    with pytest.raises(TypeError, match=r"hook 'Bad'.*state_dict\(\) must return a mapping, got list"):
        await run_steps([bad, hook], 1)


def test_two_objects_with_one_key_are_refused(tmp_path: Path) -> None:
    """Two checkpointables claiming one checkpoint_key is a ValueError naming the key."""
    hook = CheckpointSaverHook(tmp_path, save_steps=1, checkpointables=[Tally(), Tally()])
    with pytest.raises(ValueError, match="share the checkpoint key 'tally'"):
        anyio.run(hook.begin)


async def test_a_save_of_a_lower_step_than_saved_before_is_refused(tmp_path: Path) -> None:
    """The global step went back mid-run: the save due is refused saying why, and the
    latest checkpoint stays the highest step saved."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=None)
    counter = hookrun.LocalStepCounter()

    async def create() -> StepSession:
        return StepSession(lambda feeds: {})

    with anyio.fail_after(20), pytest.raises(ValueError, match=r"refusing to save step 2 after this run saved step 6: the global step went back"):
        async with MonitoredSession(create, [CheckpointSaverHook(save_steps=2, checkpointer=checkpointer)], step_counter=counter) as session:
            for _ in range(6):
                await session.run()
            await counter.set(1)  # a shared counter restarted behind the session's back
            await session.run()
    assert [info.step for info in checkpointer.all()] == [0, 2, 4, 6]
    latest = await checkpointer.latest()
    assert latest is not None and latest.step == 6
