"""Reading a checkpoint file at the cost of what it holds on disk, not of its apparent size.

A file with holes (a sparse file: ``truncate`` to 8 GiB, 4 KiB on disk) reads
as zeros over its holes. ``extents`` lists a region's data and holes (through
``SEEK_DATA``/``SEEK_HOLE`` where the system has them; elsewhere the whole
region counts as data), ``crc_zeros`` advances a CRC-32 over a run of zero
bytes in a few dozen operations however long it is, and ``read_into`` fills a
zeroed buffer from the data regions only. So checking a file's checksum, or
reading it into lazily zeroed memory, touches only the bytes stored.

Invariants: the CRC computed is exactly ``zlib.crc32`` of the region's bytes
as read (holes are zeros), so a sparse file with a wrong checksum is found
wrong in milliseconds and a right one is accepted as it would be by reading
every byte. Blocking I/O: call these in a worker thread.
"""

from __future__ import annotations

import errno
import os
import zlib
from collections.abc import Iterator

__all__ = ["crc_of_region", "crc_zeros", "extents", "read_into"]

_PIECE = 64 << 20
_POLY = 0xEDB88320
_POWERS: list[list[int]] = []  # _POWERS[k]: the CRC register's map for 2**k zero bytes


def _apply(matrix: list[int], vector: int) -> int:
    result = 0
    for column in matrix:
        if vector & 1:
            result ^= column
        vector >>= 1
        if not vector:
            break
    return result


def _one_zero_byte() -> list[int]:
    columns = []
    for bit in range(32):
        register = 1 << bit
        for _ in range(8):
            register = (register >> 1) ^ (_POLY if register & 1 else 0)
        columns.append(register)
    return columns


def crc_zeros(crc: int, count: int) -> int:
    """``zlib.crc32(bytes(count), crc)``, without making or reading the zeros."""
    if count <= 0:
        return crc
    if not _POWERS:
        _POWERS.append(_one_zero_byte())
    register = crc ^ 0xFFFFFFFF  # zero bytes move the pre-inverted register linearly
    power = 0
    while count:
        while len(_POWERS) <= power:
            last = _POWERS[-1]
            _POWERS.append([_apply(last, column) for column in last])
        if count & 1:
            register = _apply(_POWERS[power], register)
        count >>= 1
        power += 1
    return register ^ 0xFFFFFFFF


def extents(fd: int, start: int, end: int) -> Iterator[tuple[int, int, bool]]:
    """``(offset, length, is_data)`` covering ``[start, end)`` of the open file ``fd``, in order."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    position = start
    while position < end:
        if seek_data is None or seek_hole is None:
            yield position, end - position, True
            return
        try:
            data = min(os.lseek(fd, position, seek_data), end)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # no support here: read everything
                seek_data = None
                continue
            data = end  # nothing but a hole up to the end of the file
        if data > position:
            yield position, data - position, False
        if data >= end:
            return
        hole = min(os.lseek(fd, data, seek_hole), end)
        yield data, hole - data, True
        position = hole


def crc_of_region(fd: int, start: int, end: int, crc: int = 0) -> int:
    """The CRC-32 of bytes ``[start, end)`` of the open file ``fd``, holes skipped."""
    for offset, length, is_data in extents(fd, start, end):
        if not is_data:
            crc = crc_zeros(crc, length)
            continue
        done = 0
        while done < length:
            piece = _pread(fd, min(_PIECE, length - done), offset + done)
            if not piece:
                raise EOFError(f"the file ended at byte {offset + done} of {end}")
            crc = zlib.crc32(piece, crc)
            done += len(piece)
    return crc


def read_into(fd: int, view: memoryview, start: int = 0) -> int:
    """Fill ``view`` (zeroed) from the file from ``start``, its data regions only; return
    the CRC-32 of what ``view`` then holds. Raises ``EOFError`` if the file is shorter."""
    crc = 0
    end = start + view.nbytes
    for offset, length, is_data in extents(fd, start, end):
        if not is_data:
            crc = crc_zeros(crc, length)
            continue
        done = 0
        while done < length:
            at = offset - start + done
            count = _pread_into(fd, view[at : at + min(_PIECE, length - done)], offset + done)
            if not count:
                raise EOFError(f"the file ended at byte {offset + done} of {end}")
            crc = zlib.crc32(view[at : at + count], crc)
            done += count
    return crc


def _pread(fd: int, count: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, count, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - systems without pread
    return os.read(fd, count)  # pragma: no cover


def _pread_into(fd: int, view: memoryview, offset: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    piece = _pread(fd, view.nbytes, offset)  # pragma: no cover - systems without preadv
    view[: len(piece)] = piece  # pragma: no cover
    return len(piece)  # pragma: no cover
