"""What a checkpoint directory holds: its entries, its index file, and which to keep.

The index (``index.json``, written atomically) lists the checkpoints in save
order with their step, save time and metric, and which ones are kept for
good. It is an aid, never the truth: ``scan`` reconciles it with the files
present (a file the index lacks is adopted from its own header, an entry
whose file is gone is dropped), so a process killed between writing a
checkpoint and updating the index loses nothing.

Retention (``Retention.select``) is pure: the newest ``max_to_keep`` by save
order, plus one every ``keep_checkpoint_every_n_hours`` (TensorFlow's rule),
plus the ``keep_best`` best by metric. Blocking I/O: call ``scan`` and
``write_index`` in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import warnings
from dataclasses import dataclass, replace
from typing import Any, Literal

from ._checkpoint_file import (
    MAGIC,
    CorruptCheckpointError,
    is_temporary,
    read_meta,
    temporary_owner,
    write_atomically,
)

__all__ = ["INDEX", "CheckpointCorruptionWarning", "CheckpointInfo", "Retention", "scan", "write_index"]

INDEX = "index.json"
_FORMAT = "hookrun-checkpoint-index"


class CheckpointCorruptionWarning(UserWarning):
    """A checkpoint file was found corrupt and skipped; the message names it."""


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One checkpoint: its ``path``, global ``step``, save order ``seq``, wall-clock
    ``saved_at``, the monitored ``metric`` (or ``None``) and whether it is ``preserved``
    for good by ``keep_checkpoint_every_n_hours``."""

    path: str
    step: int
    seq: int
    saved_at: float
    metric: float | None = None
    preserved: bool = False


def warn_corrupt(error: CorruptCheckpointError) -> None:
    warnings.warn(f"{error}; skipping it", CheckpointCorruptionWarning, stacklevel=3)


def _from_meta(path: str, meta: dict[str, Any]) -> CheckpointInfo:
    metric = meta.get("metric")
    return CheckpointInfo(
        path,
        meta["step"],
        meta["seq"],
        float(meta.get("saved_at", 0.0)),
        float(metric) if isinstance(metric, (int, float)) else None,
    )


def _read_index(directory: str) -> dict[str, Any]:
    try:
        with open(os.path.join(directory, INDEX), "rb") as file:
            index = json.load(file)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        warnings.warn(
            f"checkpoint index {os.path.join(directory, INDEX)!r} is unreadable ({exc}); "
            "rebuilding it from the checkpoint files",
            CheckpointCorruptionWarning,
            stacklevel=3,
        )
        return {}
    return index if isinstance(index, dict) and index.get("format") == _FORMAT else {}


def _indexed(directory: str, index: dict[str, Any]) -> dict[str, CheckpointInfo]:
    entries: dict[str, CheckpointInfo] = {}
    items = index.get("checkpoints", [])
    for item in items if isinstance(items, list) else ():
        try:
            name = str(item["name"])
            info = CheckpointInfo(
                os.path.join(directory, name),
                int(item["step"]),
                int(item["seq"]),
                float(item["saved_at"]),
                None if item.get("metric") is None else float(item["metric"]),
                item.get("preserved") is True,
            )
        except (KeyError, TypeError, ValueError):
            continue
        entries[name] = info
    return entries


def _looks_like_checkpoint(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            return file.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def scan(directory: str, *, clean: bool = False) -> tuple[list[CheckpointInfo], float | None]:
    """The checkpoints in ``directory`` in save order, and the index's last preserved time.

    Files whose header is unreadable are skipped with a warning naming them.
    With ``clean``, temporary files left by dead processes are removed.
    """
    index = _read_index(directory)
    known = _indexed(directory, index)
    found: list[CheckpointInfo] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return [], None
    for name in names:
        path = os.path.join(directory, name)
        if is_temporary(name):
            if clean:
                _remove_stale(path, name)
            continue
        if name == INDEX or name.startswith(".") or not os.path.isfile(path):
            continue
        if name not in known and not _looks_like_checkpoint(path):
            continue
        try:
            meta = read_meta(path)
        except CorruptCheckpointError as error:
            warn_corrupt(error)
            continue
        except OSError:
            continue
        info = _from_meta(path, meta)
        if name in known and known[name].seq == info.seq:
            info = replace(info, preserved=known[name].preserved)
        found.append(info)
    found.sort(key=lambda info: (info.seq, info.saved_at))
    return found, _time_or_none(index.get("last_preserved_at"))


def _time_or_none(value: object) -> float | None:
    """The index's last preserved time if it is one (a number from 1970 to 9999), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value < 253402300800 else None


def _remove_stale(path: str, name: str) -> None:
    owner = temporary_owner(name)
    if owner is None or owner == os.getpid() or _alive(owner):
        return
    with contextlib.suppress(OSError):
        os.unlink(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def write_index(directory: str, entries: list[CheckpointInfo], last_preserved_at: float | None) -> None:
    """Write the index for ``entries`` atomically; the caller fsyncs the directory.

    The file is fsynced only when it holds what the checkpoint files do not:
    which ones are preserved for good. Otherwise a lost update is rebuilt by
    ``scan`` from the files' own headers.
    """
    index = {
        "format": _FORMAT,
        "version": 1,
        "last_preserved_at": last_preserved_at,
        "checkpoints": [
            {
                "name": os.path.basename(info.path),
                "step": info.step,
                "seq": info.seq,
                "saved_at": info.saved_at,
                "metric": info.metric,
                "preserved": info.preserved,
            }
            for info in entries
        ],
    }
    durable = any(info.preserved for info in entries)
    write_atomically(
        os.path.join(directory, INDEX), [json.dumps(index, indent=1).encode()],
        sync_file=durable, sync_directory=False,
    )


@dataclass(frozen=True, slots=True)
class Retention:
    """Which checkpoints to keep (see the module docstring)."""

    max_to_keep: int | None = 5
    keep_checkpoint_every_n_hours: float | None = None
    keep_best: int | None = None
    mode: Literal["min", "max"] = "min"

    def select(
        self, entries: list[CheckpointInfo], last_preserved_at: float | None
    ) -> tuple[list[CheckpointInfo], list[CheckpointInfo], float | None]:
        """Split ``entries`` (save order) into (kept, removed) and return the new preserve mark."""
        if self.max_to_keep is None:
            return list(entries), [], last_preserved_at
        recent = {info.seq for info in entries[-self.max_to_keep :]}
        best = self._best(entries)
        kept: list[CheckpointInfo] = []
        removed: list[CheckpointInfo] = []
        mark = last_preserved_at
        for info in entries:
            if info.seq in recent or info.preserved or info.seq in best:
                kept.append(info)
                continue
            hours = self.keep_checkpoint_every_n_hours
            if hours is not None and (mark is None or info.saved_at - hours * 3600.0 >= mark):
                mark = info.saved_at
                kept.append(replace(info, preserved=True))
                continue
            removed.append(info)
        return kept, removed, mark

    def _best(self, entries: list[CheckpointInfo]) -> set[int]:
        if not self.keep_best:
            return set()
        scored = [info for info in entries if info.metric is not None and not math.isnan(info.metric)]
        sign = 1.0 if self.mode == "min" else -1.0
        # Ties go to the newer checkpoint.
        scored.sort(key=lambda info: (sign * info.metric, -info.seq))  # type: ignore[operator]
        return {info.seq for info in scored[: self.keep_best]}
