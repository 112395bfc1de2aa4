"""Console logging routed around open progress bars: ``route_logs_around_bars`` and
``restore_logs``, called by ``ProgressBarHook`` as a bar opens and closes.

A console handler (a ``logging.StreamHandler`` writing to ``sys.stdout`` or
``sys.stderr``) of the root logger or of the ``hookrun`` logger writes its line
straight into the terminal line a bar is drawing. While a bar is open, each such
handler is replaced in its logger's list by a ``_AroundBar`` that formats, filters
and levels records exactly as the handler it stands for, and writes the line with
``tqdm.write`` (which clears the bars, writes the line, draws the bars again). This
is what tqdm's ``logging_redirect_tqdm`` does, but each handler keeps its own level,
filters, formatter and stream (tqdm's merges every console handler into one copy of
the first, without its level), and a logger with no console handler is left alone
(tqdm's adds one, so logs meant for a file only would appear on the terminal).

Invariants: the handlers are swapped when the first bar of the process opens and put
back when the last one closes (a count, under a lock: bars of concurrent sessions,
in any threads, may close in any order); putting back replaces each ``_AroundBar``
with its handler in place, so a handler added meanwhile stays.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

__all__ = ["restore_logs", "route_logs_around_bars"]

_lock = threading.Lock()
_open_bars = 0


class _AroundBar(logging.Handler):
    """Stands for a console handler while a bar is open: its lines go through ``tqdm.write``."""

    def __init__(self, handler: logging.StreamHandler[Any], tqdm_class: Any) -> None:
        super().__init__(handler.level)
        self.handler = handler
        self._write = tqdm_class.write

    def filter(self, record: logging.LogRecord) -> bool:
        # The handler's own answer, as is (from Python 3.12 a filter may return a record).
        return self.handler.filter(record)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.handler.format(record)
            self._write(line, file=self.handler.stream, end=self.handler.terminator)
        except RecursionError:
            raise
        except Exception:
            self.handler.handleError(record)


def _loggers() -> tuple[logging.Logger, ...]:
    return (logging.getLogger(), logging.getLogger("hookrun"))


def _stand_in(handler: logging.Handler, tqdm_class: Any) -> logging.Handler:
    """``handler``'s stand-in while a bar is open, or itself if it is not a console handler."""
    consoles = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    if isinstance(handler, logging.StreamHandler) and any(handler.stream is s for s in consoles):
        return _AroundBar(handler, tqdm_class)
    return handler


def route_logs_around_bars(tqdm_class: Any) -> None:
    """A bar opens: if it is the first, the console handlers write around the bars."""
    global _open_bars
    with _lock:
        _open_bars += 1
        if _open_bars > 1:
            return
        for log in _loggers():
            log.handlers = [_stand_in(h, tqdm_class) for h in log.handlers]


def restore_logs() -> None:
    """A bar closed: if it was the last, every console handler is back in its place."""
    global _open_bars
    with _lock:
        _open_bars -= 1
        if _open_bars > 0:
            return
        _open_bars = 0
        for log in _loggers():
            log.handlers = [h.handler if isinstance(h, _AroundBar) else h for h in log.handlers]
