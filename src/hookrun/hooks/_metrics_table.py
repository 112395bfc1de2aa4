"""The file behind ``MetricsFileHook``: a table of one row per step, as CSV or JSON lines,
its rows encoded, and a file already there read back and cut where the session starts.

Format. CSV: a header ``step,<column>,...``, then one line per row, numbers only
(``repr`` of a float: ``nan``, ``inf``, ``-inf`` included). JSON lines: one object
per line, ``{"step": <step>, "<column>": <value>, ...}``; JSON has no NaN or
infinity, so a non-finite float is written as ``null``. A value is a bool, an int,
a float, or anything with an ``item()`` giving one (a NumPy scalar, a 0-d array or
tensor) or a ``numbers.Real`` (written as a float); anything else is refused.

Invariants. Every line ends in ``"\\n"``; a line without it (the end of a write cut
short by a crash) is torn, and dropped when the file is opened again. Opening keeps
the rows whose step is at most the step the session starts at and cuts the file
before the first row beyond it (a resumed run writes those steps again), so no step
is in the file twice. A complete line that is not a row of this table (another
header, a malformed line) is an error naming the line: the file is never rewritten
on a guess. ``encode`` runs on the event loop (no I/O); ``open``, ``write`` and
``finish`` do file I/O and run in a worker thread, one at a time.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Literal

__all__ = ["Cut", "Format", "MetricsTable", "format_of"]

Format = Literal["csv", "jsonl"]
Scalar = bool | int | float

#: The suffixes whose format is known without ``format=``.
SUFFIXES: dict[str, Format] = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def format_of(owner: str, path: str, given: object) -> Format:
    """The table's format: ``given``, or the one ``path``'s suffix names."""
    if given is not None:
        if given not in ("csv", "jsonl"):
            raise ValueError(f'{owner}: format must be None, "csv" or "jsonl", got {given!r}')
        return "csv" if given == "csv" else "jsonl"
    suffix = os.path.splitext(path)[1].lower()
    found = SUFFIXES.get(suffix)
    if found is None:
        raise ValueError(
            f"{owner}: cannot tell the format of path {path!r} from its suffix {suffix!r}: "
            f'name it .csv, .jsonl or .ndjson, or pass format="csv" or format="jsonl"'
        )
    return found


@dataclass(frozen=True, slots=True)
class Cut:
    """What opening the file kept and dropped."""

    #: The step of the last row kept (``None``: no row).
    last_step: int | None
    #: Complete rows dropped (their step is beyond the session's start).
    dropped_rows: int
    #: Whether a torn last line was dropped.
    torn: bool


class MetricsTable:
    """One metrics file: ``open`` (reading and cutting what is there), ``write``, ``finish``."""

    def __init__(self, owner: str, path: str, fmt: Format, columns: Sequence[str]) -> None:
        self.owner = owner
        self.path = path
        self.format: Format = fmt
        self.columns = tuple(columns)
        self._header = _csv_line(["step", *self.columns])
        self._file: IO[str] | None = None
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self._file is not None

    # -- rows (on the event loop) ---------------------------------------------------------

    def encode(self, step: int, values: Sequence[object]) -> str:
        """The line of the row of ``step`` (``values`` in column order)."""
        row = [_scalar(self.owner, column, step, value) for column, value in zip(self.columns, values, strict=True)]
        try:
            if self.format == "csv":
                return ",".join([str(step), *map(_csv_cell, row)]) + "\n"
            cells = [None if isinstance(v, float) and not math.isfinite(v) else v for v in row]
            return json.dumps({"step": step, **dict(zip(self.columns, cells, strict=True))}) + "\n"
        except ValueError as exc:  # an int too long to write as decimal digits
            raise ValueError(f"{self.owner}: cannot write the row of step {step} to {self.path}: {exc}") from None

    # -- the file (in a worker thread) ----------------------------------------------------

    def open(self, start: int | None) -> Cut:
        """Open the file to append, after its rows of steps <= ``start`` (all: ``None``);
        an open file is closed and opened again (the step went back: recovery restored)."""
        with self._lock:
            self._close()
            if os.path.isdir(self.path):
                raise IsADirectoryError(f"{self.owner}: path {self.path!r} is a directory; give a file path")
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "a+b") as raw:  # created if missing, never truncated here
                raw.seek(0)
                data = raw.read()
                cut, result = self._cut_at(data, start)
                if cut < len(data):
                    raw.truncate(cut)
            file = open(self.path, "a", encoding="utf-8", newline="")  # noqa: SIM115 - held open
            if cut == 0 and self.format == "csv":
                file.write(self._header)
                file.flush()
            self._file = file
            return result

    def write(self, lines: list[str]) -> None:
        """Append ``lines`` and flush them; ``lines`` is emptied once they are written."""
        with self._lock:
            if self._file is None:
                raise RuntimeError(f"{self.owner}: {self.path} is not open")
            self._file.write("".join(lines))
            self._file.flush()
            lines.clear()

    def finish(self, lines: list[str]) -> None:
        """Append ``lines`` (if open) and close the file; idempotent."""
        with self._lock:
            try:
                if self._file is not None and lines:
                    self._file.write("".join(lines))
                    lines.clear()
            finally:
                self._close()

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()

    # -- reading what is there ------------------------------------------------------------

    def _cut_at(self, data: bytes, start: int | None) -> tuple[int, Cut]:
        """Where to cut ``data``, and what that keeps: after the last complete line of a row
        of step <= ``start`` (a torn last line is always cut)."""
        complete = data.rfind(b"\n") + 1  # the bytes after it are a torn line
        torn = complete < len(data)
        offset, number, last, kept_to = 0, 0, None, 0
        rows_after = 0
        for line in data[:complete].split(b"\n")[:-1]:
            number += 1
            end = offset + len(line) + 1
            step = self._step_of(line, number)
            offset = end
            if step is None:  # the CSV header, or a blank JSON line
                if rows_after == 0:
                    kept_to = end
                continue
            if rows_after or (start is not None and step > start):
                rows_after += 1
                continue
            last, kept_to = step, end
        if number == 0 and torn:
            self._check_torn_start(data)
        if self.format == "csv" and number == 0:
            kept_to = 0  # no complete header: the file starts again
        return kept_to, Cut(last, rows_after, torn)

    def _check_torn_start(self, data: bytes) -> None:
        """A file of one torn line is dropped only if it is the start of what this table
        writes first (the header, or a row), not a file of something else."""
        first = (self._header if self.format == "csv" else '{"step": ').encode()
        if not (first.startswith(data) or (self.format == "jsonl" and data.startswith(first))):
            raise self._bad(1, data, "it is not the start of this table")

    def _step_of(self, line: bytes, number: int) -> int | None:
        """The step of a complete line (``None``: the header, or a blank JSON line)."""
        try:
            text = line.decode("utf-8").removesuffix("\r")  # a line ended by "\r\n" too
        except UnicodeDecodeError:
            raise self._bad(number, line, "it is not UTF-8 text") from None
        if self.format == "csv":
            return self._csv_step(text, number, line)
        if not text.strip():
            return None
        try:
            record = json.loads(text)
        except ValueError:
            raise self._bad(number, line, "it is not JSON") from None
        step = record.get("step") if isinstance(record, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            raise self._bad(number, line, 'it is not a JSON object with an integer "step"')
        return step

    def _csv_step(self, text: str, number: int, line: bytes) -> int | None:
        if number == 1:
            found = next(csv.reader([text]), [])
            if found != ["step", *self.columns]:
                raise ValueError(
                    f"{self.owner}: {self.path} has the columns {found} but this hook writes "
                    f"{['step', *self.columns]}: give another path, or move that file away"
                )
            return None
        cells = text.split(",")
        if len(cells) != len(self.columns) + 1:
            raise self._bad(number, line, f"it has {len(cells)} cells, not {len(self.columns) + 1}")
        try:
            return int(cells[0])
        except ValueError:
            raise self._bad(number, line, "its first cell is not a step") from None

    def _bad(self, number: int, line: bytes, why: str) -> ValueError:
        shown = line[:80] + (b"..." if len(line) > 80 else b"")
        return ValueError(
            f"{self.owner}: line {number} of {self.path} is not a row of this table ({why}): "
            f"{shown!r}; the file is left as it is: give another path, or repair or move it"
        )


def _csv_line(cells: Sequence[str]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(cells)
    return out.getvalue()


def _csv_cell(value: Scalar) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _scalar(owner: str, column: str, step: int, value: object) -> Scalar:
    """``value`` as a bool, an int or a float, or a ``TypeError`` naming the column."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    item = getattr(value, "item", None)
    if callable(item):
        try:
            inner = item()
        except (TypeError, ValueError):  # an array of more than one value
            inner = None
        if isinstance(inner, (bool, int, float)):
            return _scalar(owner, column, step, inner)
    if isinstance(value, numbers.Real):
        return float(value)
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise TypeError(
        f"{owner}: the value fetched for column {column!r} at step {step} is not a number: "
        f"{type(value).__name__} {shown}; fetch an int, a float, a bool or a 0-d array"
    )
