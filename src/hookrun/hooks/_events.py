"""Read scalars back from TensorBoard event files (TensorFlow's ``read_eval_metrics``).

An event file is a sequence of TFRecords: little-endian u64 length, masked
CRC32C of the length, the serialized ``Event`` proto, masked CRC32C of the
data. Protos come from tensorboardX (the ``hookrun[tensorboard]`` extra). A
corrupt record ends the reading of that file with a warning, as in
TensorFlow; a missing or empty directory reads as ``{}``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._common import import_optional, logger

__all__ = ["read_eval_metrics"]

_GLOB = "events.out.tfevents.*"


def read_eval_metrics(eval_dir: str | os.PathLike[str]) -> dict[int, dict[str, float]]:
    """Map global step → {tag: scalar value} for every scalar in ``eval_dir``'s event files.

    Steps come out in ascending order; a later event overrides an earlier one
    for the same step and tag. This reads files in the calling thread: in async
    code call it through ``anyio.to_thread.run_sync(read_eval_metrics, eval_dir)``.

    Args:
        eval_dir: The directory of TensorBoard event files.

    Returns:
        Global step → {tag: value}, in ascending step order.
    """
    metrics: dict[int, dict[str, float]] = {}
    directory = Path(eval_dir)
    if not directory.is_dir():
        return {}
    for path in sorted(directory.glob(_GLOB)):
        for event in _events(path):
            values = {
                v.tag: v.simple_value for v in event.summary.value if v.HasField("simple_value")
            }
            if values:
                metrics.setdefault(event.step, {}).update(values)
    return dict(sorted(metrics.items()))


def _events(path: Path) -> Iterator[Any]:
    event_pb2 = import_optional("tensorboardX.proto.event_pb2", "tensorboard", "read_eval_metrics")
    decode_error = import_optional(
        "google.protobuf.message", "tensorboard", "read_eval_metrics"
    ).DecodeError

    try:
        for record in _records(path.read_bytes()):
            event = event_pb2.Event()
            event.ParseFromString(record)
            yield event
    except (ValueError, decode_error) as exc:
        logger.warning("Skipping rest of the event file %s: %s", path, exc)


def _records(data: bytes) -> Iterator[bytes]:
    from tensorboardX.record_writer import masked_crc32c

    offset = 0
    while offset < len(data):
        if offset + 12 > len(data):
            raise ValueError(f"truncated record header at byte {offset}")
        header = data[offset : offset + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[offset + 8 : offset + 12])
        start, stop = offset + 12, offset + 12 + length
        if header_crc != masked_crc32c(header) or stop + 4 > len(data):
            raise ValueError(f"corrupt record at byte {offset}")
        record = data[start:stop]
        if struct.unpack("<I", data[stop : stop + 4])[0] != masked_crc32c(record):
            raise ValueError(f"corrupt record data at byte {offset}")
        yield record
        offset = stop + 4
