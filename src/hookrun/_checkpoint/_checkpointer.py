"""``Checkpointer``: save, list, find and restore the checkpoints of one directory;
``latest_checkpoint``: the newest valid checkpoint of a directory.

Every save runs its encoding and its file I/O in worker threads, so the event
loop keeps serving other tasks; the file I/O runs at a lower CPU priority
(``write_nice``, in ``_writer.py``). Saves of one checkpointer run one
at a time (a save due while another is writing waits for it). ``save`` writes
arrays from their own memory; ``encode`` copies them (a snapshot ``write``
may write later). A cancelled save removes
its temporary file: the previous checkpoints stay as they were, and the
newest of them stays the latest. ``latest`` and ``restore`` verify checksums
and skip a corrupt file with a :class:`CheckpointCorruptionWarning` naming it.

A checkpointer owns one set: the regular files named ``<basename>-<step>`` in
its directory (``_index.py``). It lists, restores and removes those
only, and never follows a symbolic link in their place.

Invariants: a checkpoint becomes visible only complete (see
``_file.py``); retention never removes the newest checkpoint; the
save order (``seq``) only grows, so "latest" means "saved last".
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio

from .._validate import check_file_name, check_int, check_number, check_path
from ._codec import Chunk, Codec, MsgpackCodec
from ._file import (
    MAX_STEP,
    CorruptCheckpointError,
    fsync_directory,
    read_file,
    read_region,
    temporary_name,
    verify_file,
    write_file,
)
from ._index import (
    DEFAULT_BASENAME,
    CheckpointInfo,
    Retention,
    is_own,
    scan,
    warn_corrupt,
    write_index,
)
from ._writer import run_lowered

__all__ = ["Checkpointer", "EncodedState", "RestoredCheckpoint", "latest_checkpoint", "read_checkpoint"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RestoredCheckpoint:
    """What ``Checkpointer.restore`` read: the checkpoint's ``info`` and its ``state``."""

    info: CheckpointInfo
    state: dict[str, Any]

    @property
    def step(self) -> int:
        """The global step the checkpoint was saved at."""
        return self.info.step


@dataclass(frozen=True, slots=True)
class EncodedState:
    """A snapshot of a state, encoded by ``codec``: later changes to the state do not alter it."""

    codec: str
    chunks: Sequence[Chunk]


def latest_checkpoint(directory: str | os.PathLike[str], *, basename: str = DEFAULT_BASENAME) -> str | None:
    """The path of the newest valid checkpoint named ``<basename>-<step>`` in ``directory``,
    or ``None``; files of other names are ignored.

    Corrupt files are skipped with a warning naming them. This reads files: in
    async code call it through ``anyio.to_thread.run_sync`` or use
    ``await Checkpointer.latest()``.

    Args:
        directory: The directory to look in.
        basename: The checkpoints' name, ``<basename>-<step>``.

    Returns:
        The newest valid checkpoint's path, or ``None``.
    """
    check_basename("latest_checkpoint", basename)
    info = _latest_valid(os.fspath(directory), basename)
    return None if info is None else info.path


def _latest_valid(directory: str, basename: str) -> CheckpointInfo | None:
    entries, _ = scan(directory, basename)
    for info in reversed(entries):
        if not is_own(info.path, basename):
            continue
        try:
            _verify(info.path)
        except CorruptCheckpointError as error:
            warn_corrupt(error)
            continue
        except FileNotFoundError:
            continue
        return info
    return None


def _verify(path: str) -> None:
    """Check the file's checksum and, for the default codec, its payload's structure (the
    array buffers are bounds-checked, not read), so what is called valid restores."""
    meta, start = verify_file(path)
    if meta["codec"] != MsgpackCodec.name:
        return
    try:
        MsgpackCodec()._check(lambda at, count: read_region(path, start + at, count), meta["payload_bytes"])
    except ValueError as exc:
        raise CorruptCheckpointError(path, f"its payload does not decode ({exc})") from None


class Checkpointer:
    """Saves states as checkpoint files in ``directory`` and finds them again.

    Keeps the newest ``max_to_keep`` checkpoints (``None``: all), plus one every
    ``keep_checkpoint_every_n_hours`` hours, plus the ``keep_best`` best by the
    ``metric`` given to ``save`` (lowest for ``mode="min"``, highest for
    ``"max"``). ``codec`` defaults to :class:`MsgpackCodec`, which never runs
    code on load. Files are named ``<basename>-<step>``; a second save of one
    step replaces the first, atomically. The directory is created if needed;
    one that cannot be written is an ``OSError`` naming it, raised here.

    A checkpointer owns exactly the regular files named ``<basename>-<step>``
    of its directory: it never lists, restores or removes any other file, so
    checkpointers of different basenames can share a directory. Their indexes
    are ``index.json`` (the default basename) and ``<basename>.index.json``.

    Files are written (after the state is snapshotted) by a thread whose CPU
    priority is ``write_nice`` lower than the caller's, on Linux: on a machine
    whose CPUs are all busy, a save then takes the CPU time the event loop
    leaves instead of slowing its steps. ``None`` or 0: the same priority.

    Args:
        directory: Where the checkpoint files are; created if missing.
        max_to_keep: How many of the newest checkpoints to keep. ``None``: all.
        keep_checkpoint_every_n_hours: Also keep one checkpoint every this many hours.
            ``None``: none.
        codec: How states are encoded. ``None``: ``MsgpackCodec``.
        keep_best: Also keep this many best checkpoints by their metric. ``None``: none.
        mode: Whether the best metric is the lowest (``"min"``) or the highest (``"max"``).
        basename: The files' name, ``<basename>-<step>``.
        write_nice: How much lower the writing thread's CPU priority is (Linux). ``None`` or
            0: the caller's.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_to_keep: int | None = 5,
        keep_checkpoint_every_n_hours: float | None = None,
        codec: Codec | None = None,
        keep_best: int | None = None,
        mode: Literal["min", "max"] = "min",
        basename: str = DEFAULT_BASENAME,
        write_nice: int | None = 10,
    ) -> None:
        _check_count("max_to_keep", max_to_keep)
        _check_count("keep_best", keep_best)
        hours = keep_checkpoint_every_n_hours
        check_number("Checkpointer: keep_checkpoint_every_n_hours", hours, strict=True, optional=True)
        if mode not in ("min", "max"):
            raise ValueError(f'Checkpointer: mode must be "min" or "max", got {mode!r}')
        check_file_name("Checkpointer: basename", basename)
        check_basename("Checkpointer", basename)
        check_path("Checkpointer: directory", directory)
        self.codec: Codec = codec if codec is not None else MsgpackCodec()
        if not (
            callable(getattr(self.codec, "encode", None))
            and callable(getattr(self.codec, "decode", None))
            and isinstance(getattr(self.codec, "name", None), str)
        ):
            raise TypeError(f"Checkpointer: codec {codec!r} is not a Codec (needs name, encode and decode)")
        self.directory = os.path.abspath(os.fspath(directory))
        self.basename = basename
        check_int("Checkpointer: write_nice", write_nice, optional=True)
        #: How much lower the CPU priority of the thread writing files is (Linux).
        self.write_nice = write_nice or 0
        self.retention = Retention(max_to_keep, hours, keep_best, mode)
        self._mutex = threading.Lock()  # guards the entries, read by the loop, changed by writers
        self._busy: anyio.Event | None = None
        _prepare_directory(self.directory)
        self._entries, mark = scan(self.directory, basename, clean=True)
        self._last_preserved_at = mark if mark is not None else time.time()

    def __repr__(self) -> str:
        return f"Checkpointer({self.directory!r}, {len(self._entries)} checkpoints)"

    def all(self) -> list[CheckpointInfo]:
        """Every checkpoint of this checkpointer's basename, oldest first (from the index;
        not verified)."""
        with self._mutex:
            return list(self._entries)

    def best(self) -> CheckpointInfo | None:
        """The kept checkpoint with the best metric (lowest for ``mode="min"``, highest for
        ``"max"``; of equal metrics, the older), or ``None`` if none has a metric. From the
        index, not verified."""
        with self._mutex:
            ranked = self.retention.ranked(self._entries)
        return ranked[0] if ranked else None

    async def latest(self) -> CheckpointInfo | None:
        """The newest valid checkpoint (checksum verified), or ``None``."""
        return await anyio.to_thread.run_sync(_latest_valid, self.directory, self.basename)

    async def restore(self, path: str | os.PathLike[str] | None = None) -> RestoredCheckpoint | None:
        """Read the checkpoint at ``path``, or the newest valid one (``None`` if there is none).

        An explicit ``path`` that is corrupt raises :class:`CorruptCheckpointError`;
        without one, corrupt files are skipped with a warning.
        """
        if path is not None:
            return await anyio.to_thread.run_sync(self._read, os.fspath(path))
        return await anyio.to_thread.run_sync(self._read_latest)

    async def encode(self, state: Mapping[str, Any]) -> EncodedState:
        """Snapshot and encode ``state`` in a worker thread (the first half of ``save`` for
        your own background saving): the result no longer depends on ``state``."""
        _check_state(state)
        chunks = await anyio.to_thread.run_sync(self.codec.encode, state)
        return EncodedState(self.codec.name, list(chunks))

    async def write(self, step: int, encoded: EncodedState, *, metric: float | None = None) -> CheckpointInfo:
        """Write an encoded state as the checkpoint of ``step`` (the second half of ``save``).

        Waits for a write in progress; returns once the checkpoint is durable.
        """
        _check_step(step)
        return await self._exclusive(self._write_sync, step, encoded, _check_metric(metric))

    async def save(self, step: int, state: Mapping[str, Any], *, metric: float | None = None) -> CheckpointInfo:
        """Save ``state`` as the checkpoint of global step ``step``; return it once durable.

        ``metric`` ranks it for ``keep_best``. A save started while another is
        writing waits for it. Cancelled, it leaves no partial file behind.

        The default codec writes NumPy arrays straight from their memory, without
        copying them first: do not change the state until ``save`` returns. To go
        on changing it while the file is written, snapshot it with :meth:`encode`
        and write that (``CheckpointSaverHook`` does).
        """
        _check_step(step)
        _check_state(state)
        return await self._exclusive(self._save_sync, step, state, _check_metric(metric))

    async def _exclusive(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args, abort)`` in the writer thread, after any write in progress."""
        while self._busy is not None:
            await self._busy.wait()
        self._busy = busy = anyio.Event()
        try:
            return await _run_abortable(fn, *args, nice=self.write_nice)
        finally:
            self._busy = None
            busy.set()

    # -- worker-thread side -----------------------------------------------------------------

    def _save_sync(self, step: int, state: Mapping[str, Any], metric: float | None, abort: threading.Event) -> CheckpointInfo:
        codec = self.codec
        if isinstance(codec, MsgpackCodec):
            chunks = codec._encode(state, copy=False)  # the file is the snapshot: no copy first
        else:
            chunks = list(codec.encode(state))
        return self._write_sync(step, EncodedState(codec.name, chunks), metric, abort)

    def _write_sync(self, step: int, encoded: EncodedState, metric: float | None, abort: threading.Event) -> CheckpointInfo:
        path = os.path.join(self.directory, f"{self.basename}-{step}")
        with self._mutex:
            seq = max((info.seq for info in self._entries), default=0) + 1
        saved_at = time.time()
        meta = {"step": step, "seq": seq, "codec": encoded.codec, "saved_at": saved_at, "metric": metric}
        write_file(path, meta, encoded.chunks, abort, sync_directory=False)
        info = CheckpointInfo(path, step, seq, saved_at, metric)
        with self._mutex:
            entries = [entry for entry in self._entries if entry.path != path] + [info]
            kept, removed, mark = self.retention.select(entries, self._last_preserved_at)
            self._entries = kept
            if mark is not None:
                self._last_preserved_at = mark
        try:
            write_index(self.directory, self.basename, kept, mark)
        finally:  # one directory fsync makes both renames durable, before anything is removed
            fsync_directory(self.directory)
        for old in removed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old.path)
        return info

    def _read(self, path: str) -> RestoredCheckpoint:
        return read_checkpoint(path, self.codec)

    def _read_latest(self, check: Callable[[RestoredCheckpoint], object] | None = None) -> RestoredCheckpoint | None:
        """The newest checkpoint that reads, decodes and passes ``check`` (which raises
        ``CorruptCheckpointError`` for a state of the wrong shape); others are skipped."""
        entries, _ = scan(self.directory, self.basename)
        for info in reversed(entries):
            if not is_own(info.path, self.basename):
                continue
            try:
                restored = self._read(info.path)
                if check is not None:
                    check(restored)
                return restored
            except CorruptCheckpointError as error:
                warn_corrupt(error)
            except FileNotFoundError:
                continue
        return None


def read_checkpoint(path: str, codec: Codec) -> RestoredCheckpoint:
    """Read, verify and decode the checkpoint file at ``path`` (blocking)."""
    meta, payload = read_file(path)
    if meta["codec"] != codec.name:
        raise ValueError(
            f"checkpoint {path!r} was written with codec {meta['codec']!r}, but this "
            f"Checkpointer uses {codec.name!r}; pass codec= to read it"
        )
    try:
        state = codec.decode(payload)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError, EOFError) as exc:
        raise CorruptCheckpointError(path, f"its payload does not decode ({exc})") from exc
    if not isinstance(state, dict):
        raise CorruptCheckpointError(path, f"its payload decodes to a {type(state).__name__}, not a dict")
    info = CheckpointInfo(path, meta["step"], meta["seq"], meta["saved_at"], meta["metric"])
    return RestoredCheckpoint(info, state)


async def _run_abortable(fn: Callable[..., T], *args: Any, nice: int = 0) -> T:
    """Run ``fn(*args, abort)`` in a worker thread; if cancelled, set ``abort`` and wait for it.

    So a cancelled caller returns only once the thread has stopped (nothing keeps running).
    With ``nice`` (Linux), ``fn`` runs in one of the writer threads at that much lower a
    CPU priority (``_writer.py``), the worker thread waiting for it.
    """
    abort, finished, lock = threading.Event(), threading.Event(), threading.Lock()
    started = False

    def body() -> T:
        nonlocal started
        with lock:
            if abort.is_set():  # cancelled before the thread picked it up: never start
                raise _Abandoned
            started = True
        try:
            return run_lowered(nice, fn, *args, abort)
        finally:
            finished.set()

    try:
        return await anyio.to_thread.run_sync(body, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with lock:
            abort.set()
            running = started
        if running:  # wait for the thread to stop; if it never started, it never will
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(finished.wait)
        raise


class _Abandoned(Exception):
    """The work of a cancelled caller, never started."""


def _prepare_directory(directory: str) -> None:
    """Create ``directory`` if needed and check a file can be created in it."""
    probe = temporary_name(os.path.join(directory, "probe"))
    try:
        os.makedirs(directory, exist_ok=True)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise type(exc)(
            exc.errno, f"checkpoint directory {directory!r} cannot be written: {exc.strerror or exc}"
        ) from exc


def check_basename(owner: str, basename: object) -> None:
    if (
        not isinstance(basename, str)
        or not basename
        or basename.startswith(".")
        or os.sep in basename
        or (os.altsep is not None and os.altsep in basename)
    ):
        raise ValueError(f"{owner}: basename must be a plain file name, got {basename!r}")


def _check_count(name: str, value: object) -> None:
    check_int(f"Checkpointer: {name}", value, minimum=1, optional=True)


def _check_state(state: object) -> None:
    if not isinstance(state, Mapping):
        raise TypeError(f"a checkpoint's state must be a mapping, got {type(state).__name__}")


def _check_step(step: object) -> None:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"a checkpoint's step must be an int >= 0, got {step!r}")
    if step > MAX_STEP:
        raise ValueError(f"a checkpoint's step must be at most 2**63-1, got {step!r}")


def _check_metric(metric: object) -> float | None:
    if metric is None:
        return None
    if isinstance(metric, bool):
        raise TypeError(f"a checkpoint's metric must be a number, got {metric!r}")
    try:
        return float(metric)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"a checkpoint's metric must be a number, got {metric!r}") from None
