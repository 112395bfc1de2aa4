"""The ``hookrun`` logger, and the structured fields of every record it emits.

The logger is created on first use so that importing hookrun does not import
logging. Every record on it carries three attributes, for JSON log pipelines and
formatters (``%(step)s``...): ``step`` (the global step, when known), ``hook``
(the hook's name) and ``phase`` (``before_run``, ``after_run``, ...), ``None``
where they do not apply. Call sites pass them with :func:`fields`; a filter on
the logger fills in ``None`` for any record that has not got them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging

__all__ = ["FIELDS", "fields", "log_error", "log_info", "log_warning", "logger"]

#: The structured fields every hookrun log record carries.
FIELDS = ("step", "hook", "phase")


@functools.cache
def logger() -> logging.Logger:
    """The ``hookrun`` logger (warnings about grace periods, errors attached as notes, ...)."""
    import logging

    log = logging.getLogger("hookrun")
    log.addFilter(_with_fields)
    return log


def _with_fields(record: logging.LogRecord) -> bool:
    """Give a record that has not got them the structured fields, as ``None``."""
    for name in FIELDS:
        if not hasattr(record, name):
            setattr(record, name, None)
    return True


def fields(step: int | None = None, hook: str | None = None, phase: str | None = None) -> dict[str, Any]:
    """The ``extra=`` of a hookrun log record."""
    return {"step": step, "hook": hook, "phase": phase}


def log_warning(
    msg: str, *args: object, step: int | None = None, hook: str | None = None, phase: str | None = None,
    exc_info: BaseException | None = None,
) -> None:
    """A WARNING on the hookrun logger with the structured fields."""
    logger().warning(msg, *args, exc_info=exc_info, extra=fields(step, hook, phase), stacklevel=2)


def log_error(
    msg: str, *args: object, step: int | None = None, hook: str | None = None, phase: str | None = None,
    exc_info: BaseException | None = None,
) -> None:
    """An ERROR on the hookrun logger with the structured fields."""
    logger().error(msg, *args, exc_info=exc_info, extra=fields(step, hook, phase), stacklevel=2)


def log_info(
    msg: str, *args: object, step: int | None = None, hook: str | None = None, phase: str | None = None
) -> None:
    """An INFO line on the hookrun logger with the structured fields."""
    logger().info(msg, *args, extra=fields(step, hook, phase), stacklevel=2)
