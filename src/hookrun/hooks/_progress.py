"""``ProgressBarHook``: a progress bar (tqdm) of global steps, or log lines when not on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable, Mapping
from typing import IO, Any, Literal

from .._hook_protocol import SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues
from .._timer import Clock, SecondOrStepTimer
from .._validate import check_int, check_number, check_text
from ._bar_logging import restore_logs, route_logs_around_bars
from ._common import import_optional, logger

__all__ = ["ProgressBarHook"]

Mode = Literal["auto", "bar", "log"]


class ProgressBarHook(SessionRunHook):
    """Shows the global step, the rate and chosen fetched metrics.

    ``total`` is the global step at which the work is complete (``None``:
    unknown); the bar starts at the step of the first run, so a resumed job
    starts part-way. ``metrics`` maps label → fetch key, or is a list of fetch
    keys; they are fetched every step. ``mode="bar"`` draws a tqdm bar on
    ``file`` (default ``sys.stderr``; needs the ``hookrun[progress]`` extra),
    ``"log"`` logs a line (logger ``hookrun``) every ``log_every_secs`` seconds
    and at ``end``, ``"auto"`` (default) draws the bar only when ``file`` is a
    terminal. A missing tqdm is decided when the hook is built, wherever it
    runs: ``"bar"`` raises ``ImportError`` naming the extra; ``"auto"`` logs
    one warning and logs lines (``mode`` then reads ``"log"``). ``desc``
    prefixes the bar and the lines; ``clock`` replaces
    :func:`anyio.current_time` for the log timing.

    While the bar is shown, the console handlers of the root and ``hookrun``
    loggers write their lines above it (through ``tqdm.write``) instead of into
    it; they are put back when the bar closes, at ``end`` or ``on_exception``.

    Args:
        total: The global step at which the work is complete. ``None``: unknown.
        metrics: Metrics shown: a mapping label → fetch key, or fetch keys that are their
            own labels.
        desc: A prefix of the bar and the lines. ``None``: none.
        file: Where the bar is drawn. ``None``: ``sys.stderr``.
        mode: ``"bar"``, ``"log"``, or ``"auto"``: a bar on a terminal, else lines.
        log_every_secs: Seconds between lines when logging.
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    def __init__(
        self,
        total: int | None = None,
        *,
        metrics: Mapping[str, Hashable] | Iterable[Hashable] = (),
        desc: str | None = None,
        file: IO[str] | None = None,
        mode: Mode = "auto",
        log_every_secs: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        if mode not in ("auto", "bar", "log"):
            raise ValueError(f'ProgressBarHook: mode must be "auto", "bar" or "log", got {mode!r}')
        check_int("ProgressBarHook: total", total, optional=True)
        check_number("ProgressBarHook: log_every_secs", log_every_secs, unit="seconds")
        if desc is not None:
            check_text("ProgressBarHook: desc", desc, empty=True)
        self.total = total
        self._metrics = _metric_map(metrics)
        self._desc = desc
        self._file = file
        self._tqdm: Any = None
        if mode == "bar":
            self._tqdm = import_optional("tqdm", "progress", "ProgressBarHook(mode='bar')").tqdm
        elif mode == "auto":
            self._tqdm = _tqdm_or_none()
        # "auto" without tqdm logs lines wherever it runs (the warning was logged above).
        self.mode: Mode = "log" if mode == "auto" and self._tqdm is None else _resolve_mode(mode, file)
        self._log_timer = SecondOrStepTimer(every_secs=log_every_secs, clock=clock)
        self._request = SessionRunArgs(self._metrics) if self._metrics else None
        self._bar: Any = None
        self._step: int | None = None
        self._values: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"ProgressBarHook(total={self.total}, mode={self.mode!r})"

    async def begin(self) -> None:
        """Start afresh: the bar opens at the first step."""
        self._close_bar()
        self._log_timer.reset()
        self._step = None

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Open the bar at the first step; fetch the metrics."""
        if self._step is None:
            self._open(run_context.global_step)
        return self._request

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Advance the bar (or log when due) to the step after this run."""
        self._values = dict(run_values.results or {})
        previous, self._step = self._step or 0, run_values.global_step
        if self._bar is not None:
            self._bar.set_postfix(_postfix(self._values), refresh=False)
            self._bar.update(max(self._step - previous, 0))
        elif self._log_timer.should_trigger_for_step(self._step):
            self._log_line()

    async def end(self, session: object) -> None:
        """Close the bar, or log the final line."""
        if self._bar is not None:
            self._close_bar()
        elif self._step is not None and self._log_timer.last_triggered_step() != self._step:
            self._log_line()

    async def on_exception(self, session: object, exception: BaseException) -> None:
        """Close the bar where it stopped (the session failed or was cancelled)."""
        self._close_bar()

    def _open(self, step: int) -> None:
        self._step = step
        if self.mode == "bar":
            self._bar = self._tqdm(
                total=self.total,
                initial=step,
                desc=self._desc,
                unit="step",
                file=self._file if self._file is not None else sys.stderr,
            )
            route_logs_around_bars(self._tqdm)
        else:
            self._log_timer.update_last_triggered_step(step)

    def _close_bar(self) -> None:
        """Close the bar, if open, and put the console log handlers back."""
        bar, self._bar = self._bar, None
        if bar is not None:
            try:
                bar.close()
            finally:
                restore_logs()

    def _log_line(self) -> None:
        assert self._step is not None
        elapsed_secs, elapsed_steps = self._log_timer.update_last_triggered_step(self._step)
        parts = [f"step {self._step}" + (f"/{self.total}" if self.total else "")]
        if self.total:
            parts[0] += f" ({100.0 * self._step / self.total:.1f}%)"
        if elapsed_secs and elapsed_steps is not None:
            parts.append(f"{elapsed_steps / elapsed_secs:.3g} steps/s")
        parts += [f"{label}={value}" for label, value in _postfix(self._values).items()]
        logger.info("%s%s", f"{self._desc}: " if self._desc else "", ", ".join(parts))


def _tqdm_or_none() -> Any:
    """tqdm's ``tqdm`` class, or ``None`` (with one warning) when tqdm is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        logger.warning(
            "ProgressBarHook: tqdm is not installed, so progress is logged as lines instead "
            "of drawn as a bar; install it with: pip install 'hookrun[progress]' "
            "(or pass mode='log' to choose log lines and silence this warning)"
        )
        return None
    return tqdm


def _resolve_mode(mode: Mode, file: IO[str] | None) -> Mode:
    if mode != "auto":
        return mode
    stream = file if file is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return "bar" if isatty is not None and isatty() else "log"


def _metric_map(metrics: Mapping[str, Hashable] | Iterable[Hashable]) -> dict[str, Hashable]:
    if isinstance(metrics, Mapping):
        return {str(label): key for label, key in metrics.items()}
    if isinstance(metrics, (str, bytes)) or not isinstance(metrics, Iterable):
        raise TypeError(
            f"ProgressBarHook: metrics must be a mapping label -> fetch key or a list of keys, "
            f"got {metrics!r}"
        )
    return {str(key): key for key in metrics}


def _postfix(values: Mapping[str, Any]) -> dict[str, str]:
    return {label: f"{v:.4g}" if isinstance(v, float) else str(v) for label, v in values.items()}
