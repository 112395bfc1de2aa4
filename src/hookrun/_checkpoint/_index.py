"""What one set of checkpoints holds: its entries, its index file, and which to keep.

A set is the checkpoints of one basename in one directory: the regular files
named exactly ``<basename>-<step>``. Nothing else in the directory belongs to
it (another basename's files, a user's ``ckpt-1.keep``, a symbolic link), so
nothing else is ever listed, restored or removed. Each set has its own index,
``index.json`` for the default basename and ``<basename>.index.json`` for any
other, so sets sharing a directory never overwrite each other's.

The index (written atomically) lists the set's checkpoints in save order with
their step, save time and metric, and which ones are kept for good. It is an
aid, never the truth: ``scan`` reconciles it with the files present (a file the
index lacks is adopted from its own header, an entry whose file is gone is
dropped), so a process killed between writing a checkpoint and updating the
index loses nothing.

Retention (``Retention.select``) is pure: the newest ``max_to_keep`` by save
order, plus one every ``keep_checkpoint_every_n_hours`` (TensorFlow's rule),
plus the ``keep_best`` best by metric (a tie goes to the older). Blocking I/O:
call ``scan`` and ``write_index`` in a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import warnings
from dataclasses import dataclass, replace
from typing import Any, Literal

from ._file import (
    CorruptCheckpointError,
    is_temporary,
    read_meta,
    temporary_owner,
    write_atomically,
)

__all__ = [
    "DEFAULT_BASENAME",
    "INDEX",
    "CheckpointCorruptionWarning",
    "CheckpointInfo",
    "Retention",
    "index_name",
    "is_own",
    "scan",
    "step_of",
    "write_index",
]

INDEX = "index.json"
DEFAULT_BASENAME = "ckpt"
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


def index_name(basename: str) -> str:
    """The index file of the set ``basename``: ``index.json`` for the default one."""
    return INDEX if basename == DEFAULT_BASENAME else f"{basename}.{INDEX}"


def step_of(name: str, basename: str) -> int | None:
    """The step of the checkpoint file ``name`` of the set ``basename``, or ``None`` if
    ``name`` is not exactly ``<basename>-<step>`` as a save writes it (no sign, no
    leading zero, no suffix)."""
    prefix = basename + "-"
    digits = name[len(prefix) :]
    if not name.startswith(prefix) or not (digits.isascii() and digits.isdigit()):
        return None
    if digits != "0" and digits.startswith("0"):
        return None
    return int(digits)


def _read_index(directory: str, basename: str, *, strict: bool) -> dict[str, Any]:
    path = os.path.join(directory, index_name(basename))
    try:
        if os.path.islink(path):  # never followed: treated as a file this set did not write
            index = None
        else:
            with open(path, "rb") as file:
                index = json.load(file)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        warnings.warn(
            f"checkpoint index {path!r} is unreadable ({exc}); rebuilding it from the checkpoint files",
            CheckpointCorruptionWarning,
            stacklevel=3,
        )
        return {}
    if isinstance(index, dict) and index.get("format") == _FORMAT and index.get("basename", basename) == basename:
        return index
    if strict:  # never overwrite a file this checkpointer did not write
        raise ValueError(
            f"Checkpointer: {path!r} is not the checkpoint index of basename {basename!r}, and "
            "saving would overwrite it: move it away, or give the Checkpointer another basename="
        )
    return {}


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


def scan(directory: str, basename: str, *, clean: bool = False) -> tuple[list[CheckpointInfo], float | None]:
    """The checkpoints of the set ``basename`` in ``directory`` in save order, and the
    index's last preserved time.

    Only regular files named exactly ``<basename>-<step>`` are looked at; every
    other entry of the directory (another set's files, a user's copies, a
    directory) is ignored. Such a file that is a symbolic link, whose header is
    unreadable, or whose header is of another step than its name, is skipped
    with a warning naming it. With ``clean`` (the owning checkpointer's scan),
    this set's temporary files left by dead processes are removed, and an index
    file that is not this set's is a ``ValueError`` naming it (it is never overwritten).
    """
    index = _read_index(directory, basename, strict=clean)
    known = _indexed(directory, index)
    found: list[CheckpointInfo] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return [], None
    for name in names:
        if is_temporary(name):
            if clean and _is_own_temporary(name, basename):
                _remove_stale(os.path.join(directory, name), name)
            continue
        step = step_of(name, basename)
        if step is None:
            continue
        info = _entry(os.path.join(directory, name), step)
        if info is None:
            continue
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


def _entry(path: str, step: int) -> CheckpointInfo | None:
    """The checkpoint at ``path`` (named for ``step``) from its header, or ``None`` (with a
    warning if it is not a readable checkpoint of that step)."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            raise CorruptCheckpointError(path, "it is a symbolic link, and links are never followed")
        if not stat.S_ISREG(mode):
            return None
        info = _from_meta(path, read_meta(path))
    except CorruptCheckpointError as error:
        warn_corrupt(error)
        return None
    except OSError:
        return None
    if info.step != step:
        warn_corrupt(CorruptCheckpointError(path, f"its header is of step {info.step}, not of the step its name says"))
        return None
    return info


def is_own(path: str, basename: str) -> bool:
    """Whether the scanned ``path`` is still a regular file of the set ``basename``
    (checked again right before it is read: never follow a link planted since the scan)."""
    if step_of(os.path.basename(path), basename) is None:
        return False
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_own_temporary(name: str, basename: str) -> bool:
    """Whether the temporary file ``name`` (``.<target>.tmp-<pid>-<token>``) is one a
    checkpointer of ``basename`` writes: of one of its checkpoints, of its index, or its probe."""
    target = name[1:].rsplit(".tmp-", 1)[0]
    return step_of(target, basename) is not None or target in (index_name(basename), "probe")


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


def write_index(directory: str, basename: str, entries: list[CheckpointInfo], last_preserved_at: float | None) -> None:
    """Write the index of the set ``basename`` for ``entries`` atomically; the caller
    fsyncs the directory.

    The file is fsynced only when it holds what the checkpoint files do not:
    which ones are preserved for good. Otherwise a lost update is rebuilt by
    ``scan`` from the files' own headers.
    """
    index = {
        "format": _FORMAT,
        "version": 1,
        "basename": basename,
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
        os.path.join(directory, index_name(basename)), [json.dumps(index, indent=1).encode()],
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

    def ranked(self, entries: list[CheckpointInfo]) -> list[CheckpointInfo]:
        """The entries that have a metric (not NaN), best first; of equal metrics, the older first."""
        scored = [info for info in entries if info.metric is not None and not math.isnan(info.metric)]
        sign = 1.0 if self.mode == "min" else -1.0
        scored.sort(key=lambda info: (sign * info.metric, info.seq))  # type: ignore[operator]
        return scored

    def _best(self, entries: list[CheckpointInfo]) -> set[int]:
        if not self.keep_best:
            return set()
        return {info.seq for info in self.ranked(entries)[: self.keep_best]}
