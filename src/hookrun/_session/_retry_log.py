"""``RetryLog``: the warnings of a retry policy's retries, one line per interval at most.

A session whose steps fail at a steady rate (one in a hundred at 600 steps a second)
retries six times a second; a warning for each would flood the log. A policy's log
writes the first retry in full; the retries that follow within ``interval`` seconds
of its last line are counted (how many, of which error types, over which span), and
the first retry ``interval`` or more after that line writes one line for them all,
ending with its own message in full. A retry after a quiet interval (nothing counted)
is written in full again. ``flush`` writes what is counted and not yet written:
giving up does it before its error line, and a session does it when it closes
(``flush_retry_log`` in ``_retry.py``), after which the next retry is written in full.

Time is what the caller passes (the policy's clock). The log is kept per event loop
run: a policy used again under a later ``anyio.run`` starts afresh there, first
writing what an earlier run left counted (that run's clock is not this one's).

Invariants: every retry is written once, in full or counted in exactly one line
(still counted until the next line or flush); with ``interval=0`` every retry is
written in full, as each comes.
"""

from __future__ import annotations

from anyio.lowlevel import RunVar

from .._log import log_warning

__all__ = ["RetryLog"]

#: A token per event loop run: the log's times and counts belong to one run.
_RUN: RunVar[object] = RunVar("hookrun_retry_log_run")


def _current_run() -> object:
    try:
        return _RUN.get()
    except LookupError:
        token = object()
        _RUN.set(token)
        return token


class RetryLog:
    """The retry warnings of one policy: written in full, or counted and summed up."""

    __slots__ = ("_count", "_last", "_run", "_said_at", "_types")

    def __init__(self) -> None:
        self._run: object | None = None
        #: When the last line was written (``None``: the next retry is written in full).
        self._said_at: float | None = None
        self._count = 0
        self._types: dict[str, int] = {}
        #: The last retry counted: its time, message and step.
        self._last: tuple[float, str, int | None] = (0.0, "", None)

    def retried(
        self, message: str, cause: BaseException | None, *, now: float, interval: float, step: int | None
    ) -> None:
        """One retry: write ``message`` in full, or count it (and write the summary when due)."""
        self._follow_run()
        said = self._said_at
        if said is None or interval == 0 or (not self._count and now - said >= interval):
            self._said_at = now
            log_warning("%s", message, step=step)
            return
        self._count += 1
        kind = type(cause).__name__
        self._types[kind] = self._types.get(kind, 0) + 1
        self._last = (now, message, step)
        if now - said >= interval:
            self.flush(now)

    def flush(self, now: float, *, afresh: bool = False) -> None:
        """Write the retries counted and not yet written, if any; with ``afresh``, the next
        retry is written in full."""
        self._follow_run()
        if self._count:
            self._write()
            self._said_at = now
        if afresh:
            self._said_at = None

    def _write(self) -> None:
        assert self._said_at is not None  # a retry is counted only after a line
        at, message, step = self._last
        types = ", ".join(
            f"{n} {kind}" for kind, n in sorted(self._types.items(), key=lambda item: (-item[1], item[0]))
        )
        count = self._count
        log_warning(
            "%d more retr%s in %.3gs (%s); the last: %s",
            count, "y" if count == 1 else "ies", at - self._said_at, types, message, step=step,
        )
        self._count = 0
        self._types = {}

    def _follow_run(self) -> None:
        """In a run other than the last one's: write what that run left, and start afresh."""
        run = _current_run()
        if run is self._run:
            return
        if self._count:
            self._write()
        self._run, self._said_at = run, None
