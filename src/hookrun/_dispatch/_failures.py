"""The error policy of a phase: which error propagates when hooks fail.

The error of the earliest hook in list order propagates, unwrapped (never an
``ExceptionGroup``: the tasks are an implementation detail); every other error of
the phase is attached to it as a note and logged. A base exception that is not an
``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``) wins over
ordinary errors whatever its position, so it is never demoted to a note. The outcome
is the same whatever order the coroutines ran in.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._log import log_error

__all__ = ["raise_first"]


def raise_first(errors: list[tuple[int, BaseException]], phase: str, names: Sequence[str]) -> None:
    """Raise the error of the earliest hook (``errors`` holds ``(position, error)``);
    attach and log the others."""
    errors.sort(key=lambda item: (isinstance(item[1], Exception), item[0]))
    first = errors[0][1]
    for index, other in errors[1:]:
        first.add_note(f"hookrun: hook {names[index]} also failed in {phase}: {other!r}")
        log_error("hook %s also failed in %s: %r", names[index], phase, other, exc_info=other, hook=names[index], phase=phase)
    raise first
