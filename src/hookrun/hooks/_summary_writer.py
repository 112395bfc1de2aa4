"""Where summaries go: the ``SummaryWriter`` protocol and the TensorBoard writer.

``SummaryWriter`` is structural: anything with ``add_scalar(tag, value,
step)``, ``flush()`` and ``close()`` plugs in (a ``tensorboardX.SummaryWriter``
already does). ``TensorBoardWriter`` writes real TensorBoard event files
with tensorboardX's event-file format and protos, imported lazily: a missing
tensorboardX is an ``ImportError`` naming the ``hookrun[tensorboard]`` extra,
raised when the writer is built. Its ``flush`` writes every queued event, as
the protocol promises. Every writer created here gets an event-file name of its
own, so several hooks may write into one directory.

``WriterSlot`` is the ownership rule the hooks share: a writer the hook made
from ``output_dir`` is closed by the hook when the session exits, whichever way
(``end``, or ``on_exception`` after an error or a cancellation); a writer the user
passed is only flushed. A writer made is recorded on the slot by the thread that
made it, so a ``begin`` cancelled meanwhile still leaves it to be closed.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Protocol, runtime_checkable

import anyio

from .._validate import check_number, check_path
from ._common import import_optional

__all__ = ["SummaryWriter", "TensorBoardWriter", "WriterSlot"]

_serial = itertools.count()


@runtime_checkable
class SummaryWriter(Protocol):
    """A sink for scalar summaries (TensorBoard, a metrics service, a test list...)."""

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        """Record ``value`` under ``tag`` at global step ``step``."""
        ...

    def flush(self) -> None:
        """Make everything recorded so far durable."""
        ...

    def close(self) -> None:
        """Flush and release the sink."""
        ...


class TensorBoardWriter:
    """Writes scalars to TensorBoard event files in ``logdir`` (needs ``hookrun[tensorboard]``).

    ``add_scalar`` appends the event to the file's buffer (no background
    thread, no queue); ``flush`` writes every event added so far to the file,
    so a reader of ``logdir`` sees them at once; ``close`` flushes and closes
    the file. Besides, an ``add_scalar`` at least ``flush_secs`` after the last
    flush flushes (TensorBoard shows a live run). ``flush`` and ``close`` do
    file I/O, so async code calls them through a worker thread (the hooks do).
    Safe to use from several threads. Adding to a closed writer is a
    ``RuntimeError``.

    Args:
        logdir: The directory of the event files; created if missing.
        flush_secs: Seconds after which an ``add_scalar`` flushes.
    """

    def __init__(self, logdir: str | os.PathLike[str], *, flush_secs: float = 120.0) -> None:
        check_path("TensorBoardWriter: logdir", logdir)
        check_number("TensorBoardWriter: flush_secs", flush_secs, unit="seconds")
        import_optional("tensorboardX", "tensorboard", "TensorBoardWriter")
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.summary import scalar

        self.logdir = os.fspath(logdir)
        suffix = f".hookrun.{os.getpid()}.{next(_serial)}"
        os.makedirs(self.logdir, exist_ok=True)
        self._event, self._scalar = Event, scalar
        self._events = EventsWriter(os.path.join(self.logdir, "events"), suffix)
        self._lock = threading.Lock()
        self._flush_secs = float(flush_secs)
        self._next_flush = time.monotonic() + self._flush_secs
        self._closed = False

    def __repr__(self) -> str:
        return f"TensorBoardWriter({self.logdir!r})"

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        """Append a scalar event (flushing if ``flush_secs`` passed since the last flush)."""
        event = self._event(wall_time=time.time(), step=int(step), summary=self._scalar(tag, float(value)))
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed: cannot add {tag!r} at step {step}")
            self._events.write_event(event)
            if time.monotonic() >= self._next_flush:
                self._flush_locked()

    def flush(self) -> None:
        """Write every event added so far to the event file (a no-op once closed)."""
        with self._lock:
            if not self._closed:
                self._flush_locked()

    def close(self) -> None:
        """Flush and close the event file (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._events.close()

    def _flush_locked(self) -> None:
        self._events.flush()
        self._next_flush = time.monotonic() + self._flush_secs


class WriterSlot:
    """The writer a hook uses: given by the user, or made from ``output_dir`` in ``begin``."""

    __slots__ = ("_given", "_output_dir", "writer")

    def __init__(
        self, owner: str, output_dir: str | os.PathLike[str] | None, writer: SummaryWriter | None
    ) -> None:
        if output_dir is not None and writer is not None:
            raise ValueError(f"{owner}: give output_dir or summary_writer, not both")
        if writer is not None and not isinstance(writer, SummaryWriter):
            raise TypeError(
                f"{owner}: summary_writer must have add_scalar(tag, value, step), flush() "
                f"and close(); got {type(writer).__name__}"
            )
        check_path(f"{owner}: output_dir", output_dir, optional=True)
        if output_dir is not None:
            import_optional("tensorboardX", "tensorboard", f"{owner}(output_dir=...)")
        self._output_dir = output_dir
        self._given = writer
        self.writer: SummaryWriter | None = writer

    @property
    def configured(self) -> bool:
        """Whether the hook has somewhere to write."""
        return self._output_dir is not None or self._given is not None

    async def open(self) -> None:
        """Create the owned writer (in a worker thread: it makes the directory and file)."""
        if self._output_dir is not None and self.writer is None:
            # Not abandoned if cancelled: the writer is recorded before the thread returns.
            await anyio.to_thread.run_sync(self._make, self._output_dir)

    def _make(self, output_dir: str | os.PathLike[str]) -> None:
        self.writer = TensorBoardWriter(output_dir)

    async def finish(self) -> None:
        """Close an owned writer, flush a given one."""
        writer = self.writer
        if writer is None:
            return
        if writer is self._given:
            await anyio.to_thread.run_sync(writer.flush)
            return
        self.writer = None
        await anyio.to_thread.run_sync(writer.close)
