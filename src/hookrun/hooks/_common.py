"""Small helpers shared by the built-in hooks (no hook lives here).

* ``logger``: every built-in hook logs through ``logging.getLogger("hookrun")`` (whose
  records all carry the ``step``, ``hook`` and ``phase`` fields, see ``_log.py``).
* ``call_maybe_async``: call a user function that may be sync or async.
* ``import_optional``: import an optional dependency, or say which extra installs it.
* ``step_counter_of``: the coordinator's step counter, or ``None``.
* ``check_positive_int`` / ``check_non_negative``: construction-time validation.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._log import fields
from .._log import logger as _logger

__all__ = [
    "call_maybe_async",
    "check_non_negative",
    "check_positive_int",
    "import_optional",
    "logger",
    "step_counter_of",
]

logger = _logger()

__all__ += ["fields"]


async def call_maybe_async(fn: Callable[..., Any], *args: object) -> Any:
    """Call ``fn(*args)``; await the result if it is awaitable."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def import_optional(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise ``ImportError`` naming the ``hookrun[extra]`` that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs the optional dependency {module!r}, which is not installed; "
            f"install it with: pip install 'hookrun[{extra}]'"
        ) from exc


def step_counter_of(coord: object) -> Any:
    """The ``step_counter`` of a coordinator (``None`` if it has none)."""
    return getattr(coord, "step_counter", None)


def check_positive_int(owner: str, name: str, value: object) -> None:
    """Raise ``ValueError`` unless ``value`` is an int >= 1 (``None`` passes)."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


def check_non_negative(owner: str, name: str, value: object) -> None:
    """Raise ``ValueError`` unless ``value`` is a number >= 0 (``None`` passes)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{owner}: {name} must be a non-negative number, got {value!r}")
