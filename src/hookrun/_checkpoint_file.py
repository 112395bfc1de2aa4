"""One checkpoint file on disk: its layout, its atomic write and its verification.

Layout::

    magic b"HKRNCKPT" | u32 version | u32 meta length | meta (JSON) | payload | u32 CRC-32

The CRC-32 (zlib's, little-endian) covers every byte before it, so a torn,
truncated or bit-flipped file is detected. It is computed over the file as
written, in one pass over its pages while they are still cached. ``meta``
holds the step, the save sequence number, the codec name, the wall-clock save
time, the payload length and an optional metric.

Invariants of ``write_file``: the bytes go to a hidden temporary name in the
same directory, written straight from the callers' buffers (never copied or
joined: one ``writev`` per 64 MiB however many buffers, so the writing thread
takes the GIL back a few times per file, not once per buffer), checksummed and
fsynced, and only then renamed over the final name (atomic), after which the
directory is fsynced. A failure or an abort before the rename removes the
temporary file: a reader sees the old file or the complete new one, never a
part. Blocking I/O: call these in a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import mmap
import os
import secrets
import struct
import threading
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from ._errors import HookrunError

__all__ = [
    "CheckpointAborted",
    "CorruptCheckpointError",
    "fsync_directory",
    "is_temporary",
    "read_file",
    "read_meta",
    "temporary_name",
    "temporary_owner",
    "verify_file",
    "write_atomically",
    "write_file",
]

MAGIC = b"HKRNCKPT"
VERSION = 2
_HEAD = struct.Struct("<8sII")
_CRC = struct.Struct("<I")
_DIGEST = _CRC.size
_PIECE = 64 << 20  # write and checksum in batches of this size, checking for an abort between them
_MAX_META = 1 << 20
_TEMP = ".tmp-"
_TOKEN: list[str] = []
_SERIAL = itertools.count()


def _iov_max() -> int:
    """Buffers per ``os.writev`` call: the system's limit (POSIX guarantees 16), at most 1024."""
    try:
        limit = os.sysconf("SC_IOV_MAX")
    except (AttributeError, ValueError, OSError):
        return 16
    return min(max(limit, 16), 1024)


_IOV_MAX = _iov_max()
_CREATE = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


class CorruptCheckpointError(HookrunError, ValueError):
    """A checkpoint file is torn, truncated, bit-flipped or not a checkpoint. ``path`` names it."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"checkpoint {os.fspath(path)!r} is corrupt: {reason}")
        self.path = os.fspath(path)
        self.reason = reason

    def __reduce__(self) -> tuple[type[CorruptCheckpointError], tuple[str, str]]:
        # Rebuilt from its arguments (not its message) when unpickled, e.g. sent back by a worker.
        return type(self), (self.path, self.reason)


class CheckpointAborted(Exception):
    """A write was abandoned before its rename (its caller was cancelled)."""


def temporary_name(path: str) -> str:
    """A hidden, unique name next to ``path`` for writing it."""
    directory, name = os.path.split(path)
    if not _TOKEN:
        _TOKEN.append(secrets.token_hex(4))  # once per process: no system call per save
    return os.path.join(directory, f".{name}{_TEMP}{os.getpid()}-{_TOKEN[0]}{next(_SERIAL)}")


def is_temporary(name: str) -> bool:
    """Whether a directory entry is one of our temporary files."""
    return name.startswith(".") and _TEMP in name


def temporary_owner(name: str) -> int | None:
    """The process id that made a temporary file, if its name says."""
    try:
        return int(name.rsplit(_TEMP, 1)[1].split("-", 1)[0])
    except (IndexError, ValueError):
        return None


def fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_all(fd: int, pieces: list[memoryview]) -> None:
    """Write ``pieces`` in order with as few system calls as possible (each releases the GIL)."""
    writev = getattr(os, "writev", None)
    while pieces:
        batch = pieces[:_IOV_MAX]
        written = writev(fd, batch) if writev is not None else os.write(fd, batch[0])
        if not written:
            raise OSError(errno.EIO, "a checkpoint write made no progress")
        for piece in batch:  # a short write: drop what went out, keep the rest of the piece
            if written < piece.nbytes:
                pieces[0] = piece[written:]
                break
            written -= piece.nbytes
            pieces.pop(0)


def write_atomically(
    path: str,
    chunks: Iterable[bytes | bytearray | memoryview],
    abort: threading.Event | None = None,
    *,
    checksum: bool = False,
    sync_file: bool = True,
    sync_directory: bool = True,
) -> None:
    """Write ``chunks`` to ``path`` through a temporary file, fsync and rename.

    The bytes go out in batches of up to ``_PIECE`` bytes, one ``writev`` each,
    straight from the chunks' memory; ``abort`` is checked between batches.
    With ``checksum``, the file then ends with the CRC-32 of everything before
    it, computed over the file as written (one pass over its cached pages,
    however many chunks there were). Without ``sync_directory`` the caller
    fsyncs the directory (once for several renames); without ``sync_file`` the
    file itself is not fsynced (for a file that can be rebuilt, like the index).
    """
    temporary = temporary_name(path)
    fd = os.open(temporary, _CREATE, 0o644)
    try:
        try:
            batch: list[memoryview] = []
            pending = total = 0
            for chunk in chunks:
                view = memoryview(chunk).cast("B")
                for start in range(0, view.nbytes, _PIECE):
                    piece = view[start : start + _PIECE]
                    if piece.nbytes:
                        batch.append(piece)
                        pending += piece.nbytes
                    if pending >= _PIECE:
                        _check_abort(abort, path)
                        _write_all(fd, batch)
                        total, pending = total + pending, 0
            _check_abort(abort, path)
            _write_all(fd, batch)
            total += pending
            if checksum:
                _write_all(fd, [memoryview(_CRC.pack(_crc_of_file(fd, total, abort, path)))])
            if sync_file:
                os.fsync(fd)
        finally:
            os.close(fd)
        _check_abort(abort, path)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if sync_directory:
        fsync_directory(os.path.dirname(path) or ".")


def _check_abort(abort: threading.Event | None, path: str) -> None:
    if abort is not None and abort.is_set():
        raise CheckpointAborted(path)


def _crc_of_file(fd: int, size: int, abort: threading.Event | None, path: str) -> int:
    """The CRC-32 of the first ``size`` bytes of the open file ``fd`` (just written, so cached)."""
    if size == 0:
        return 0
    crc = 0
    try:
        mapping = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system without mmap: read it back instead
        os.lseek(fd, 0, os.SEEK_SET)
        while size > 0:
            _check_abort(abort, path)
            piece = os.read(fd, min(_PIECE, size))
            if not piece:
                raise OSError(errno.EIO, f"checkpoint file {path!r} shrank while being checksummed") from None
            crc = zlib.crc32(piece, crc)
            size -= len(piece)
        return crc
    with mapping, memoryview(mapping) as view:
        for start in range(0, size, _PIECE):
            _check_abort(abort, path)
            crc = zlib.crc32(view[start : start + _PIECE], crc)
    return crc


def write_file(
    path: str,
    meta: Mapping[str, Any],
    payload: Iterable[bytes | bytearray | memoryview],
    abort: threading.Event | None = None,
    *,
    sync_directory: bool = True,
) -> int:
    """Write one checkpoint file atomically; return its size in bytes. Without
    ``sync_directory``, the caller fsyncs the directory before relying on it."""
    pieces = [memoryview(chunk).cast("B") for chunk in payload]
    size = sum(piece.nbytes for piece in pieces)
    meta = dict(meta, payload_bytes=size)
    encoded = json.dumps(meta, sort_keys=True).encode()
    head = _HEAD.pack(MAGIC, VERSION, len(encoded)) + encoded
    write_atomically(path, [head, *pieces], abort, checksum=True, sync_directory=sync_directory)
    return len(head) + size + _DIGEST


def _parse_head(path: str, head: bytes, size: int) -> tuple[dict[str, Any], int]:
    """The meta and where the payload starts, from the first bytes of a file."""
    if size < _HEAD.size + _DIGEST:
        raise CorruptCheckpointError(path, f"only {size} bytes, too short to be a checkpoint")
    magic, version, length = _HEAD.unpack_from(head)
    if magic != MAGIC:
        raise CorruptCheckpointError(path, "it does not start with the checkpoint marker")
    if version != VERSION:
        raise CorruptCheckpointError(path, f"format version {version}, this hookrun reads {VERSION}")
    end = _HEAD.size + length
    if length > _MAX_META or end + _DIGEST > size or end > len(head):
        raise CorruptCheckpointError(path, f"its header length ({length}) does not fit the file")
    try:
        meta = json.loads(head[_HEAD.size : end])
    except ValueError:
        raise CorruptCheckpointError(path, "its header is not readable") from None
    if not isinstance(meta, dict) or not _meta_ok(meta):
        raise CorruptCheckpointError(path, "its header lacks the step, sequence or codec")
    if end + meta["payload_bytes"] + _DIGEST != size:
        raise CorruptCheckpointError(
            path, f"{size} bytes, but its header announces {end + meta['payload_bytes'] + _DIGEST}"
        )
    return meta, end


def _meta_ok(meta: dict[str, Any]) -> bool:
    ints = all(type(meta.get(key)) is int for key in ("step", "seq", "payload_bytes"))
    return ints and isinstance(meta.get("codec"), str)


def _read_head(path: str, file: Any) -> tuple[dict[str, Any], int]:
    size = os.fstat(file.fileno()).st_size
    head = file.read(_HEAD.size)
    if len(head) == _HEAD.size and head[:8] == MAGIC:
        head += file.read(min(_HEAD.unpack(head)[2], _MAX_META))
    return _parse_head(path, head, size)[0], size


def read_meta(path: str) -> dict[str, Any]:
    """The header of a checkpoint file, without checking its digest."""
    with open(path, "rb") as file:
        return _read_head(path, file)[0]


def read_file(path: str) -> tuple[dict[str, Any], memoryview]:
    """Read and verify a whole checkpoint file; return its meta and its payload."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        data = bytearray(size)
        view = memoryview(data)
        read = 0
        while read < size:
            count = file.readinto(view[read:])
            if not count:
                break
            read += count
    if read != size:
        raise CorruptCheckpointError(path, f"it shrank while being read ({read} of {size} bytes)")
    meta, start = _parse_head(path, bytes(view[: min(size, _HEAD.size + _MAX_META)]), size)
    if zlib.crc32(view[:-_DIGEST]) != _CRC.unpack_from(view, size - _DIGEST)[0]:
        raise CorruptCheckpointError(path, "its checksum does not match its contents")
    return meta, view[start:-_DIGEST]


def verify_file(path: str) -> dict[str, Any]:
    """Check a checkpoint file's digest without keeping it in memory; return its meta."""
    crc = 0
    with open(path, "rb") as file:
        meta, size = _read_head(path, file)
        file.seek(0)
        remaining = size - _DIGEST
        while remaining > 0:
            piece = file.read(min(_PIECE, remaining))
            if not piece:
                raise CorruptCheckpointError(path, "it shrank while being read")
            crc = zlib.crc32(piece, crc)
            remaining -= len(piece)
        if _CRC.pack(crc) != file.read(_DIGEST):
            raise CorruptCheckpointError(path, "its checksum does not match its contents")
    return meta
