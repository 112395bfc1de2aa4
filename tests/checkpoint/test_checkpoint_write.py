"""How a checkpoint is written: the CRC-32 footer, batched writes that survive short
writes, arrays written from their own memory by ``save``, deterministic bytes, and the
lower-priority writer thread."""

from __future__ import annotations

import os
import struct
import sys
import threading
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hookrun import Checkpointer, MsgpackCodec
from hookrun._checkpoint import _file as _checkpoint_file

pytestmark = pytest.mark.anyio


def state_of_arrays() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    return {
        "a": rng.standard_normal(1001, dtype=np.float32),  # odd sizes: padding between buffers
        "b": np.arange(7, dtype=">i2"),
        "c": np.asfortranarray(rng.standard_normal((3, 5))),
        "n": 3,
    }


async def test_the_file_ends_with_the_crc32_of_everything_before(tmp_path: Path) -> None:
    """The last four bytes are the little-endian CRC-32 of the rest of the file."""
    info = await Checkpointer(tmp_path).save(3, state_of_arrays())
    with open(info.path, "rb") as file:  # noqa: ASYNC230 - a small local file in a test
        data = file.read()
    assert data[:8] == b"HKRNCKPT"
    assert struct.unpack("<I", data[-4:])[0] == zlib.crc32(data[:-4])


async def test_save_writes_the_same_bytes_as_a_snapshot(tmp_path: Path) -> None:
    """save (arrays written from their own memory) and encode + write (a copy first) give
    the same payload, and it restores exactly."""
    state = state_of_arrays()
    direct = Checkpointer(tmp_path / "direct")
    copied = Checkpointer(tmp_path / "copied")
    one = await direct.save(1, state)
    two = await copied.write(1, await copied.encode(state))
    meta_one, payload_one = _checkpoint_file.read_file(one.path)
    meta_two, payload_two = _checkpoint_file.read_file(two.path)
    assert bytes(payload_one) == bytes(payload_two)
    assert meta_one["payload_bytes"] == meta_two["payload_bytes"]
    restored = await direct.restore()
    assert restored is not None
    for key in ("a", "b", "c"):
        assert restored.state[key].dtype == state[key].dtype
        np.testing.assert_array_equal(restored.state[key], state[key])


def test_encoding_is_deterministic_padding_included() -> None:
    """Two encodings of one state are byte for byte equal (the alignment padding is zeros),
    copied or not."""
    codec = MsgpackCodec()
    state = state_of_arrays()

    def joined(chunks: Sequence[Any]) -> bytes:
        return b"".join(bytes(memoryview(chunk).cast("B")) for chunk in chunks)

    first = joined(codec.encode(state))
    assert joined(codec.encode(state)) == first
    assert joined(codec._encode(state, copy=False)) == first
    assert len(codec.encode(state)) == 4  # length, structure, padding, one buffer section


async def test_short_writes_are_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writev that writes only part of what it was given is continued where it stopped."""
    real = os.writev

    def stingy(fd: int, buffers: Sequence[Any]) -> int:
        return real(fd, [memoryview(buffers[0]).cast("B")[:1000]])

    monkeypatch.setattr(os, "writev", stingy)
    state = state_of_arrays()
    checkpointer = Checkpointer(tmp_path)
    await checkpointer.save(1, state)
    restored = await checkpointer.restore()
    assert restored is not None
    np.testing.assert_array_equal(restored.state["a"], state["a"])


async def test_the_checksum_is_right_without_mmap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a file cannot be mapped, the checksum is computed by reading the file back."""
    import mmap

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError(19, "No such device")

    monkeypatch.setattr(mmap, "mmap", refuse)
    state = state_of_arrays()
    checkpointer = Checkpointer(tmp_path)
    info = await checkpointer.save(1, state)
    _checkpoint_file.verify_file(info.path)
    restored = await checkpointer.restore()
    assert restored is not None
    np.testing.assert_array_equal(restored.state["c"], state["c"])


async def test_a_write_that_makes_no_progress_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writev returning 0 raises instead of spinning; no temporary file is left."""
    monkeypatch.setattr(os, "writev", lambda fd, buffers: 0)
    with pytest.raises(OSError, match="made no progress"):
        await Checkpointer(tmp_path).save(1, {"x": 1})
    assert [name for name in os.listdir(tmp_path) if name.startswith(".")] == []


class Probe:
    """A codec recording the thread that encodes (for ``save``, the writer thread)."""

    name = "probe"

    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def encode(self, state: Mapping[str, Any]) -> list[bytes]:
        self.seen.append((threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, 0)))
        return [b"x"]

    def decode(self, payload: memoryview) -> dict[str, Any]:
        return {}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
async def test_files_are_written_by_a_lower_priority_thread(tmp_path: Path) -> None:
    """With write_nice=5 the write runs in a thread 5 below the caller; None in the caller's
    worker thread, at its priority."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    lowered, same = Probe(), Probe()
    await Checkpointer(tmp_path / "a", codec=lowered, write_nice=5).save(1, {})
    await Checkpointer(tmp_path / "b", codec=same, write_nice=None).save(1, {})
    assert lowered.seen == [("hookrun-checkpoint-writer", min(base + 5, 19))]
    assert same.seen[0][1] == base and same.seen[0][0] != "hookrun-checkpoint-writer"
    assert os.getpriority(os.PRIO_PROCESS, 0) == base


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), (True, TypeError), (1.5, TypeError), ("5", TypeError)])
def test_bad_write_nice_is_named(tmp_path: Path, value: object, error: type[Exception]) -> None:
    """write_nice must be None or an int >= 0 (another type is a TypeError)."""
    with pytest.raises(error, match="write_nice must be None or an int >= 0"):
        Checkpointer(tmp_path, write_nice=value)  # type: ignore[arg-type]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_writer_threads_are_kept_and_not_inherited_across_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_lowered returns the job's value or raises its error; its thread is reused, but
    not by a process that forked (that child makes its own)."""
    from hookrun._checkpoint import _writer as _checkpoint_writer

    first = _checkpoint_writer.run_lowered(7, threading.get_ident)
    assert _checkpoint_writer.run_lowered(7, threading.get_ident) == first != threading.get_ident()
    with pytest.raises(ZeroDivisionError):
        _checkpoint_writer.run_lowered(7, lambda: 1 / 0)
    real_pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real_pid + 1)  # as a forked child sees it
    assert _checkpoint_writer.run_lowered(7, threading.get_ident) != first
    assert _checkpoint_writer.run_lowered(0, threading.get_ident) == threading.get_ident()


@pytest.mark.parametrize("piece", [None, 4096])
async def test_many_buffers_and_many_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int | None) -> None:
    """More buffers than one writev takes, and (with small batches) a file written and
    checksummed in many pieces, still round-trip and verify."""
    if piece is not None:
        monkeypatch.setattr(_checkpoint_file, "_PIECE", piece)
    state = {f"w{i}": np.full(i % 7 + 1, i, dtype=np.float64) for i in range(1500)}
    state["big"] = np.arange(50_000, dtype=np.int32)
    checkpointer = Checkpointer(tmp_path)
    info = await checkpointer.save(1, state)
    _checkpoint_file.verify_file(info.path)
    restored = await checkpointer.restore()
    assert restored is not None
    assert set(restored.state) == set(state)
    for key, array in state.items():
        np.testing.assert_array_equal(restored.state[key], array)


@pytest.mark.parametrize("path", ["save", "encode_write"])
async def test_empty_arrays_after_the_last_buffer(tmp_path: Path, path: str) -> None:
    """Empty arrays placed after an odd-sized one point past its end: the section covers
    them, whether the arrays are copied or written from their memory."""
    state: dict[str, Any] = {
        "odd": np.arange(3, dtype=np.float32), "empty": np.zeros((0, 4)), "also": np.array([], dtype=">i8"),
    }
    checkpointer = Checkpointer(tmp_path)
    if path == "save":
        await checkpointer.save(1, state)
    else:
        await checkpointer.write(1, await checkpointer.encode(state))
    restored = await checkpointer.restore()
    assert restored is not None
    for key, array in state.items():
        assert restored.state[key].dtype == array.dtype and restored.state[key].shape == array.shape
        np.testing.assert_array_equal(restored.state[key], array)
    codec = MsgpackCodec()
    copied = b"".join(bytes(memoryview(c).cast("B")) for c in codec.encode(state))
    assert b"".join(bytes(memoryview(c).cast("B")) for c in codec._encode(state, copy=False)) == copied
