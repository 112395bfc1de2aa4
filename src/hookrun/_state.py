"""The states of a monitored session, shared by the modules that change them.

``State`` and ``STEPPABLE`` (the states in which a step may start). What each state
means, which transitions exist and which part of the session makes each one is
drawn in the docstring of ``_session.py``.
"""

from __future__ import annotations

import enum

__all__ = ["STEPPABLE", "State"]


class State(enum.Enum):
    """The states of a monitored session (see the docstring of ``_session.py``)."""

    NEW = "new"
    OPEN = "open"
    RECOVERING = "recovering"
    BROKEN = "broken"
    CLOSED = "closed"


#: States in which a step may start (RECOVERING and BROKEN: after recovering first).
STEPPABLE = frozenset({State.OPEN, State.RECOVERING, State.BROKEN})
