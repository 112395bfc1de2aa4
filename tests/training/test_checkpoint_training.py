"""Restoring on (re-)creation and MonitoredTrainingSession: TensorFlow's assembly, defaults,
recovery from the last checkpoint, and StopAtStepHook across restarts."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import (
    AbortedError,
    Checkpointer,
    ChiefSessionCreator,
    LocalStepCounter,
    MonitoredSession,
    MonitoredTrainingSession,
    StepSession,
    WorkerSessionCreator,
)
from hookrun.hooks import (
    CheckpointSaverHook,
    EarlyStoppingHook,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)

pytestmark = pytest.mark.anyio


class Model:
    """A checkpointable session whose weight grows by one every step."""

    created = 0

    def __init__(self) -> None:
        Model.created += 1
        self.weight = 0
        self.closed = False

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.weight += 1
        produced = {"weight": self.weight, "loss": 1.0 / self.weight}
        return [produced[key] for key in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"weight": self.weight}

    async def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weight = state["weight"]

    async def aclose(self) -> None:
        self.closed = True


async def run_until_stop(session: MonitoredSession, limit: int = 100) -> int:
    steps = 0
    while not session.should_stop() and steps < limit:
        await session.run()
        steps += 1
    return steps


class Recorder(hookrun.SessionRunHook):
    """Counts begin calls."""

    def __init__(self) -> None:
        self.begins = 0

    def begin(self) -> None:
        self.begins += 1


async def test_saving_restoring_checkpoint(tmp_path: Path) -> None:
    """State checkpointed at the end is restored by a new session on the same directory."""
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path) as session:
        for _ in range(3):
            await session.run()
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path) as session:
        assert await session.step_counter.get() == 3
        assert await session.run("weight") == 4


async def test_save_checkpoint_steps(tmp_path: Path) -> None:
    """save_checkpoint_steps=2: checkpoints every two steps, and the last at end."""
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, save_checkpoint_steps=2) as session:
        for _ in range(5):
            await session.run()
    assert session.checkpointer is not None
    assert [info.step for info in session.checkpointer.all()] == [0, 2, 4, 5]


async def test_last_step_continues_after_a_restart(tmp_path: Path) -> None:
    """StopAtStepHook(last_step=3) stops at 3; restarted with last_step=5 it continues to 5."""
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, hooks=[StopAtStepHook(last_step=3)]) as s:
        assert await run_until_stop(s) == 3
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, hooks=[StopAtStepHook(last_step=5)]) as s:
        assert await run_until_stop(s) == 2
        assert await s.step_counter.get() == 5


async def test_num_steps_counts_from_the_restored_step_when_changed(tmp_path: Path) -> None:
    """num_steps=3 stops after 3; restored with num_steps=4 it runs 4 more (TensorFlow's test_num_steps)."""
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, hooks=[StopAtStepHook(num_steps=3)]) as s:
        assert await run_until_stop(s) == 3
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, hooks=[StopAtStepHook(num_steps=4)]) as s:
        assert await run_until_stop(s) == 4
        assert await s.step_counter.get() == 7


async def test_num_steps_target_survives_a_restart_of_the_same_run(tmp_path: Path) -> None:
    """A run with num_steps=6 interrupted at step 4 and restarted stops at 6, not 10."""
    checkpointer = Checkpointer(tmp_path)
    async with MonitoredTrainingSession(
        Model, checkpointer=checkpointer, save_checkpoint_steps=1, hooks=[StopAtStepHook(num_steps=6)]
    ) as s:
        for _ in range(4):
            await s.run()
        raise hookrun.OutOfRangeError("interrupted")  # a clean end at step 4
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, hooks=[StopAtStepHook(num_steps=6)]) as s:
        assert await run_until_stop(s) == 2


class AbortOnce(hookrun.SessionRunHook):
    """Raises AbortedError in before_run once, when the step reaches ``at``."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.raised = False

    def before_run(self, run_context: hookrun.SessionRunContext) -> None:
        if run_context.global_step == self.at and not self.raised:
            self.raised = True
            raise AbortedError("worker lost")


async def test_recover_and_retry_on_aborted_error(tmp_path: Path) -> None:
    """After an AbortedError the re-created session resumes from the last checkpoint."""
    Model.created = 0
    async with MonitoredTrainingSession(
        Model, checkpoint_dir=tmp_path, save_checkpoint_steps=1, hooks=[AbortOnce(at=3)],
        retry=hookrun.RetryPolicy(initial_delay=0, jitter=False),
    ) as session:
        answers = [await session.run("weight") for _ in range(5)]
        assert await session.step_counter.get() == 5
    assert answers == [1, 2, 3, 4, 5]
    assert Model.created == 2


async def test_hook_state_is_restored(tmp_path: Path) -> None:
    """EarlyStoppingHook's best value and step come back after a restart."""
    first = EarlyStoppingHook("loss", patience_steps=100)
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, hooks=[first]) as session:
        for _ in range(3):
            await session.run()
    again = EarlyStoppingHook("loss", patience_steps=100)
    async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, hooks=[again]) as session:
        assert (again.best, again.best_step) == (first.best, first.best_step) == (1 / 3, 3)


def test_default_hooks_in_tensorflow_order(tmp_path: Path) -> None:
    """Chief: chief-only hooks, step counter, summary saver, checkpoint saver, then user hooks."""
    chief_only, user = Recorder(), Recorder()
    session = MonitoredTrainingSession(
        Model, checkpoint_dir=tmp_path, hooks=[user], chief_only_hooks=[chief_only],
        summary_scalars=["loss"],
    )
    kinds = [type(hook) for hook in session.hooks]
    assert kinds == [Recorder, StepCounterHook, SummarySaverHook, CheckpointSaverHook, Recorder]
    assert session.hooks[0] is chief_only and session.hooks[-1] is user
    assert "every_secs=600" in repr(session.hooks[3])
    assert "every_steps=100" in repr(session.hooks[2])
    assert isinstance(session.session_creator, ChiefSessionCreator)


def test_non_chief_gets_only_user_hooks_and_a_worker_creator(tmp_path: Path) -> None:
    """A non-chief runs only the user's hooks and waits for the chief."""
    user = Recorder()
    session = MonitoredTrainingSession(
        Model, is_chief=False, checkpoint_dir=tmp_path, hooks=[user], chief_only_hooks=[Recorder()]
    )
    assert session.hooks == (user,)
    assert isinstance(session.session_creator, WorkerSessionCreator)
    assert session.session_creator.max_wait_secs == 7200


def test_no_directory_means_no_default_hooks() -> None:
    """Without checkpoint or summary directory only the given hooks run."""
    user = Recorder()
    assert MonitoredTrainingSession(Model, hooks=[user]).hooks == (user,)


@pytest.mark.parametrize(
    ("options", "kind"),
    [
        ({"save_checkpoint_secs": 10, "save_checkpoint_steps": 5}, "checkpoint"),
        ({"save_summaries_secs": 10, "save_summaries_steps": 5}, "summaries"),
    ],
)
def test_both_secs_and_steps_is_a_value_error(tmp_path: Path, options: dict[str, Any], kind: str) -> None:
    """Giving both the secs and the steps of one kind is a ValueError naming both."""
    with pytest.raises(ValueError, match=f"give save_{kind}_secs or save_{kind}_steps, not both"):
        MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, **options)


async def test_custom_saving_and_chief_only_begin_once(tmp_path: Path) -> None:
    """save_checkpoint_secs=0 disables checkpoints; chief-only hooks get exactly one begin."""
    chief_only = Recorder()
    async with MonitoredTrainingSession(
        Model, checkpoint_dir=tmp_path, chief_only_hooks=[chief_only], save_checkpoint_secs=0
    ) as session:
        await session.run()
    assert chief_only.begins == 1
    assert not any(isinstance(hook, CheckpointSaverHook) for hook in session.hooks)
    assert hookrun.latest_checkpoint(tmp_path) is None


class StepAtCreation(hookrun.SessionRunHook):
    """Records the global step each time a session is created."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    async def after_create_session(self, session: object, coord: hookrun.Coordinator) -> None:
        self.steps.append(await coord.step_counter.get())


async def test_chief_creator_with_a_plain_monitored_session(tmp_path: Path) -> None:
    """ChiefSessionCreator + CheckpointSaverHook wired by hand, no step counter passed: each
    restart restores the global step and the session, and resumes where it left off."""
    for expected in (1, 2, 3):
        seen = StepAtCreation()
        saver = CheckpointSaverHook(tmp_path, save_steps=1)
        async with MonitoredSession(ChiefSessionCreator(Model, tmp_path), [saver, seen]) as session:
            assert seen.steps == [expected - 1]
            assert await session.global_step() == expected - 1
            assert await session.run("weight") == expected


async def test_chief_creator_restores_the_bound_hooks(tmp_path: Path) -> None:
    """The creator restores the hooks of the session it is given to: a num_steps=6 run
    interrupted at step 4 and restarted stops at 6."""
    for runs, expected in ((4, 4), (100, 2)):
        stop = StopAtStepHook(num_steps=6)
        saver = CheckpointSaverHook(tmp_path, save_steps=1, checkpointables=[stop])
        async with MonitoredSession(ChiefSessionCreator(Model, tmp_path), [stop, saver]) as session:
            assert await run_until_stop(session, limit=runs) == expected
    assert await session.global_step() == 6


async def test_the_saver_saves_every_checkpointable_hook_of_its_session(tmp_path: Path) -> None:
    """A CheckpointSaverHook told nothing saves the hooks of the session it is given to
    (here StopAtStepHook's target), and the creator restores them: a num_steps=6 run
    interrupted at step 4 and restarted stops at 6."""
    for runs, expected in ((4, 4), (100, 2)):
        stop = StopAtStepHook(num_steps=6)
        saver = CheckpointSaverHook(tmp_path, save_steps=1)
        async with MonitoredSession(ChiefSessionCreator(Model, tmp_path), [stop, saver]) as session:
            assert await run_until_stop(session, limit=runs) == expected
        saved = await Checkpointer(tmp_path).restore()
        assert saved is not None
        assert set(saved.state["hooks"]) == {"StopAtStepHook"}
    assert await session.global_step() == 6


async def test_recovery_restores_the_step_counter_without_passing_it(tmp_path: Path) -> None:
    """An AbortedError after step 3, with the last checkpoint at step 2: the re-created
    session is restored to step 2 (counter and session), and the run goes on from there."""
    Model.created = 0
    seen = StepAtCreation()
    creator = ChiefSessionCreator(Model, tmp_path)
    hooks = [CheckpointSaverHook(tmp_path, save_steps=2), AbortOnce(at=3), seen]
    retry = hookrun.RetryPolicy(initial_delay=0, jitter=False)
    async with MonitoredSession(creator, hooks, retry=retry) as session:
        answers = [await session.run("weight") for _ in range(5)]
        assert await session.global_step() == 4  # step 3 was lost with the session, and redone
    assert seen.steps == [0, 2]
    assert answers == [1, 2, 3, 3, 4]
    assert creator.restored is not None and creator.restored.step == 2
    assert Model.created == 2


async def test_chief_creator_with_the_same_explicit_counter(tmp_path: Path) -> None:
    """step_counter= still works when it is the session's own counter."""
    await Checkpointer(tmp_path).save(4, {"global_step": 4, "session": {"weight": 4}})
    counter = LocalStepCounter()
    creator = ChiefSessionCreator(Model, tmp_path, step_counter=counter)
    async with MonitoredSession(creator, step_counter=counter) as session:
        assert counter.value == 4
        assert await session.run("weight") == 5


def test_chief_creator_refuses_another_explicit_counter(tmp_path: Path) -> None:
    """A creator made with one counter, given to a session counting with another: an error."""
    creator = ChiefSessionCreator(Model, tmp_path, step_counter=LocalStepCounter())
    with pytest.raises(ValueError, match="was made with step_counter="):
        MonitoredSession(creator, step_counter=LocalStepCounter())


def test_chief_creator_serves_one_step_counter(tmp_path: Path) -> None:
    """A creator bound to one session, given to a second with another counter: an error;
    a second session sharing the counter may use it."""
    counter = LocalStepCounter()
    creator = ChiefSessionCreator(Model, tmp_path)
    MonitoredSession(creator, step_counter=counter)
    MonitoredSession(creator, step_counter=counter)
    with pytest.raises(ValueError, match="already serves a monitored session"):
        MonitoredSession(creator)
    assert creator.step_counter is counter


async def test_unbound_chief_creator_needs_a_counter(tmp_path: Path) -> None:
    """create_session() called by hand, with no monitored session and no step_counter,
    is refused before creating anything; without a checkpoint to restore it needs none."""
    Model.created = 0
    with pytest.raises(RuntimeError, match="no step counter to restore the global step into"):
        await ChiefSessionCreator(Model, tmp_path).create_session()
    assert Model.created == 0
    assert isinstance(await ChiefSessionCreator(Model).create_session(), Model)


async def test_chief_creator_restores_an_explicit_path_first(tmp_path: Path) -> None:
    """checkpoint_path is restored by the first session; recovery uses the latest in the directory."""
    checkpointer = Checkpointer(tmp_path, max_to_keep=None)
    await checkpointer.save(1, {"global_step": 1, "session": {"weight": 10}, "hooks": {}})
    await checkpointer.save(2, {"global_step": 2, "session": {"weight": 20}, "hooks": {}})
    counter = LocalStepCounter()
    creator = ChiefSessionCreator(Model, tmp_path, tmp_path / "ckpt-1", step_counter=counter)
    first = await creator.create_session()
    assert first.weight == 10 and counter.value == 1
    second = await creator.create_session()
    assert second.weight == 20 and counter.value == 2


async def test_unclaimed_hook_state_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """State of a hook no longer present is logged as not restored, never silently dropped."""
    await Checkpointer(tmp_path).save(1, {"global_step": 1, "hooks": {"GoneHook": {"x": 1}}})
    creator = ChiefSessionCreator(Model, tmp_path, step_counter=LocalStepCounter())
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await creator.create_session()
    assert "'GoneHook', which no hook here claims" in caplog.text


async def test_corrupt_explicit_path_fails_before_creating(tmp_path: Path) -> None:
    """An explicit checkpoint_path that is corrupt raises; no session is created."""
    bad = tmp_path / "ckpt-9"
    bad.write_bytes(b"HKRNCKPT" + b"\0" * 100)
    Model.created = 0
    creator = ChiefSessionCreator(Model, checkpoint_path=bad, step_counter=LocalStepCounter())
    with pytest.raises(hookrun.CorruptCheckpointError, match="ckpt-9"):
        await creator.create_session()
    assert Model.created == 0


async def test_worker_waits_for_the_first_checkpoint(tmp_path: Path) -> None:
    """A worker creates its session once the chief wrote a valid checkpoint."""
    creator = WorkerSessionCreator(Model, checkpoint_dir=tmp_path, max_wait_secs=30)
    created: list[object] = []

    async def create() -> None:
        created.append(await creator.create_session())

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(create)
            await anyio.wait_all_tasks_blocked()
            assert created == []
            await Checkpointer(tmp_path).save(0, {"global_step": 0})
    assert len(created) == 1


async def test_worker_waits_for_a_ready_callable(tmp_path: Path) -> None:
    """ready=event.wait: the worker waits until the event is set, at every creation."""
    ready = anyio.Event()
    creator = WorkerSessionCreator(Model, ready=ready.wait)
    created: list[object] = []

    async def create() -> None:
        created.append(await creator.create_session())

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(create)
            await anyio.wait_all_tasks_blocked()
            assert created == []
            ready.set()
        await creator.create_session()
    assert len(created) == 1


async def test_worker_gives_up_after_max_wait_secs(tmp_path: Path) -> None:
    """No checkpoint within max_wait_secs is a TimeoutError saying what it waited for."""
    creator = WorkerSessionCreator(Model, checkpoint_dir=tmp_path, max_wait_secs=0.2)
    with anyio.fail_after(20), pytest.raises(TimeoutError, match=r"max_wait_secs=0.2s .*no valid checkpoint"):
        await creator.create_session()


def test_worker_validation() -> None:
    """Bad worker options are named."""
    with pytest.raises(ValueError, match="max_wait_secs must be a number of seconds > 0"):
        WorkerSessionCreator(Model, max_wait_secs=0)
    with pytest.raises(TypeError, match="ready must be an awaitable or a callable"):
        WorkerSessionCreator(Model, ready=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"WorkerSessionCreator\(factory=...\) must be a function of no arguments"):
        WorkerSessionCreator(None)  # type: ignore[arg-type]


async def test_session_state_with_step_session(tmp_path: Path) -> None:
    """A plain StepSession (not checkpointable) still has its step saved and restored."""
    async def create() -> StepSession:
        async def step(feed_dict: Mapping[Any, Any]) -> None:
            return None

        return StepSession(step)

    async with MonitoredTrainingSession(create, checkpoint_dir=tmp_path) as session:
        await session.run()
    async with MonitoredTrainingSession(create, checkpoint_dir=tmp_path) as session:
        assert await session.step_counter.get() == 1


async def test_summaries_go_to_the_summary_writer(tmp_path: Path) -> None:
    """summary_scalars are written every save_summaries_steps, global_step/sec every log_step_count_steps."""
    from ..hooks._support import ListWriter

    writer = ListWriter()
    async with MonitoredTrainingSession(
        Model, checkpoint_dir=tmp_path, summary_writer=writer, summary_scalars=["loss"],
        save_summaries_steps=2, log_step_count_steps=2,
    ) as session:
        for _ in range(4):
            await session.run()
    assert writer.steps("loss") == [1, 3]
    assert writer.steps("global_step/sec") == [3]


async def test_worker_awaits_a_ready_awaitable_once() -> None:
    """ready= an awaitable is awaited at the first creation only."""
    calls: list[int] = []

    async def chief_ready() -> None:
        calls.append(1)

    creator = WorkerSessionCreator(Model, ready=chief_ready())
    await creator.create_session()
    await creator.create_session()
    assert calls == [1]


async def test_worker_asks_a_ready_predicate_until_true() -> None:
    """ready= a plain predicate is asked again until it answers true."""
    answers = iter([False, False, True])
    creator = WorkerSessionCreator(Model, ready=lambda: next(answers))
    with anyio.fail_after(20):
        await creator.create_session()
    assert next(answers, "used up") == "used up"


async def test_a_restored_checkpoint_is_not_written_again(tmp_path: Path) -> None:
    """Restarting from a checkpoint does not rewrite it at creation (nor lose its metric)."""
    checkpointer = Checkpointer(tmp_path, keep_best=1, max_to_keep=1)
    async with MonitoredTrainingSession(Model, checkpointer=checkpointer, save_checkpoint_steps=1) as session:
        for _ in range(2):
            await session.run()
    before = checkpointer.all()
    async with MonitoredTrainingSession(Model, checkpointer=checkpointer, save_checkpoint_steps=1) as session:
        assert checkpointer.all() == before


async def create_model() -> Model:
    return Model()


def test_an_async_bind_session_is_a_clear_error() -> None:
    """bind_session is called synchronously when the session is constructed: one written
    with async def is a TypeError naming it, not a coroutine that is never awaited."""

    class AsyncBinder(hookrun.SessionRunHook):
        async def bind_session(self, hooks: object, step_counter: object) -> None:
            raise AssertionError("never run")

        def begin(self) -> None:
            pass

    with pytest.raises(TypeError, match=r"AsyncBinder\.bind_session returned an awaitable"):
        MonitoredSession(create_model, [AsyncBinder()])
