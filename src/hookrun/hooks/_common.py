"""Small helpers shared by the built-in hooks (no hook lives here).

* ``logger``: every built-in hook logs through ``logging.getLogger("hookrun")`` (whose
  records all carry the ``step``, ``hook`` and ``phase`` fields, see ``_log.py``).
* ``call_maybe_async``: call a user function that may be sync or async.
* ``import_optional``: import an optional dependency, or say which extra installs it.
* ``step_counter_of``: the coordinator's step counter, or ``None``.
* ``check_timer_args``: a hook's seconds/steps pair, named as the hook's caller wrote it.
* ``check_address``: an address to listen on (an IP address or a host name).
* ``TRACE_STEP``: what a tracing hook's ``before_run`` returns for a step it wants traced.

Other construction-time checks live in ``hookrun._validate``, shared by every public
constructor.
"""

from __future__ import annotations

import importlib
import inspect
import ipaddress
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .._hook_protocol import RunOptions, SessionRunArgs
from .._log import fields
from .._log import logger as _logger
from .._validate import check_int, check_number, check_text

__all__ = [
    "TRACE_STEP",
    "call_maybe_async",
    "check_address",
    "check_timer_args",
    "import_optional",
    "logger",
    "step_counter_of",
]

logger = _logger()

__all__ += ["fields"]

#: What a tracing hook's ``before_run`` returns for a step it wants traced: the runtime then
#: records a ``TimingRecord`` per hook call and for the run in ``run_metadata.timings``.
TRACE_STEP = SessionRunArgs(options=RunOptions(trace=True))


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


#: A host name: dot-separated labels of letters, digits and inner hyphens (RFC 1123).
_HOST_NAME = re.compile(r"(?=.{1,253}\.?$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\.?", re.I)


def check_address(what: str, value: object) -> None:
    """``value`` is an address to listen on: an IP address (``"127.0.0.1"``, ``"::"``) or a
    host name (``"localhost"``). Checked by its form only: no name is looked up here."""
    check_text(what, value)
    assert isinstance(value, str)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if _HOST_NAME.fullmatch(value) is None:
            hint = " (without the brackets)" if value.startswith("[") else ""
            raise ValueError(
                f"{what} must be an IP address such as '127.0.0.1' or '::'{hint}, or a host name "
                f"such as 'localhost', got {value!r}"
            ) from None
