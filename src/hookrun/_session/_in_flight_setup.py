"""Setting a monitored session up for steps in flight (``max_in_flight=N``): the argument
checked, the hooks checked (each must declare ``overlapping_steps = True``), and, for
``N > 1``, the engine (``_in_flight.py``) the session's entry points go to, made once,
at construction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._dispatch._plan import hook_name

if TYPE_CHECKING:
    from .._observe._report import SessionStatistics
    from ._in_flight import InFlight

__all__ = ["check_max_in_flight", "in_flight_engine", "overlapping", "with_occupancy"]


#: The most lanes a session takes: each is a raw session created when the session is
#: entered, so a number far past what can run at once is a mistake (a typo, a unit), not
#: a wish, refused before anything is built rather than built for minutes.
MAX_LANES = 1 << 20


def check_max_in_flight(owner: str, value: object, hooks: Sequence[object]) -> int:
    """``max_in_flight`` is an int from 1 to ``MAX_LANES``; above 1 every hook must allow overlap."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}: max_in_flight must be an int of at least 1, got {value!r}")
    if value < 1:
        raise ValueError(f"{owner}: max_in_flight must be at least 1, got {value!r}")
    if value > MAX_LANES:
        raise ValueError(
            f"{owner}: max_in_flight={value} is more than {MAX_LANES:,} lanes: each lane is a raw "
            "session created when the session is entered; give the number of steps to run at once"
        )
    if value > 1:
        for index, hook in enumerate(hooks):
            if not overlapping(hook):
                raise TypeError(
                    f"{owner}(max_in_flight={value}): hooks[{index}] ({hook_name(hook)}) does not declare "
                    "overlapping_steps = True. With steps in flight, before_run of later steps may come "
                    "between a step's before_run and its after_run: check that the hook keeps no per-step "
                    "state on itself from before_run to after_run (carry it in run_context.step_state "
                    "instead), then set the class attribute overlapping_steps = True"
                )
    return value


def overlapping(hook: object) -> bool:
    """Whether ``hook`` declares that its steps may overlap (a hook without the attribute does not)."""
    return getattr(hook, "overlapping_steps", False) is True


def in_flight_engine(session: Any, creator: object, n: int) -> InFlight:
    """The steps-in-flight engine of a session with ``n`` lanes, which its entry points
    (``run``, ``iterate``, ``run_step_fn``) go to."""
    from ._in_flight import InFlight

    engine = InFlight(session, creator, n)
    # A creator that restores lanes and a hook that saves them learn how to reach every
    # lane's raw session (``CheckpointSaverHook``, ``ChiefSessionCreator``).
    lanes = engine.lanes
    for party in (creator, *session.hooks):
        bind = getattr(party, "bind_lanes", None)
        if bind is not None:
            bind(lambda: [lane.raw for lane in lanes])
    return engine


def with_occupancy(session: Any, snapshot: SessionStatistics) -> SessionStatistics:
    """``snapshot`` with the lanes' occupancy."""
    return dataclasses.replace(snapshot, mean_in_flight=session._in_flight.occupancy.mean_in_flight())
