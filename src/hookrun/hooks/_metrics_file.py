"""``MetricsFileHook``: the fetched values of every step (or every N-th) as a row of a CSV or
JSON-lines file, appended safely across a resume.

The file (``_metrics_table.py``) is opened in the first ``after_create_session``, at
the step the session starts at (the step a restored checkpoint set), keeping the rows
of the steps up to it; a later ``after_create_session`` whose step went back below the
last row (a recovery that restored an older checkpoint) cuts the file there too. Rows
are encoded in ``after_run`` (in step order, also with steps in flight) and written by
a worker thread every ``flush_secs`` seconds or ``FLUSH_ROWS`` rows, then at ``end`` or
``on_exception``, which close the file. A row is never written twice: a step at or
below the last row is skipped, and the thread that writes rows empties the list it
wrote, so a write cancelled before it started is left for the close.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Mapping
from typing import Literal

import anyio

from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._timer import Clock
from .._validate import check_callable, check_int, check_number, check_path, check_text
from ._common import fields, logger, step_counter_of
from ._metrics_table import MetricsTable, format_of

__all__ = ["MetricsFileHook"]

OWNER = "MetricsFileHook"
#: Rows kept in memory at most between two writes, whatever ``flush_secs``.
FLUSH_ROWS = 1000


class MetricsFileHook(SessionRunHook):
    """Writes the fetched ``metrics`` of every ``every_n_steps``-th step as a row of a CSV
    or JSON-lines file at ``path``: Keras' ``CSVLogger`` beside TensorBoard.

    ``metrics`` maps column → fetch key, or is a list of string fetch keys (each its own
    column). A row is the global step the run reached (column ``step``) and the values,
    fetched on the runs that reach a multiple of ``every_n_steps``. ``format`` is
    ``"csv"`` or ``"jsonl"``; ``None`` (default) takes it from the suffix of ``path``
    (``.csv``; ``.jsonl`` or ``.ndjson``). A value must be a number (a bool, an int, a
    float, or a 0-d array or NumPy scalar); in JSON lines a NaN or an infinity is
    ``null``. Rows are written by a worker thread every ``flush_secs`` seconds (``0``:
    after every row) or every 1000 rows, and at ``end`` or ``on_exception``, which
    close the file. ``clock`` replaces :func:`anyio.current_time`.

    An existing file is appended to: when the session starts at global step ``s`` (a
    restored checkpoint's), the rows of steps after ``s`` are dropped, since the run
    writes them again, and so is a torn last line (a line without its newline, from a
    write a crash cut short); a warning says so. A file that is not such a table (a CSV
    header with other columns, a malformed line) is an error naming the line, and is
    left as it is.

    Args:
        path: The CSV or JSON-lines file, appended to.
        metrics: The columns: a mapping column → fetch key, or string fetch keys that are
            their own columns.
        format: ``"csv"`` or ``"jsonl"``. ``None``: from the suffix of ``path``.
        every_n_steps: Write the steps that reach a multiple of this.
        flush_secs: Seconds between writes of the rows (0: after every row).
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        metrics: Mapping[str, Hashable] | Iterable[str],
        *,
        format: Literal["csv", "jsonl"] | None = None,
        every_n_steps: int = 1,
        flush_secs: float = 10.0,
        clock: Clock | None = None,
    ) -> None:
        check_path(f"{OWNER}: path", path)
        where = os.fspath(path)
        check_text(f"{OWNER}: path", where)
        columns, keys = _columns(metrics)
        check_int(f"{OWNER}: every_n_steps", every_n_steps, minimum=1)
        check_number(f"{OWNER}: flush_secs", flush_secs, unit="seconds")
        if clock is not None:
            check_callable(f"{OWNER}: clock", clock)
        self.path = where
        self.every_n_steps = every_n_steps
        self._table = MetricsTable(OWNER, where, format_of(OWNER, where, format), columns)
        self._request = SessionRunArgs(keys)
        self._flush_secs = float(flush_secs)
        self._clock: Clock = clock if clock is not None else anyio.current_time
        self._pending: list[str] = []
        self._last_step: int | None = None
        self._flush_at = 0.0

    def __repr__(self) -> str:
        return f"MetricsFileHook({self.path!r}, {list(self._table.columns)!r})"

    @property
    def format(self) -> Literal["csv", "jsonl"]:
        """The file's format."""
        return self._table.format

    async def begin(self) -> None:
        """Start afresh: the file is opened when the first session is created."""
        if self._table.is_open or self._pending:  # a previous session's, never closed
            await self._finish()
        self._last_step = None

    async def after_create_session(self, session: object, coord: object) -> None:
        """Open the file at the step the session starts at, or cut it there if it went back."""
        counter = step_counter_of(coord)
        start: int | None = None if counter is None else await counter.get()
        went_back = start is not None and self._last_step is not None and self._last_step > start
        if self._table.is_open and not went_back:
            return
        if self._pending:
            await anyio.to_thread.run_sync(self._table.write, self._pending)
        cut = await anyio.to_thread.run_sync(self._table.open, start)
        self._last_step = cut.last_step
        self._flush_at = self._clock() + self._flush_secs
        dropped = [f"{cut.dropped_rows} rows after step {start}"] if cut.dropped_rows else []
        dropped += ["a torn last line"] if cut.torn else []
        if dropped:
            logger.warning(
                "%s: %s: dropped %s: the session starts at step %s, and each step after it is "
                "written when it is done again",
                OWNER, self.path, " and ".join(dropped), start,
                extra=fields(start, OWNER, "after_create_session"),
            )

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Fetch the metrics if the step this run reaches is a row's."""
        if (run_context.global_step + 1) % self.every_n_steps:
            return None
        return self._request

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Add the row of the step this run reached; write the rows when due."""
        results = run_values.results
        step = run_values.global_step
        if results is None or (self._last_step is not None and step <= self._last_step):
            return
        self._pending.append(self._table.encode(step, results))
        self._last_step = step
        if len(self._pending) >= FLUSH_ROWS or self._clock() >= self._flush_at:
            self._flush_at = self._clock() + self._flush_secs
            await anyio.to_thread.run_sync(self._table.write, self._pending)

    async def end(self, session: object) -> None:
        """Write the rows left and close the file."""
        await self._finish()

    async def on_exception(self, session: object, exception: BaseException) -> None:
        """Write the rows left and close the file: the rows of the steps done are kept."""
        await self._finish()

    async def _finish(self) -> None:
        # Shielded: a cancellation arriving now would otherwise stop the thread from
        # starting, and the file would stay open (a worker thread runs to its end anyway).
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._table.finish, self._pending)


def _columns(metrics: Mapping[str, Hashable] | Iterable[str]) -> tuple[list[str], list[Hashable]]:
    """The columns and their fetch keys, each column a non-empty one-line string, not ``step``."""
    if isinstance(metrics, Mapping):
        pairs = list(metrics.items())
    elif isinstance(metrics, (str, bytes)) or not isinstance(metrics, Iterable):
        raise TypeError(
            f"{OWNER}: metrics must be a mapping column -> fetch key or a list of string fetch "
            f"keys, got {metrics!r}"
        )
    else:
        pairs = [(key, key) for key in metrics]
    if not pairs:
        raise ValueError(f"{OWNER}: metrics must name at least one value to write, got {metrics!r}")
    seen: set[str] = set()
    for column, _ in pairs:
        if not isinstance(column, str):
            raise TypeError(f"{OWNER}: metrics: a column name must be a string, got {column!r}")
        if not column or column == "step" or any(c in column for c in "\r\n\0") or column in seen:
            why = "the step's own column" if column == "step" else "a column twice" if column in seen else ""
            raise ValueError(
                f"{OWNER}: metrics: column {column!r} cannot be used"
                f"{f' ({why})' if why else ''}: a column is a non-empty one-line string, not 'step', "
                "and appears once"
            )
        seen.add(column)
    return [column for column, _ in pairs], [key for _, key in pairs]
