"""Small helpers shared by the built-in hooks (no hook lives here).

* ``logger``: every built-in hook logs through ``logging.getLogger("hookrun")`` (whose
  records all carry the ``step``, ``hook`` and ``phase`` fields, see ``_log.py``).
* ``call_maybe_async``: call a user function that may be sync or async.
* ``import_optional``: import an optional dependency, or say which extra installs it.
* ``step_counter_of``: the coordinator's step counter, or ``None``.
* ``check_timer_args``: a hook's seconds/steps pair, named as the hook's caller wrote it.

Other construction-time checks live in ``hookrun._validate``, shared by every public
constructor.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._log import fields
from .._log import logger as _logger
from .._validate import check_int, check_number

__all__ = [
    "call_maybe_async",
    "check_timer_args",
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


def check_timer_args(owner: str, secs_name: str, secs: object, steps_name: str, steps: object) -> None:
    """Check a seconds/steps pair before it becomes a ``SecondOrStepTimer``, so an error
    names ``save_steps`` (say) rather than the timer's ``every_steps``. ``None``: not given."""
    check_number(f"{owner}: {secs_name}", secs, optional=True, unit="seconds")
    check_int(f"{owner}: {steps_name}", steps, optional=True)
