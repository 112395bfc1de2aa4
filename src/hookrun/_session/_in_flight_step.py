"""One step in flight (``Step``: its lane, number, cancel scope and what its phases
computed), ``Rescope``, what a step whose cancel scope a failing hook cancelled returns,
and ``Slot``, what ``iterate`` keeps of a step until it yields its results."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import anyio

from .._dispatch._merge import DEFAULT_OPTIONS
from .._hook_protocol import InFlightRunContext, RunMetadata, RunOptions

if TYPE_CHECKING:
    from ._lanes import Lane
    from ._retry import RetryBudget

__all__ = ["Rescope", "Slot", "Step"]


class Step:
    """One step in flight: its lane, number, arguments and what its phases computed."""

    __slots__ = (
        "args",
        "cause",
        "contexts",
        "counted",
        "ctx",
        "feeds",
        "holds_lane",
        "keys",
        "lane",
        "merged",
        "metadata",
        "number",
        "occupied",
        "on_admitted",
        "on_freed",
        "on_ran",
        "run_seconds",
        "run_started",
        "sampled",
        "scope",
        "shape",
        "shapes",
        "started",
        "trace",
        "where",
    )

    def __init__(self, lane: Lane, args: tuple[Any, Any, Any, Any], scope: anyio.CancelScope | None = None) -> None:
        self.lane = lane
        #: Whether the step holds its lane (from admission until its run returned); a step
        #: of ``run_with_hooks`` borrows its step function's and never does.
        self.holds_lane = False
        self.args = args  # fetches, feed_dict, options, run_metadata
        self.number = 0  # 0: not admitted yet
        self.scope = anyio.CancelScope() if scope is None else scope
        self.cause: BaseException | None = None  # why another step cancelled this one
        self.counted: int | None = None  # the counter after this step's increment, once made
        self.ctx: InFlightRunContext | None = None
        #: The hooks' ``step_context``s entered for the attempt under way (None: none entered).
        self.contexts: ExitStack | None = None
        self.sampled = 0  # the statistics' step count when it was picked to be timed; 0: not timed
        self.started = 0.0
        self.occupied = 0.0  # the lanes' occupancy integral when it was timed from
        self.run_seconds: float | None = None  # a timed step's raw run
        self.run_started = 0.0  # when a timed step's raw run started
        #: Where a ``before_run`` phase under way records its calls' timings (None: nowhere).
        self.trace: list[Any] | None = None
        self.where = "before_run"
        self.keys: Sequence[Hashable] = ()
        self.shape: Any = None
        self.shapes: Any = None
        self.feeds: Any = None
        self.merged: RunOptions = DEFAULT_OPTIONS
        self.metadata: RunMetadata | None = None
        #: Told the results as soon as the raw run returned (``iterate(ordered=False)``), and
        #: when ``step_body``'s admission is over (True: whole), for ``iterate``'s next one.
        self.on_ran: Callable[[Any], None] | None = None
        self.on_admitted: Callable[[bool], None] | None = None
        #: Told when the step gives its lane back (``iterate``: the next admission may start).
        self.on_freed: Callable[[Step], None] | None = None

    def leave_contexts(self, error: BaseException | None) -> None:
        """Leave the hooks' ``step_context``s of the attempt that ended (with ``error``, if it
        failed), in reverse order; an error one raises is noted on ``error`` or raised."""
        contexts = self.contexts
        self.contexts = None
        if contexts is not None:
            if error is None:
                contexts.close()
                return
            try:
                contexts.__exit__(type(error), error, error.__traceback__)
            except BaseException as other:
                if other is not error:
                    error.add_note(f"hookrun: leaving a hook's step_context also failed: {other!r}")


class Rescope:
    """What ``step_body`` returns when a failing hook cancelled the step's scope to stop
    the rest of its phase (the phases run under the step's scope): the step is not over,
    and recovers from ``error`` under a new scope (its caller enters one and calls
    ``step_body`` again with this)."""

    __slots__ = ("budget", "error")

    def __init__(self, error: Exception, budget: RetryBudget | None) -> None:
        self.error = error
        self.budget = budget


class Slot:
    """What ``iterate`` keeps of a step admitted and not yielded yet: its outcome, and the
    iterator's wake-up (bound once, shared by its slots)."""

    __slots__ = ("admitted", "delivered", "done", "error", "ran", "results", "step", "wake")

    def __init__(self, step: Step | None, wake: Callable[[], None]) -> None:
        self.step = step  # None: a feed that could not be taken (``error`` says why)
        self.wake = wake
        self.done = False  # the step is over (its after_run returned, or it failed)
        self.ran = False  # its raw run returned: its results are known
        self.delivered = False  # yielded (ordered=False: maybe before its after_run)
        self.admitted = False
        self.results: Any = None
        self.error: BaseException | None = None

    def on_ran(self, results: Any) -> None:
        if not self.ran:
            self.ran, self.results = True, results
            self.wake()
