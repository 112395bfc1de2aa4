"""Which monitored session a hook that keeps per-session state serves: ``claim_hooks``,
called when a session is entered, and ``served_hooks``, the hooks of that session.

A hook whose ``serves_one_session`` is true (every built-in hook with state: the
checkpoint saver, the timers' hooks, the writers, ...) serves one monitored session at
a time. Entering a session whose hooks include one that another session still open
(entering, open, recovering or broken) serves is a ``RuntimeError`` naming the hook,
raised before any ``begin``; the session stays unentered. Once that other session is
closed, the hook may serve a new one.

Invariant: a claim is all or nothing (every hook is checked before any is claimed, with
nothing awaited in between, so two sessions entered at once cannot both win).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from .._dispatch._plan import hook_name
from ._state import CLOSABLE

__all__ = ["claim_hooks", "served_hooks"]

#: The attribute of a claimed hook holding a weak reference to the session it serves.
_SERVING = "_hookrun_serving"


def claim_hooks(session: Any) -> None:
    """Make ``session`` the one its single-session hooks serve; refuse a hook that another
    session still open serves (``RuntimeError`` naming the hook and that session)."""
    claimed = [hook for hook in session.hooks if getattr(hook, "serves_one_session", False) is True]
    for hook in claimed:
        holder = _holder(hook)
        if holder is not None and holder is not session and getattr(holder, "_state", None) in CLOSABLE:
            raise RuntimeError(
                f"hook {hook!r} already serves another monitored session, which is still open "
                f"({holder!r}): a {hook_name(hook)} keeps the state of one session and "
                "serves one session at a time; give each session its own instance, or close the "
                "other session first"
            )
    reference = weakref.ref(session)
    for hook in claimed:
        try:  # object's own: a frozen dataclass's refusal is for its fields
            object.__setattr__(hook, _SERVING, reference)
        except AttributeError:
            raise TypeError(
                f"hook {hook!r} has serves_one_session, but its __slots__ leave no room to record "
                f"the session it serves: add {_SERVING!r} to them"
            ) from None


def served_hooks(hook: object, default: Sequence[object]) -> Sequence[object]:
    """The hooks of the monitored session ``hook`` serves, or ``default`` when it serves none
    (used outside a session, or by a session that does not claim its hooks)."""
    holder = _holder(hook)
    return default if holder is None else holder.hooks


def _holder(hook: object) -> Any:
    reference = getattr(hook, _SERVING, None)
    return None if reference is None else reference()
