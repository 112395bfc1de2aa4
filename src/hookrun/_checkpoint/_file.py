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

Invariants of reading: every header field is checked against what
``write_file`` writes (types, ranges, the payload length against the file's
size) before anything is allocated or checksummed, and a file failing any
check is a ``CorruptCheckpointError`` naming it and the field. Reading and
checksumming cost what the file holds on disk (holes of a sparse file are not
read, see ``_sparse.py``), and ``read_file`` reads into lazily zeroed
memory, so a planted 8 GiB file of 4 KiB on disk costs neither time nor memory.
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
from typing import Any, NoReturn

from .._errors import HookrunError
from ._sparse import crc_of_region, read_into

__all__ = [
    "MAX_STEP",
    "CheckpointAborted",
    "CorruptCheckpointError",
    "fsync_directory",
    "is_temporary",
    "read_file",
    "read_meta",
    "read_region",
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
_ABSENT = object()  # a header field left out
_LAST_TIME = 253402300800.0  # 10000-01-01: no saved_at is later
MAX_STEP = 2**63 - 1  # the largest step, sequence number or payload size a header may hold
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
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError) and exc.filename is None:
            raise _naming(exc, path) from exc
        raise
    if sync_directory:
        fsync_directory(os.path.dirname(path) or ".")


def _naming(exc: OSError, path: str) -> OSError:
    """``exc`` (from a write or fsync: ENOSPC, EIO, EDQUOT...) as the same kind of error,
    errno kept, naming the file being written."""
    if exc.errno is None:
        return OSError(f"writing {path!r} failed: {exc}")
    return OSError(exc.errno, exc.strerror or str(exc), path)


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
    """The meta (every field checked) and where the payload starts, from a file's first bytes."""
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
    except (ValueError, RecursionError):
        raise CorruptCheckpointError(path, "its header is not readable") from None
    if not isinstance(meta, dict):
        raise CorruptCheckpointError(path, f"its header is a {type(meta).__name__}, not a mapping")
    meta = _checked_meta(path, meta)
    if end + meta["payload_bytes"] + _DIGEST != size:
        raise CorruptCheckpointError(
            path, f"{size} bytes, but its header announces {end + meta['payload_bytes'] + _DIGEST}"
        )
    return meta, end


def _checked_meta(path: str, meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with every field known to be what ``write_file`` writes, or the error naming it."""
    checked = dict(meta)
    for key, low in (("step", 0), ("seq", 1), ("payload_bytes", 0)):
        value = meta.get(key, _ABSENT)
        if type(value) is not int or not low <= value <= MAX_STEP:
            _bad_field(path, key, value, f"an int from {low} to 2**63-1")
    codec = meta.get("codec", _ABSENT)
    if not isinstance(codec, str) or not codec:
        _bad_field(path, "codec", codec, "a codec name")
    checked["saved_at"] = _number(path, meta, "saved_at", required=True)
    checked["metric"] = _number(path, meta, "metric", required=False)
    return checked


def _number(path: str, meta: dict[str, Any], key: str, *, required: bool) -> float | None:
    """A float field: ``saved_at`` a time from 1970 to 9999; ``metric`` any float, or absent/null."""
    value = meta.get(key, _ABSENT)
    if (value is None or value is _ABSENT) and not required:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        _bad_field(path, key, value, "a number")
    try:
        number = float(value)
    except OverflowError:
        _bad_field(path, key, value, "a number a float can hold")
    if required and not 0 <= number < _LAST_TIME:  # NaN fails too
        _bad_field(path, key, value, "a time from 1970 to 9999")
    return number


def _bad_field(path: str, key: str, value: object, expected: str) -> NoReturn:
    shown = "missing" if value is _ABSENT else f"{value!r:.60}"
    raise CorruptCheckpointError(path, f"its header field {key!r} is {shown}, not {expected}")


def _read_head(path: str, file: Any) -> tuple[dict[str, Any], int, int]:
    """The checked meta, the file's size and where its payload starts."""
    size = os.fstat(file.fileno()).st_size
    head = file.read(_HEAD.size)
    if len(head) == _HEAD.size and head[:8] == MAGIC:
        head += file.read(min(_HEAD.unpack(head)[2], _MAX_META))
    meta, start = _parse_head(path, head, size)
    return meta, size, start


def read_meta(path: str) -> dict[str, Any]:
    """The header of a checkpoint file (every field checked), without checking its digest."""
    with open(path, "rb") as file:
        return _read_head(path, file)[0]


def read_file(path: str) -> tuple[dict[str, Any], memoryview]:
    """Read and verify a whole checkpoint file; return its meta and its payload.

    The header is checked before anything is allocated; the file is then read
    into lazily zeroed memory, its holes (if it is sparse) skipped, so reading
    costs what the file holds on disk. A size no memory can be had for is
    reported as a corrupt file, as is one that shrinks while being read.
    """
    with open(path, "rb") as file:
        meta, size, start = _read_head(path, file)
        buffer = _allocate(path, size)
        view = memoryview(buffer)
        try:
            crc = read_into(file.fileno(), view[:-_DIGEST])
            read_into(file.fileno(), view[-_DIGEST:], size - _DIGEST)
        except EOFError as exc:
            raise CorruptCheckpointError(path, f"it shrank while being read ({exc})") from None
    if _CRC.pack(crc) != view[-_DIGEST:]:
        raise CorruptCheckpointError(path, "its checksum does not match its contents")
    return meta, view[start:-_DIGEST]


def _allocate(path: str, size: int) -> mmap.mmap | bytearray:
    """``size`` zeroed bytes the kernel provides page by page, as they are written."""
    try:
        return mmap.mmap(-1, size)
    except OverflowError:
        raise CorruptCheckpointError(
            path, f"it announces {size} bytes, more memory than can be had to read it"
        ) from None
    except (OSError, ValueError):  # no anonymous mappings here: plain memory
        pass
    try:
        return bytearray(size)
    except (OverflowError, MemoryError):
        raise CorruptCheckpointError(
            path, f"it announces {size} bytes, more memory than can be had to read it"
        ) from None


def verify_file(path: str) -> tuple[dict[str, Any], int]:
    """Check a checkpoint file's digest without keeping it in memory (holes are not read);
    return its meta and where its payload starts."""
    with open(path, "rb") as file:
        meta, size, start = _read_head(path, file)
        fd = file.fileno()
        try:
            crc = crc_of_region(fd, 0, size - _DIGEST)
        except EOFError as exc:
            raise CorruptCheckpointError(path, f"it shrank while being read ({exc})") from None
        file.seek(size - _DIGEST)
        if _CRC.pack(crc) != file.read(_DIGEST):
            raise CorruptCheckpointError(path, "its checksum does not match its contents")
    return meta, start


def read_region(path: str, start: int, count: int) -> bytes:
    """``count`` bytes of the file at ``start`` (fewer if it is shorter)."""
    with open(path, "rb") as file:
        file.seek(start)
        return file.read(count)
