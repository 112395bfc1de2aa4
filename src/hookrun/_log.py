"""The ``hookrun`` logger, created on first use so that importing hookrun does not import logging."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

__all__ = ["logger"]


@functools.cache
def logger() -> logging.Logger:
    """The ``hookrun`` logger (warnings about grace periods, errors attached as notes, ...)."""
    import logging

    return logging.getLogger("hookrun")
