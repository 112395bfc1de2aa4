"""Where summaries go: the ``SummaryWriter`` protocol and the TensorBoard writer.

``SummaryWriter`` is structural: anything with ``add_scalar(tag, value,
step)``, ``flush()`` and ``close()`` plugs in (a ``tensorboardX.SummaryWriter``
already does). ``TensorBoardWriter`` writes real TensorBoard event files
through tensorboardX, imported lazily: a missing tensorboardX is an
``ImportError`` naming the ``hookrun[tensorboard]`` extra, raised when the
writer is built. Every writer created here gets an event-file name of its
own, so several hooks may write into one directory.

``WriterSlot`` is the ownership rule the hooks share: a writer the hook made
from ``output_dir`` is closed by the hook at ``end``; a writer the user passed
is only flushed.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Protocol, runtime_checkable

import anyio

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

    ``add_scalar`` only queues the event (tensorboardX writes from its own
    thread); ``flush`` and ``close`` block on file I/O, so async code calls
    them through a worker thread (the hooks do).
    """

    def __init__(self, logdir: str | os.PathLike[str], *, flush_secs: float = 120.0) -> None:
        tensorboardx = import_optional("tensorboardX", "tensorboard", "TensorBoardWriter")
        self.logdir = os.fspath(logdir)
        suffix = f".hookrun.{os.getpid()}.{next(_serial)}"
        # tensorboardX's own check-then-create races when two hooks open one directory.
        os.makedirs(self.logdir, exist_ok=True)
        self._writer: Any = tensorboardx.SummaryWriter(
            self.logdir, flush_secs=flush_secs, filename_suffix=suffix
        )

    def __repr__(self) -> str:
        return f"TensorBoardWriter({self.logdir!r})"

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        """Queue a scalar event."""
        self._writer.add_scalar(tag, float(value), step)

    def flush(self) -> None:
        """Write queued events to disk."""
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file (idempotent)."""
        self._writer.close()


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
            self.writer = await anyio.to_thread.run_sync(TensorBoardWriter, self._output_dir)

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
