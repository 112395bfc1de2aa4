"""The frozen statistics record of a monitored session, and its table.

``MonitoredSession.statistics()`` returns a :class:`SessionStatistics`; printing it
(``str`` or ``format()``) gives a table with one row for the step, one for the
session run and one per hook and phase that hook implements.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._histogram import Latency

__all__ = ["HookStatistics", "Latency", "SessionStatistics"]


@dataclass(frozen=True, slots=True)
class HookStatistics:
    """One hook in one phase: ``index`` (its position in the hook list), ``hook`` (its
    name), ``phase``, ``calls``, ``errors`` (errors it raised that failed a step or a
    phase) and ``latency`` of its timed calls."""

    index: int
    hook: str
    phase: str
    calls: int
    errors: int
    latency: Latency


@dataclass(frozen=True, slots=True)
class SessionStatistics:
    """What a monitored session did so far.

    ``steps`` ran to their end, ``failed_steps`` raised or were cancelled (a failed step
    that was then recovered and run again counts once in each; with steps in flight, the
    steps another step's error cancelled count too). ``sessions_created`` counts every
    successful creation, the first one included; ``recoveries`` the failed sessions
    replaced; ``recovery_seconds`` the time spent replacing them and
    ``retry_wait_seconds`` the part of it (and of retried creations and runs) spent
    sleeping the retry policy's backoff; ``step_retries`` the runs retried on the same
    session (``retry_on``). ``sampled_steps`` is how many steps were timed:
    ``step`` and ``run`` (the session's own run) are their latencies, and each
    :class:`HookStatistics` holds its hook's, in the order of the hook list.
    ``mean_in_flight`` is the mean number of raw runs under way since the first step
    began (0.0 before any step): with ``max_in_flight > 1`` the lanes' occupancy (at
    most ``max_in_flight``; a step waiting for its ``after_run`` has given its lane
    back), with one step at a time the share of that time a step was running
    (estimated from the timed steps, at most 1.0).
    """

    steps: int
    failed_steps: int
    sessions_created: int
    recoveries: int
    recovery_seconds: float
    retry_wait_seconds: float
    sampled_steps: int
    step: Latency
    run: Latency
    hooks: tuple[HookStatistics, ...]
    mean_in_flight: float = 0.0
    step_retries: int = 0

    def hook(self, name: str, phase: str) -> HookStatistics:
        """The statistics of the hook called ``name`` in ``phase`` (the first, if several share it)."""
        for entry in self.hooks:
            if entry.hook == name and entry.phase == phase:
                return entry
        known = ", ".join(sorted({f"{h.hook}.{h.phase}" for h in self.hooks})) or "none"
        raise KeyError(f"no hook {name!r} with a {phase} method in these statistics (known: {known})")

    def format(self) -> str:
        """A readable table: the step, the run, then every hook and phase."""
        head = (
            f"hookrun statistics: {self.steps} steps ({self.failed_steps} failed), "
            f"{self.sessions_created} session{'s' if self.sessions_created != 1 else ''} created, "
            f"{self.recoveries} recover{'ies' if self.recoveries != 1 else 'y'} "
            f"({_duration(self.recovery_seconds)}, {_duration(self.retry_wait_seconds)} waiting), "
            f"{self.sampled_steps} steps timed"
            + ("" if not self.step_retries else f", {self.step_retries} runs retried")
            + f", {self.mean_in_flight:.2f} steps in flight on average"
        )
        rows: list[tuple[str, ...]] = [("", "calls", "errors", "timed", "mean", "p50", "p90", "p99", "max")]
        rows.append(_row("step", self.steps + self.failed_steps, self.failed_steps, self.step))
        rows.append(_row("session run", None, None, self.run))
        for entry in self.hooks:
            rows.append(_row(f"#{entry.index} {entry.hook}.{entry.phase}", entry.calls, entry.errors, entry.latency))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [head]
        for row in rows:
            cells = [row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _row(label: str, calls: int | None, errors: int | None, latency: Latency) -> tuple[str, ...]:
    figures = (latency.mean, latency.p50, latency.p90, latency.p99, latency.max)
    return (
        label,
        "" if calls is None else str(calls),
        "" if errors is None else str(errors),
        str(latency.count),
        *(_duration(value) for value in figures),
    )


def _duration(seconds: float | None) -> str:
    """``812ns``, ``3.2us``, ``41.0ms``, ``2.50s``; ``-`` for nothing."""
    if seconds is None:
        return "-"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f}ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f}us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.1f}ms"
    return f"{seconds:.2f}s"
