"""Session creators that know about checkpoints: ``ChiefSessionCreator`` restores
the latest valid checkpoint into every session it creates; ``WorkerSessionCreator``
waits until the chief is ready before creating one.

A monitored session asks its creator for a session at start and on every
recovery, so a restoring creator is how recovery resumes from the last
checkpoint: the step counter, the session's state and every checkpointable
hook are loaded before any hook's ``after_create_session`` runs. The monitored
session tells its creator which hooks and step counter it has by calling the
creator's ``bind_session(hooks, step_counter)``, once, when it is constructed;
a ``ChiefSessionCreator`` serves one step counter only.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio

from .._checkpoint._checkpointable import apply_state, check_session_state, checkpointables
from .._checkpoint._checkpointer import (
    Checkpointer,
    RestoredCheckpoint,
    check_basename,
    latest_checkpoint,
    read_checkpoint,
)
from .._checkpoint._codec import Codec, MsgpackCodec
from .._global_step import StepCounter
from .._log import fields, logger
from .._session._factories import call_factory, check_factory, name_of
from .._session._raw import SessionFactory
from .._validate import check_callable, check_number, check_path, check_step_counter

__all__ = ["ChiefSessionCreator", "WorkerSessionCreator"]


async def _aclose_quietly(session: object) -> None:
    close = getattr(session, "aclose", None)
    if close is None:
        return
    with anyio.CancelScope(shield=True):
        try:
            await close()
        except Exception as exc:
            logger().warning("error while closing a session: %r", exc, exc_info=exc)


class ChiefSessionCreator:
    """Creates sessions with ``factory`` (sync or async, no arguments) and restores each
    from a checkpoint.

    The first session is restored from ``checkpoint_path`` if given, else from
    the latest valid checkpoint in ``checkpoint_dir``; later ones (recovery)
    from the latest valid checkpoint in ``checkpoint_dir`` (or ``checkpoint_path``
    again when there is no directory). No checkpoint yet: the session starts
    fresh. Restoring sets the global step, loads the session's state if it is
    checkpointable, and the state of every checkpointable hook of the monitored
    session this creator is given to, and of every object in ``checkpointables``
    (more objects, saved by a ``CheckpointSaverHook`` given the same ones).
    ``checkpointer`` (or ``codec``) reads another format; with ``checkpoint_dir``
    only the files ``ckpt-<step>`` are considered, with ``checkpointer`` those
    of its basename.

    The monitored session binds the creator to its hooks and step counter when
    it is constructed (:meth:`bind_session`), so there is nothing to pass twice.
    ``step_counter`` is needed only to call :meth:`create_session` yourself,
    without a monitored session; given, it must be the session's counter. One
    creator serves one step counter: giving it to a second monitored session
    with another counter is a ``ValueError``.

    Args:
        factory: Makes each raw session: a function of no arguments, ``async def`` or plain.
        checkpoint_dir: Where to find the latest valid checkpoint to restore from. ``None``:
            only ``checkpoint_path``.
        checkpoint_path: One checkpoint file to restore the first session from.
        step_counter: The monitored session's step counter, only to call ``create_session``
            without one.
        checkpointables: More ``Checkpointable`` objects (not hooks) to restore from every
            checkpoint.
        checkpointer: A ``Checkpointer`` to read with, instead of one over
            ``checkpoint_dir``.
        codec: The ``Codec`` the checkpoints were written with. ``None``: ``MsgpackCodec``.
    """

    def __init__(
        self,
        factory: SessionFactory,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        checkpoint_path: str | os.PathLike[str] | None = None,
        *,
        step_counter: StepCounter | None = None,
        checkpointables: Iterable[object] = (),
        checkpointer: Checkpointer | None = None,
        codec: Codec | None = None,
    ) -> None:
        check_factory("ChiefSessionCreator(factory=...)", factory)
        check_callable("ChiefSessionCreator: factory", factory)
        check_path("ChiefSessionCreator: checkpoint_dir", checkpoint_dir, optional=True)
        check_path("ChiefSessionCreator: checkpoint_path", checkpoint_path, optional=True)
        self.factory = factory
        if (
            checkpointer is not None
            and checkpoint_dir is not None
            and os.path.abspath(os.fspath(checkpoint_dir)) != checkpointer.directory
        ):
            raise ValueError(
                f"ChiefSessionCreator: checkpoint_dir {os.fspath(checkpoint_dir)!r} is not the "
                f"checkpointer's directory {checkpointer.directory!r}"
            )
        if checkpointer is None and checkpoint_dir is not None:
            checkpointer = Checkpointer(checkpoint_dir, codec=codec)
        self.codec: Codec = codec if codec is not None else checkpointer.codec if checkpointer else MsgpackCodec()
        self.checkpointer = checkpointer
        self.checkpoint_path = None if checkpoint_path is None else os.fspath(checkpoint_path)
        self.step_counter = None if step_counter is None else check_step_counter(step_counter)
        self._explicit_counter = step_counter is not None
        self._hooks: tuple[object, ...] = ()
        self._objects = tuple(checkpointables)
        self._created = 0
        #: With steps in flight, the raw sessions of the monitored session's lanes (``bind_lanes``).
        self._lanes: Callable[[], Sequence[object]] | None = None
        #: The checkpoint the last created session was restored from (``None``: fresh).
        self.restored: RestoredCheckpoint | None = None
        #: The lanes that had a session from this creator (lane 0's first is ``create_session``'s).
        self._lanes_made: set[int] = set()

    def __repr__(self) -> str:
        where = self.checkpointer.directory if self.checkpointer is not None else self.checkpoint_path
        return f"ChiefSessionCreator({name_of(self.factory)}, checkpoint={where!r})"

    def bind_session(self, hooks: Sequence[object], step_counter: StepCounter) -> None:
        """Called by a monitored session given this creator, once, when it is constructed:
        its ``hooks`` are restored with every session created, and the global step into
        its ``step_counter``.

        Binding again with the same counter (a new session sharing it) takes the new
        hooks; another counter is a ``ValueError``, as is a counter other than the
        ``step_counter`` this creator was made with.
        """
        check_step_counter(step_counter)
        current = self.step_counter
        if current is not None and current is not step_counter:
            if self._explicit_counter:
                raise ValueError(
                    f"ChiefSessionCreator was made with step_counter={current!r}, but the monitored "
                    f"session it is given to counts steps with {step_counter!r}: the restored global "
                    "step would be lost; pass the same object to both, or leave step_counter out "
                    "of the creator (the session binds its own)"
                )
            raise ValueError(
                f"this ChiefSessionCreator already serves a monitored session whose step counter is "
                f"{current!r}, and cannot restore into another session's counter ({step_counter!r}): "
                "make one creator per monitored session, or give both sessions the same step_counter="
            )
        self.step_counter = step_counter
        self._hooks = tuple(hooks)

    async def _read(self) -> RestoredCheckpoint | None:
        reader = self.checkpointer
        first = self._created == 0
        if self.checkpoint_path is not None and (first or reader is None):
            codec = reader.codec if reader is not None else self.codec
            return await anyio.to_thread.run_sync(read_checkpoint, self.checkpoint_path, codec)
        if reader is None:
            return None
        return await anyio.to_thread.run_sync(reader._read_latest, _check_shape)

    async def create_session(self) -> Any:
        """A new session, restored from the latest valid checkpoint if there is one."""
        counter = self.step_counter
        if counter is None and (self.checkpointer is not None or self.checkpoint_path is not None):
            raise RuntimeError(
                "ChiefSessionCreator.create_session() has no step counter to restore the global "
                "step into: give the creator to a MonitoredSession (which binds its own), or make "
                "it with step_counter=... to call create_session() yourself"
            )
        await self._wait_saved()
        restored = await self._read()
        session = await call_factory(self.factory)
        try:
            if restored is not None:
                objects = checkpointables((*self._hooks, *self._objects))
                await apply_state(restored.state, session, objects, counter, restored.info.path, restored.step)
                self._say_lanes(restored.state, restored.info.path)
                logger().info("restored %s at global step %d", restored.info.path, restored.step, extra=fields(step=restored.step))
        except BaseException:
            await _aclose_quietly(session)
            raise
        self._created += 1
        self.restored = restored
        self._lanes_made.add(0)
        return session

    async def _wait_saved(self) -> None:
        """A checkpoint still being written is the newest: it is read once durable."""
        for hook in self._hooks:
            wait_saved = getattr(hook, "wait_saved", None)
            if wait_saved is not None:
                await wait_saved()

    def bind_lanes(self, lanes: Callable[[], Sequence[object]]) -> None:
        """Called once by a monitored session with steps in flight: ``lanes()`` gives the
        raw session of each of its lanes (their number is all this creator reads)."""
        self._lanes = lanes

    def _lane_state(self, state: Mapping[str, Any], lane: int | None, source: str) -> Mapping[str, Any] | None:
        """The session state ``lane`` restores from a checkpoint's ``state``: its own when
        the checkpoint kept every lane's (none, said in a warning, for a lane it did not
        keep); a checkpoint saved with one lane gives its session state to every lane."""
        saved = state.get("lanes")
        if saved is None:
            return state.get("session")
        own = saved[lane] if lane is not None and lane < len(saved) else None
        if own is None:
            logger().warning(
                "checkpoint %r holds no session state for lane %s (it kept %d lanes' states): "
                "that lane starts without one", source, lane, len(saved),
            )
        return own

    def _say_lanes(self, state: Mapping[str, Any], source: str) -> None:
        """At entry: say how the checkpoint's lanes meet this session's (one lane unless
        ``bind_lanes`` said otherwise); a recovery of one lane says it no more."""
        if self._lanes is None and self._created:
            return
        n, saved = 1 if self._lanes is None else len(self._lanes()), state.get("lanes")
        if saved is None and "session" in state and n > 1:
            logger().warning(
                "checkpoint %r was saved with one lane: each of the %d lanes starts from its session state",
                source, n,
            )
        elif saved is not None and len(saved) > n:
            logger().warning(
                "checkpoint %r kept %d lanes' session states; this session has %d %s: the "
                "states of lanes %d to %d are not restored", source, len(saved), n, "lane" if n == 1 else "lanes",
                n, len(saved) - 1,
            )

    async def create_lane_session(self, lane: int | None = None) -> Any:
        """A session for one more lane of a monitored session with steps in flight
        (``max_in_flight > 1``), restored with that lane's session state (``lane``: its
        index) only. At entry (the lane's first session) the state comes from the
        checkpoint the first lane restored from, the same cut for every lane (none: the
        lane starts fresh, as the first did); when the lane alone is re-created, from the
        latest valid checkpoint, once a save under way is durable. The step counter and
        the hooks are left as they are, so the lanes still running never see them roll
        back."""
        reader, path = self.checkpointer, self.checkpoint_path
        entry = lane is not None and lane not in self._lanes_made
        if lane is not None:
            self._lanes_made.add(lane)
        if entry:
            restored = self.restored
        elif reader is None and path is None:
            restored = None
        elif reader is None:
            assert path is not None
            restored = await anyio.to_thread.run_sync(read_checkpoint, path, self.codec)
        else:
            await self._wait_saved()
            restored = await anyio.to_thread.run_sync(reader._read_latest, _check_shape)
        session = await call_factory(self.factory)
        try:
            own = None if restored is None else self._lane_state(restored.state, lane, restored.info.path)
            if restored is not None and own is not None:
                await apply_state({"global_step": restored.step, "session": own}, session, {}, None, restored.info.path, restored.step)
        except BaseException:
            await _aclose_quietly(session)
            raise
        return session


def _check_shape(restored: RestoredCheckpoint) -> None:
    """A checkpoint not shaped like a session's is skipped, falling back to the one before."""
    check_session_state(restored.state, restored.info.path)


class WorkerSessionCreator:
    """Creates sessions with ``factory`` once the chief is ready.

    Readiness is ``ready`` — an awaitable (awaited once), or a callable returning
    an awaitable (awaited at every creation) or a truth value (asked again with
    a growing pause until true) — or, by default, the first valid checkpoint
    named ``<checkpoint_basename>-<step>`` in ``checkpoint_dir``. Neither given:
    no wait. Waiting longer than
    ``max_wait_secs`` raises ``TimeoutError``.

    Args:
        factory: Makes each raw session: a function of no arguments, ``async def`` or plain.
        ready: When the chief is ready: an awaitable, or a callable returning an awaitable
            or a truth value. ``None``: the first valid checkpoint in ``checkpoint_dir``.
        max_wait_secs: Seconds to wait for the chief before a ``TimeoutError``.
        checkpoint_dir: Where the chief's checkpoints appear, when ``ready`` is not given.
        checkpoint_basename: The name of those checkpoint files,
            ``<checkpoint_basename>-<step>``.
    """

    def __init__(
        self,
        factory: SessionFactory,
        ready: Awaitable[object] | Callable[[], object] | None = None,
        max_wait_secs: float = 1800,
        *,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        checkpoint_basename: str = "ckpt",
    ) -> None:
        check_factory("WorkerSessionCreator(factory=...)", factory)
        check_callable("WorkerSessionCreator: factory", factory)
        check_number("WorkerSessionCreator: max_wait_secs", max_wait_secs, strict=True, unit="seconds")
        check_path("WorkerSessionCreator: checkpoint_dir", checkpoint_dir, optional=True)
        if ready is not None and not (callable(ready) or inspect.isawaitable(ready)):
            raise TypeError(f"WorkerSessionCreator: ready must be an awaitable or a callable, got {ready!r}")
        self.factory = factory
        self.max_wait_secs = float(max_wait_secs)
        self.checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        self.checkpoint_basename = checkpoint_basename
        check_basename("WorkerSessionCreator", checkpoint_basename)
        self._ready = ready
        self._became_ready = ready is None and checkpoint_dir is None
        self._delay = 0.05

    def __repr__(self) -> str:
        return f"WorkerSessionCreator({name_of(self.factory)}, max_wait_secs={self.max_wait_secs})"

    async def create_session(self) -> Any:
        """A new session, once the chief is ready."""
        if not self._became_ready:
            with anyio.move_on_after(self.max_wait_secs) as scope:
                await self._wait_ready()
            if scope.cancelled_caught:
                raise TimeoutError(
                    f"WorkerSessionCreator: the chief was not ready after max_wait_secs="
                    f"{self.max_wait_secs:g}s ({self._what()})"
                )
        return await call_factory(self.factory)

    def _what(self) -> str:
        if self._ready is not None:
            return f"waiting for {self._ready!r}"
        return f"no valid checkpoint {self.checkpoint_basename}-<step> in {self.checkpoint_dir!r}"

    async def _wait_ready(self) -> None:
        ready = self._ready
        if ready is None:
            directory = self.checkpoint_dir
            assert directory is not None
            find = functools.partial(latest_checkpoint, directory, basename=self.checkpoint_basename)
            while await anyio.to_thread.run_sync(find) is None:
                await self._pause()
            self._became_ready = True
        elif inspect.isawaitable(ready):
            await ready
            self._became_ready = True
        else:
            while True:
                answer = ready()
                if inspect.isawaitable(answer):
                    answer = await answer
                    if answer is None:  # an awaitable like ``event.wait()`` signals by returning
                        return
                if answer:
                    return
                await self._pause()

    async def _pause(self) -> None:
        """Sleep between two readiness checks: 0.05 s at first, doubling up to 2 s."""
        await anyio.sleep(self._delay)
        self._delay = min(2.0, self._delay * 2)
