"""Checkpoint files from an untrusted directory: every header field, the payload's depth and
size, and the restored state's shape are checked; a file failing any check is skipped with a
warning naming it, and the previous valid checkpoint is used."""

from __future__ import annotations

import json
import math
import resource
import struct
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from msgspec import msgpack

from hookrun import (
    CheckpointCorruptionWarning,
    Checkpointer,
    ChiefSessionCreator,
    CorruptCheckpointError,
    LocalStepCounter,
    MonitoredTrainingSession,
    MsgpackCodec,
    latest_checkpoint,
)
from hookrun._checkpoint._file import MAGIC, VERSION
from hookrun._checkpoint._sparse import crc_zeros
from hookrun.hooks import CheckpointSaverHook

pytestmark = pytest.mark.anyio

CODEC = "hookrun-msgpack-1"
MAX_DEPTH = 100  # the documented limit of nested dicts, lists and tuples
MISSING = object()


class Model:
    """A checkpointable session whose weight grows by one every step."""

    def __init__(self) -> None:
        self.weight = 0

    async def run(self, fetches: Any, feed_dict: Any, options: Any, run_metadata: Any) -> list[Any]:
        self.weight += 1
        return [self.weight for _ in fetches]

    def state_dict(self) -> dict[str, int]:
        return {"weight": self.weight}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.weight = state["weight"]


async def save_good(directory: Path) -> None:
    """The valid checkpoint every test falls back to: step 3, weight 3, saved first (seq 1)."""
    await Checkpointer(directory).save(3, {"global_step": 3, "session": {"weight": 3}, "hooks": {}})


def payload_of(structure: bytes) -> bytes:
    return struct.pack("<Q", len(structure)) + structure


def header(size: int, **fields: object) -> bytes:
    """A header for a payload of ``size`` bytes, with ``fields`` changed (``MISSING``: left out)."""
    meta: dict[str, object] = {
        "step": 9, "seq": 2, "codec": CODEC, "saved_at": time.time(), "metric": None,
        "payload_bytes": size,
    }
    for key, value in fields.items():
        if value is MISSING:
            del meta[key]
        else:
            meta[key] = value
    encoded = json.dumps(meta).encode()
    return struct.pack("<8sII", MAGIC, VERSION, len(encoded)) + encoded


def plant(directory: Path, payload: bytes, **fields: object) -> Path:
    """A file named ckpt-9, saved after the good one, with a valid checksum."""
    body = header(len(payload), **fields) + payload
    path = directory / "ckpt-9"
    path.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    return path


def nested_maps(depth: int) -> bytes:
    """MessagePack of ``{"a": {"a": ... None}}``, ``depth`` maps deep."""
    return b"\x81\xa1a" * depth + b"\xc0"


def nested_tuples(depth: int) -> bytes:
    """MessagePack of ``{"t": ((...(),),)}``: a map holding ``depth`` nested tuple extensions."""
    inner = msgpack.encode([])
    for _ in range(depth):
        inner = msgpack.encode([msgpack.Ext(2, inner)])
    return b"\x81\xa1t" + inner[1:]  # the outermost list's single item is the map's value


def nested_state(depth: int) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for _ in range(depth - 1):
        state = {"a": state}
    return state


async def assert_falls_back(directory: Path, match: str) -> None:
    """Checkpointer(d), latest_checkpoint(d) and restore() all skip ckpt-9 with a warning."""
    with pytest.warns(CheckpointCorruptionWarning, match=match):
        assert latest_checkpoint(directory) == str(directory / "ckpt-3")
    with pytest.warns(CheckpointCorruptionWarning, match=match):
        restored = await Checkpointer(directory).restore()
    assert restored is not None and restored.step == 3 and restored.state["session"] == {"weight": 3}


VALUES: dict[str, object] = {
    "string": "7", "null": None, "list": [1], "negative": -5, "nan": math.nan, "huge": 2**70,
    "missing": MISSING,
}
BAD = [
    *[(field, kind) for field in ("step", "seq", "payload_bytes", "saved_at") for kind in VALUES],
    *[("codec", kind) for kind in VALUES if kind != "string"],
    ("metric", "string"),
    ("metric", "list"),
]


@pytest.mark.parametrize(("field", "kind"), BAD)
async def test_a_malformed_header_field_is_skipped(tmp_path: Path, field: str, kind: str) -> None:
    """A header field of the wrong type or range is skipped with a warning naming the file and field."""
    await save_good(tmp_path)
    plant(tmp_path, payload_of(msgpack.encode({"global_step": 9})), **{field: VALUES[kind]})
    match = rf"ckpt-9.*'{field}'"
    with pytest.warns(CheckpointCorruptionWarning, match=match):
        checkpointer = Checkpointer(tmp_path)
    assert [info.step for info in checkpointer.all()] == [3]
    await assert_falls_back(tmp_path, match)


async def test_a_metric_too_large_for_a_float_is_skipped(tmp_path: Path) -> None:
    """A metric of 10**400 (no float holds it) is a malformed header, not an OverflowError."""
    await save_good(tmp_path)
    plant(tmp_path, payload_of(msgpack.encode({})), metric=10**400)
    await assert_falls_back(tmp_path, r"ckpt-9.*'metric'")


@pytest.mark.parametrize("metric", [-5, math.nan, math.inf, 2**70])
async def test_every_metric_save_accepts_reads_back(tmp_path: Path, metric: float) -> None:
    """Negative, NaN, infinite and huge metrics are what save writes, so they read back."""
    checkpointer = Checkpointer(tmp_path)
    await checkpointer.save(1, {}, metric=metric)
    restored = await Checkpointer(tmp_path).restore()
    assert restored is not None
    value = restored.info.metric
    assert value is not None and (math.isnan(value) if math.isnan(metric) else value == metric)


async def test_the_largest_step_reads_back_and_a_larger_one_is_refused(tmp_path: Path) -> None:
    """save accepts steps up to 2**63-1 (which read back) and refuses 2**63, naming it."""
    checkpointer = Checkpointer(tmp_path)
    await checkpointer.save(2**63 - 1, {})
    restored = await Checkpointer(tmp_path).restore()
    assert restored is not None and restored.step == 2**63 - 1
    with pytest.raises(ValueError, match=r"step must be at most 2\*\*63-1, got 9223372036854775808"):
        await checkpointer.save(2**63, {})


@pytest.mark.parametrize("header_value", [b"[1, 2]", b"[" * 100_000, b'"text"'])
async def test_a_header_that_is_not_a_mapping_is_skipped(tmp_path: Path, header_value: bytes) -> None:
    """A header that is a list, a string or 100,000 nested lists is skipped, not a crash."""
    await save_good(tmp_path)
    body = struct.pack("<8sII", MAGIC, VERSION, len(header_value)) + header_value
    (tmp_path / "ckpt-9").write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    await assert_falls_back(tmp_path, "ckpt-9")


@pytest.mark.parametrize(
    "structure",
    [nested_maps(200_000), nested_tuples(5_000), nested_maps(MAX_DEPTH + 1), nested_tuples(MAX_DEPTH)],
    ids=["200k-maps", "5k-extensions", "maps-one-too-deep", "extensions-one-too-deep"],
)
async def test_a_payload_nested_too_deep_is_skipped(tmp_path: Path, structure: bytes) -> None:
    """A payload nesting deeper than save accepts, with a valid checksum, is skipped everywhere."""
    await save_good(tmp_path)
    plant(tmp_path, payload_of(structure))
    await assert_falls_back(tmp_path, r"ckpt-9.*deeper than 100 levels")


async def test_save_refuses_a_state_deeper_than_the_reader_accepts(tmp_path: Path) -> None:
    """The deepest state save accepts reads back; one level more is a ValueError naming where."""
    checkpointer = Checkpointer(tmp_path)
    await checkpointer.save(1, nested_state(MAX_DEPTH))
    restored = await checkpointer.restore()
    assert restored is not None and restored.state == nested_state(MAX_DEPTH)
    with pytest.raises(ValueError, match=r"state\['a'\].*\['a'\]: it is nested 101 levels deep"):
        await checkpointer.save(2, nested_state(MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="nested 101 levels deep"):
        await checkpointer.encode({"t": nested_tuple(MAX_DEPTH)})
    assert [info.step for info in checkpointer.all()] == [1]


def nested_tuple(depth: int) -> tuple[Any, ...]:
    value: tuple[Any, ...] = ()
    for _ in range(depth - 1):
        value = (value,)
    return value


def plant_sparse(directory: Path, apparent: int, *, right_checksum: bool) -> Path:
    """A file of ``apparent`` bytes whose header announces exactly that, all of it a hole but
    the header (a few KiB on disk); its checksum right or not."""
    head = header(0, saved_at=1e9)
    for _ in range(2):  # the second pass accounts for the longer number
        head = header(apparent - len(head) - 4, saved_at=1e9)
    assert len(head) + json.loads(head[16:])["payload_bytes"] + 4 == apparent
    path = directory / "ckpt-9"
    with open(path, "wb") as file:
        file.write(head)
        file.truncate(apparent - 4)
        file.seek(apparent - 4)
        crc = crc_zeros(zlib.crc32(head), apparent - 4 - len(head)) if right_checksum else 0
        file.write(struct.pack("<I", crc))
    return path


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


@pytest.mark.parametrize("apparent", [8 << 30, 1 << 40], ids=["8GiB", "1TiB"])
@pytest.mark.parametrize("right_checksum", [False, True], ids=["bad-crc", "good-crc"])
async def test_a_sparse_file_costs_neither_memory_nor_time(
    tmp_path: Path, apparent: int, right_checksum: bool
) -> None:
    """A planted sparse file (huge apparent size, header consistent) is skipped in well under a
    second, without allocating its size, by latest_checkpoint and restore alike."""
    await save_good(tmp_path)
    path = plant_sparse(tmp_path, apparent, right_checksum=right_checksum)
    assert path.stat().st_size == apparent
    if path.stat().st_blocks * 512 >= 1 << 20:
        pytest.skip("this file system stores no sparse files")
    before, started = peak_rss_bytes(), time.monotonic()
    await assert_falls_back(tmp_path, "ckpt-9")
    assert time.monotonic() - started < 2.0
    assert peak_rss_bytes() - before < 256 << 20


WRONG_SHAPES: dict[str, dict[str, Any]] = {
    "hooks-a-string": {"global_step": 9, "hooks": "abc"},
    "hook-state-an-int": {"global_step": 9, "hooks": {"Model": 1}},
    "session-a-list": {"global_step": 9, "session": [1]},
    "step-negative": {"global_step": -5, "session": {"weight": 9}},
    "step-huge": {"global_step": 2**70, "session": {"weight": 9}},
    "step-a-string": {"global_step": "9", "session": {"weight": 9}},
    "step-a-bool": {"global_step": True, "session": {"weight": 9}},
}


@pytest.mark.parametrize("state", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
async def test_a_state_of_the_wrong_shape_falls_back_in_the_creator(tmp_path: Path, state: dict[str, Any]) -> None:
    """ChiefSessionCreator skips a checkpoint not shaped like a session's, warning, and restores the one before."""
    await save_good(tmp_path)
    await Checkpointer(tmp_path).save(9, state)
    counter = LocalStepCounter()
    creator = ChiefSessionCreator(Model, tmp_path, step_counter=counter)
    with pytest.warns(CheckpointCorruptionWarning, match="ckpt-9"):
        session = await creator.create_session()
    assert session.weight == 3 and await counter.get() == 3
    assert creator.restored is not None and creator.restored.step == 3


async def test_an_explicit_checkpoint_of_the_wrong_shape_is_an_error_naming_it(tmp_path: Path) -> None:
    """checkpoint_path= of a wrongly shaped file raises CorruptCheckpointError naming it and the key."""
    await Checkpointer(tmp_path).save(9, {"hooks": "abc"})
    creator = ChiefSessionCreator(Model, checkpoint_path=tmp_path / "ckpt-9", step_counter=LocalStepCounter())
    with pytest.raises(CorruptCheckpointError, match=r"ckpt-9.*its hooks are a str"):
        await creator.create_session()


def plant_sparse_default(directory: Path) -> None:
    plant_sparse(directory, 8 << 30, right_checksum=True)


PLANTED = {
    "saved-at-a-string": lambda d: plant(d, payload_of(msgpack.encode({})), saved_at="x"),
    "saved-at-null": lambda d: plant(d, payload_of(msgpack.encode({})), saved_at=None),
    "step-negative-in-header": lambda d: plant(d, payload_of(msgpack.encode({})), step=-5),
    "200k-nested-maps": lambda d: plant(d, payload_of(nested_maps(200_000))),
    "5k-nested-extensions": lambda d: plant(d, payload_of(nested_tuples(5_000))),
    "sparse-8GiB": plant_sparse_default,
    "hooks-a-string": lambda d: plant(d, payload_of(msgpack.encode({"global_step": 9, "hooks": "abc"}))),
    "global-step-huge": lambda d: plant(
        d, payload_of(msgpack.encode({"global_step": msgpack.Ext(3, str(2**70).encode())}))
    ),
}


@pytest.mark.parametrize("make", PLANTED.values(), ids=PLANTED.keys())
async def test_monitored_training_session_falls_back_to_the_previous_checkpoint(tmp_path: Path, make: Any) -> None:
    """MonitoredTrainingSession(checkpoint_dir=d) starts from the previous valid checkpoint."""
    await save_good(tmp_path)
    make(tmp_path)
    with pytest.warns(CheckpointCorruptionWarning, match="ckpt-9"):
        async with MonitoredTrainingSession(Model, checkpoint_dir=tmp_path, log_step_count_steps=0) as session:
            assert await session.step_counter.get() == 3
            assert await session.run("weight") == 4


INDEX_FIELDS: dict[str, dict[str, object]] = {
    "checkpoints-an-int": {"checkpoints": 5},
    "checkpoints-a-string": {"checkpoints": "abc"},
    "checkpoints-of-ints": {"checkpoints": [1]},
    "mark-too-large-for-a-float": {"last_preserved_at": 10**400},
    "mark-nan": {"last_preserved_at": math.nan},
    "mark-a-string": {"last_preserved_at": "x"},
    "mark-negative": {"last_preserved_at": -5},
    "entry-fields-wrong": {"checkpoints": [{"name": "ckpt-3", "step": "x", "seq": None, "saved_at": [1]}]},
}


@pytest.mark.parametrize("fields", INDEX_FIELDS.values(), ids=INDEX_FIELDS.keys())
async def test_malformed_index_fields_are_ignored(tmp_path: Path, fields: dict[str, object]) -> None:
    """Index fields of the wrong type or range are ignored: the checkpoints come from their files."""
    await save_good(tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    index.update(fields)
    (tmp_path / "index.json").write_text(json.dumps(index))
    checkpointer = Checkpointer(tmp_path)
    assert [(info.step, info.preserved) for info in checkpointer.all()] == [(3, False)]
    assert latest_checkpoint(tmp_path) == str(tmp_path / "ckpt-3")
    await checkpointer.save(4, {})
    assert [info.step for info in Checkpointer(tmp_path).all()] == [3, 4]


async def test_only_a_true_preserved_flag_in_the_index_preserves(tmp_path: Path) -> None:
    """A "preserved" entry that is not true (the string "no") does not keep a checkpoint for good."""
    await save_good(tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    index["checkpoints"][0]["preserved"] = "no"
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert [info.preserved for info in Checkpointer(tmp_path).all()] == [False]


@pytest.mark.parametrize("saved_at", ["x", None, [1]], ids=["string", "null", "list"])
async def test_every_constructor_on_the_directory_starts(tmp_path: Path, saved_at: object) -> None:
    """Checkpointer, CheckpointSaverHook and ChiefSessionCreator on a directory holding a malformed
    header all start, warning about the file, and see only the valid checkpoint."""
    await save_good(tmp_path)
    plant(tmp_path, payload_of(msgpack.encode({})), saved_at=saved_at)
    with pytest.warns(CheckpointCorruptionWarning, match=r"ckpt-9.*'saved_at'"):
        saver = CheckpointSaverHook(tmp_path, save_steps=1)
    assert [info.step for info in saver.checkpointer.all()] == [3]
    with pytest.warns(CheckpointCorruptionWarning, match=r"ckpt-9.*'saved_at'"):
        creator = ChiefSessionCreator(Model, tmp_path, step_counter=LocalStepCounter())
    with pytest.warns(CheckpointCorruptionWarning, match=r"ckpt-9.*'saved_at'"):
        session = await creator.create_session()
    assert session.weight == 3


async def test_an_explicit_sparse_file_is_an_error_at_once(tmp_path: Path) -> None:
    """restore(path) of a planted sparse file raises CorruptCheckpointError naming it, in well under a second."""
    path = plant_sparse(tmp_path, 1 << 40, right_checksum=True)
    started = time.monotonic()
    with pytest.raises(CorruptCheckpointError, match="ckpt-9") as caught:
        await Checkpointer(tmp_path).restore(path)
    assert caught.value.path == str(path) and time.monotonic() - started < 2.0


def structure_with(value: object) -> memoryview:
    """A payload whose structure is ``{"x": value}``, followed by 128 bytes of buffers."""
    structure = msgpack.encode({"x": value})
    padding = -(8 + len(structure)) % 64
    return memoryview(bytearray(payload_of(structure) + bytes(padding + 128)))


MALFORMED_EXTENSIONS: dict[str, object] = {
    "descriptor-a-string": msgpack.Ext(1, msgpack.encode("abc")),
    "descriptor-too-short": msgpack.Ext(1, msgpack.encode(["<f8", [1], 0])),
    "shape-a-string": msgpack.Ext(1, msgpack.encode(["<f8", "x", 0, 8])),
    "offset-negative": msgpack.Ext(1, msgpack.encode(["<f8", [1], -64, 8])),
    "shape-huge": msgpack.Ext(1, msgpack.encode(["<f8", [2**64 - 1, 2**64 - 1], 0, 8])),
    "buffer-past-the-payload": msgpack.Ext(1, msgpack.encode(["<f8", [100], 0, 800])),
    "dtype-object": msgpack.Ext(1, msgpack.encode(["|O", [1], 0, 8])),
    "dtype-a-number": msgpack.Ext(1, msgpack.encode([5, [1], 0, 8])),
    "dtype-unknown": msgpack.Ext(1, msgpack.encode(["<q9", [1], 0, 8])),
    "scalar-too-short": msgpack.Ext(4, msgpack.encode(["<f8", b"\x00"])),
    "scalar-not-a-pair": msgpack.Ext(4, msgpack.encode(5)),
    "bigint-not-digits": msgpack.Ext(3, b"12x"),
    "bigint-not-text": msgpack.Ext(3, b"\xff\xfe"),
    "unknown-code": msgpack.Ext(9, b""),
}


@pytest.mark.parametrize("value", MALFORMED_EXTENSIONS.values(), ids=MALFORMED_EXTENSIONS.keys())
def test_a_malformed_extension_is_a_value_error(value: object) -> None:
    """Every malformed array, scalar or big-int extension is a ValueError, never another error."""
    with pytest.raises(ValueError, match=r"array|dtype|extension|invalid literal|codec can't decode|buffer"):
        MsgpackCodec().decode(structure_with(value))


def test_a_key_of_another_type_is_a_value_error() -> None:
    """A map key the encoder never writes (a tuple extension) is refused."""
    structure = b"\x81" + msgpack.encode(msgpack.Ext(2, msgpack.encode([]))) + b"\xc0"
    with pytest.raises(ValueError, match="key of type tuple"):
        MsgpackCodec().decode(memoryview(bytearray(payload_of(structure))))
