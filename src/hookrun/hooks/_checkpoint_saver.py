"""``CheckpointSaverHook``: save the session's checkpoint every N steps or seconds, and
``CheckpointSaverListener``: code run around each save.

TensorFlow's timing: a save when the session is created (and re-created), one
whenever the timer fires after a run, and one at ``end`` unless that step was
just saved. Unlike TensorFlow, the save at creation is skipped when the newest
valid checkpoint already is of the current step: the one the session was just
restored from is not rewritten (nor its metric forgotten). Each save snapshots the state while the hook's ``after_run`` (or
``after_create_session``) awaits — ``state_dict`` calls and encoding, the
latter in a worker thread — then writes it in the background, as a task of the
session's coordinator, so the next steps run while the file is written. A save
due while the previous one is still writing waits for it first. The save at
``end`` is written before ``end`` returns. A failed background write is
recorded in the coordinator, so it stops the session and is raised when the
session closes. A run never saves a lower step than it saved before: that
save is refused with a ``ValueError`` saying why (the global step went back).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, Literal

import anyio
import anyio.lowlevel

from .._checkpoint._checkpointable import (
    check_session_state,
    checkpointables,
    collect_state,
    is_checkpointable,
)
from .._checkpoint._checkpointer import Checkpointer, EncodedState
from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._session._serving import served_hooks
from .._timer import Clock, SecondOrStepTimer
from .._validate import check_file_name, check_flag, check_path
from ._common import call_maybe_async, check_timer_args, fields, logger, step_counter_of

__all__ = ["CheckpointSaverHook", "CheckpointSaverListener"]


class CheckpointSaverListener:
    """Called around the saves of a :class:`CheckpointSaverHook` (each method may be async).

    ``after_save`` returning a true value asks the session to stop (ignored for
    the save made when a session is created).
    """

    def begin(self) -> Any:
        """Called once, from the hook's ``begin``."""

    def before_save(self, session: Any, global_step_value: int) -> Any:
        """Called before the state of ``global_step_value`` is taken."""

    def after_save(self, session: Any, global_step_value: int) -> Any:
        """Called once that checkpoint is durable; a true value requests stop."""

    def end(self, session: Any, global_step_value: int) -> Any:
        """Called once, at the hook's ``end``, after its last save."""


class CheckpointSaverHook(SessionRunHook):
    """Saves checkpoints of the global step, the session's state (if it has ``state_dict``),
    every checkpointable hook of the monitored session it is given to, and every
    checkpointable object in ``checkpointables`` (objects that are not hooks): the
    objects a ``ChiefSessionCreator`` given the same ``checkpointables`` restores.

    Exactly one of ``save_secs`` / ``save_steps`` (TensorFlow's messages). Files
    go to ``checkpoint_dir`` as ``<checkpoint_basename>-<step>`` through a
    :class:`hookrun.Checkpointer` keeping ``max_to_keep`` recent ones, or
    through the ``checkpointer`` given. With ``monitor`` (a fetch key), a
    checkpoint's metric is the value fetched by the run that reached its step
    (none if that run fetched none, as at a save at ``end`` after the last
    fetch: such a checkpoint never counts as a best one), and ``keep_best``
    keeps that many best ones (lowest for ``mode="min"``, highest for
    ``"max"``; of equal metrics, the older) next to the ``max_to_keep`` newest.
    ``wait_saved()`` waits for a background write.

    Within a run (from ``begin`` to ``end``) the steps saved only go forward: a
    save due at a lower step than one saved before raises ``ValueError`` and
    stops the session, rather than make an older step the latest checkpoint (a
    restart from it would repeat every step in between). It means the global
    step went back, for example a shared counter that was lost and restarted.

    ``restore_best=True`` (Keras' ``restore_best_weights``; needs ``monitor`` and
    ``keep_best``) hands back the best state: at ``end``, after the last save,
    the session's state is loaded from ``checkpointer.best()`` (the global
    step and the hooks keep their last values); ``restored_step`` is that
    checkpoint's step.

    Args:
        checkpoint_dir: Where checkpoints go, unless ``checkpointer`` is given.
        save_secs: Seconds between checkpoints.
        save_steps: Steps between checkpoints (exactly one of the two).
        checkpointer: A ``Checkpointer`` to save with, instead of one over
            ``checkpoint_dir``.
        checkpoint_basename: The files' name, ``<checkpoint_basename>-<step>``.
        listeners: ``CheckpointSaverListener`` objects called around each save.
        monitor: A fetch key whose value is each checkpoint's metric. ``None``: none.
        mode: Whether the best metric is the lowest (``"min"``) or the highest (``"max"``).
        keep_best: How many best checkpoints by ``monitor`` to keep. ``None``: none.
        checkpointables: More ``Checkpointable`` objects (not hooks) saved with every
            checkpoint.
        max_to_keep: How many of the newest checkpoints to keep. ``None``: all.
        restore_best: At ``end``, load the session's state from the best checkpoint
            kept (needs ``monitor`` and ``keep_best``).
        clock: A function of no arguments returning seconds, for ``save_secs``. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        save_secs: float | None = None,
        save_steps: int | None = None,
        checkpointer: Checkpointer | None = None,
        checkpoint_basename: str = "ckpt",
        listeners: Iterable[object] = (),
        monitor: Hashable | None = None,
        mode: Literal["min", "max"] = "min",
        keep_best: int | None = None,
        *,
        checkpointables: Iterable[object] = (),
        max_to_keep: int | None = 5,
        restore_best: bool = False,
        clock: Clock | None = None,
    ) -> None:
        check_timer_args("CheckpointSaverHook", "save_secs", save_secs, "save_steps", save_steps)
        check_flag("CheckpointSaverHook: restore_best", restore_best)
        check_path("CheckpointSaverHook: checkpoint_dir", checkpoint_dir, optional=True)
        check_file_name("CheckpointSaverHook: checkpoint_basename", checkpoint_basename)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps, clock=clock)
        if keep_best is not None and monitor is None:
            raise ValueError("CheckpointSaverHook: keep_best ranks checkpoints by a metric; give monitor=")
        self.checkpointer = _checkpointer(
            checkpoint_dir, checkpointer, checkpoint_basename, max_to_keep, mode, keep_best
        )
        if restore_best and (monitor is None or not self.checkpointer.retention.keep_best):
            raise ValueError(
                "CheckpointSaverHook: restore_best hands back the best checkpoint, which needs "
                "monitor= and keep_best= of at least 1 (so that the best one is kept)"
            )
        self.monitor = monitor
        self.restore_best = restore_best
        self.restored_step: int | None = None
        self._listeners = tuple(listeners)
        for listener in self._listeners:
            if not any(callable(getattr(listener, name, None)) for name in _LISTENER_METHODS):
                raise TypeError(
                    f"CheckpointSaverHook: listener {listener!r} has none of {', '.join(_LISTENER_METHODS)}"
                )
        self._sources = tuple(checkpointables)
        self._hooks: tuple[object, ...] = ()  # the monitored session's (``bind_session``)
        #: With steps in flight, the raw sessions of the lanes now (``bind_lanes``).
        self._lanes: Callable[[], Sequence[object]] | None = None
        self._objects: dict[str, object] = {}
        self._request = None if monitor is None else SessionRunArgs(monitor)
        self._metric: float | None = None
        self._metric_step: int | None = None  # the step ``_metric`` was fetched at
        self._coord: Any = None
        self._writing: anyio.Event | None = None
        self.last_saved_step: int | None = None
        self._highest_saved: int | None = None  # the highest step this run saved (``begin`` resets it)
        #: Each lane's session state as this run last saved it (``begin`` resets it).
        self._lane_states: list[Any] | None = None

    def __repr__(self) -> str:
        return f"CheckpointSaverHook({self.checkpointer.directory!r}, {self._timer!r})"

    def bind_lanes(self, lanes: Callable[[], Sequence[object]]) -> None:
        """Called once by a monitored session with steps in flight: ``lanes()`` gives the
        raw session of each lane (``None`` where one has none), so that every checkpoint
        keeps each lane's session state, not only the one whose step saved it."""
        self._lanes = lanes

    def bind_session(self, hooks: Sequence[object], step_counter: object) -> None:
        """Called once by the monitored session this hook is given to: its ``hooks`` are
        saved with every checkpoint, before ``checkpointables`` (the order, and so the
        keys, a ``ChiefSessionCreator`` restores them by)."""
        self._hooks = tuple(hooks)

    async def begin(self) -> None:
        """Restart the timer, find the checkpointable objects, call every listener's ``begin``."""
        self._timer.reset()
        self._highest_saved = None
        self._lane_states = None
        sources = (*served_hooks(self, self._hooks), *self._sources)  # those of the session entered
        self._objects = {key: obj for key, obj in checkpointables(sources).items() if obj is not self}
        for listener in self._listeners:
            await _notify(listener, "begin")

    async def after_create_session(self, session: object, coord: object) -> None:
        """Save at the current step, unless the newest valid checkpoint is of that step (the
        one just restored); a listener's stop request is ignored here.

        With one lane every new session is adopted (a recovery restored the step counter
        with it). With steps in flight (several lanes, one coordinator), the hook keeps the
        coordinator it has while that one runs: another lane's new session is neither
        adopted nor saved (its state was just restored from an older checkpoint, and the
        lanes still running are ahead)."""
        current = self._coord
        if self._lanes is not None and current is not None and not getattr(current, "should_stop", lambda: True)():
            return  # another lane's session: the coordinator in use still runs
        if self.restore_best and not is_checkpointable(session):
            raise TypeError(
                f"CheckpointSaverHook: restore_best loads the best state into the session, but "
                f"{session!r} has no state_dict() and load_state_dict()"
            )
        await self.wait_saved()  # a save still under way (the coordinator outlives a recovery)
        self._coord, self._writing = coord, None
        self._metric = self._metric_step = None  # fetched from a session that is gone
        counter = step_counter_of(coord)
        step = 0 if counter is None else await counter.get()
        latest = await self.checkpointer.latest()
        if latest is not None and latest.step == step:
            self.last_saved_step = step
        else:
            await self._save(session, step, background=True, may_stop=False)
        self._timer.update_last_triggered_step(step)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Fetch the monitored metric, if any."""
        return self._request

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Save when the timer fires for the step this run reached."""
        step = run_values.global_step
        if self.monitor is not None and run_values.results is not None:
            self._metric, self._metric_step = _as_metric(self.monitor, run_values.results), step
        if not self._timer.should_trigger_for_step(step):
            return
        self._timer.update_last_triggered_step(step)
        await self._save(run_context.session, step, background=True, may_stop=True)

    async def end(self, session: object) -> None:
        """Save the last step unless just saved, hand back the best state if asked, then call
        every listener's ``end`` (which sees that state)."""
        await self.wait_saved()
        counter = step_counter_of(self._coord)
        if counter is not None:
            step = await counter.get()
        else:
            step = self.last_saved_step if self.last_saved_step is not None else 0
        if step != self.last_saved_step:
            await self._save(session, step, background=False, may_stop=False)
        if self.restore_best:
            await self._restore_best(session, step)
        for listener in self._listeners:
            await _notify(listener, "end", session, step)

    async def on_exception(self, session: object, exception: BaseException) -> None:
        """Save nothing more and let go of the failed session's coordinator: a write still in
        flight is finished or stopped by that coordinator as it closes (a checkpoint file is
        written whole or not at all); listeners' ``end`` is not called."""
        self._coord, self._writing = None, None

    async def _restore_best(self, session: object, step: int) -> None:
        """Load the session's state from the best checkpoint; a corrupt file is raised."""
        best = self.checkpointer.best()
        if best is None:
            logger.warning(
                "CheckpointSaverHook: no checkpoint has a value of %r; the session keeps its last state",
                self.monitor, extra=fields(step, "CheckpointSaverHook", "end"),
            )
            return
        restored = await self.checkpointer.restore(best.path)
        assert restored is not None  # an explicit path raises rather than return None
        check_session_state(restored.state, best.path)
        if "session" not in restored.state:
            logger.warning(
                "CheckpointSaverHook: the best checkpoint %s holds no session state; the session "
                "keeps its last state", best.path, extra=fields(step, "CheckpointSaverHook", "end"),
            )
            return
        await call_maybe_async(session.load_state_dict, restored.state["session"])  # type: ignore[attr-defined]
        self.restored_step = best.step
        logger.info(
            "restored the session state of the best checkpoint %s (%r = %s)",
            best.path, self.monitor, best.metric, extra=fields(step, "CheckpointSaverHook", "end"),
        )

    async def wait_saved(self) -> None:
        """Wait until the checkpoint being written in the background (if any) is durable."""
        writing = self._writing
        if writing is not None and not getattr(self._coord, "joined", False):
            await writing.wait()

    async def _save(self, session: object, step: int, *, background: bool, may_stop: bool) -> None:
        highest = self._highest_saved
        if highest is not None and step < highest:
            raise ValueError(
                f"{self!r}: refusing to save step {step} after this run saved step {highest}: the "
                "global step went back, and the lower checkpoint would become the latest (a restart "
                "from it would repeat every step in between)"
            )
        self._highest_saved = step
        await self.wait_saved()
        for listener in self._listeners:
            await _notify(listener, "before_save", session, step)
        lanes = None if self._lanes is None else self._lanes()
        state = await collect_state(step, session, self._objects, lanes)
        if lanes is not None:
            self._lane_states = keep_lanes_being_recreated(state, lanes, self._lane_states)
        encoded = await self.checkpointer.encode(state)
        # The encoding thread is waited for even when cancelled: a cancellation that came
        # meanwhile (it may have closed the coordinator) is raised here, before anything starts.
        await anyio.lowlevel.checkpoint_if_cancelled()
        metric = self._metric if self._metric_step == step else None  # fetched at this very step
        self.last_saved_step = step
        if not background or self._coord is None:
            await self._write(session, step, encoded, metric, may_stop, None, None)
            return
        self._writing = done = anyio.Event()
        try:
            self._coord.start_soon(
                self._write, session, step, encoded, metric, may_stop, done, self._coord,
                name=f"CheckpointSaverHook save of step {step}",
            )
        except BaseException:
            done.set()
            raise

    async def _write(
        self, session: object, step: int, encoded: EncodedState, metric: float | None,
        may_stop: bool, done: anyio.Event | None, coord: Any,
    ) -> None:
        try:
            info = await self.checkpointer.write(step, encoded, metric=metric)
            logger.debug("saved checkpoint %s", info.path, extra=fields(step, "CheckpointSaverHook"))
            stop = False
            for listener in self._listeners:
                if await _notify(listener, "after_save", session, step):
                    stop = True
            if stop and may_stop and coord is not None:
                logger.info(
                    "a checkpoint listener requested stop after saving step %d", step,
                    extra=fields(step, "CheckpointSaverHook"),
                )
                coord.request_stop()
        finally:
            if done is not None:
                done.set()


_LISTENER_METHODS = ("begin", "before_save", "after_save", "end")


async def _notify(listener: object, method: str, *args: object) -> Any:
    fn = getattr(listener, method, None)
    return None if fn is None else await call_maybe_async(fn, *args)


def _as_metric(key: Hashable, value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"CheckpointSaverHook: the monitored value {key!r} is not a number: {value!r}") from None


def _checkpointer(
    checkpoint_dir: str | os.PathLike[str] | None,
    checkpointer: Checkpointer | None,
    basename: str,
    max_to_keep: int | None,
    mode: Literal["min", "max"],
    keep_best: int | None,
) -> Checkpointer:
    if checkpointer is None:
        if checkpoint_dir is None:
            raise ValueError("CheckpointSaverHook needs checkpoint_dir or checkpointer")
        return Checkpointer(
            checkpoint_dir, max_to_keep=max_to_keep, keep_best=keep_best, mode=mode, basename=basename
        )
    if not isinstance(checkpointer, Checkpointer):
        raise TypeError(f"CheckpointSaverHook: checkpointer must be a hookrun.Checkpointer, got {checkpointer!r}")
    if checkpoint_dir is not None and os.path.abspath(os.fspath(checkpoint_dir)) != checkpointer.directory:
        raise ValueError(
            f"CheckpointSaverHook: checkpoint_dir {os.fspath(checkpoint_dir)!r} is not the "
            f"checkpointer's directory {checkpointer.directory!r}"
        )
    retention = checkpointer.retention
    if keep_best is not None and (retention.keep_best != keep_best or retention.mode != mode):
        raise ValueError(
            "CheckpointSaverHook: with your own checkpointer, set keep_best and mode on the "
            f"Checkpointer (it has keep_best={retention.keep_best}, mode={retention.mode!r})"
        )
    return checkpointer


def keep_lanes_being_recreated(state: dict[str, Any], lanes: Sequence[object], last: list[Any] | None) -> list[Any] | None:
    """A lane with no session now is being re-created: the checkpoint keeps its state as
    this run last saved it (what the new session restores from), never ``None`` in its
    place. The lanes' states as saved now (or ``last``, when none was kept)."""
    saved = state.get("lanes")
    if last is not None and (saved is None or len(saved) == len(last)):
        saved = saved if saved is not None else [None] * len(lanes)
        for index, raw in enumerate(lanes):
            if raw is None and saved[index] is None:
                saved[index] = last[index]
        if any(lane is not None for lane in saved):
            state["lanes"] = saved
            if "session" not in state and saved[0] is not None:
                state["session"] = saved[0]
    return state.get("lanes", last)
