"""``unavailable``: the ``UnavailableError`` that reports an engine's "it is gone" error.

Each adapter decides which of its engine's errors mean a lost actor, worker or
connection; this module only words the report, the same way for every engine: what
was being done, the engine error's type and the first line of its message.
"""

from __future__ import annotations

from .._errors import UnavailableError

__all__ = ["unavailable"]


def unavailable(what: str, exc: BaseException) -> UnavailableError:
    """The ``UnavailableError`` that reports ``exc`` (chain it with ``raise ... from exc``)."""
    text = str(exc).strip().splitlines()
    return UnavailableError(f"{what}: {type(exc).__name__}: {text[0] if text else '(no message)'}")
