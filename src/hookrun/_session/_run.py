"""``MonitoredSession.run``'s plain plan: which sessions take it (``plain_steps``), and why
the step is written inline in ``run`` (``_base.py``).

``run`` reads the session's plan for a step. With steps in flight it goes to that
engine. Otherwise, when every ``before_run`` and ``after_run`` call of the session is a
plain function (or it has none) and the step is the common one (an open session, untimed by the
statistics, without ``options``, no retries on the same session), its phases and the raw
run happen right in ``run``'s own coroutine; any other step goes to the step body
the constructor chose (``self._step``: ``_stepping.py``). Either way the session is
marked busy and inside its own step, a recoverable error re-creates the lane's session
and re-runs the call (``Recovery.with_recovery``), and the session is released on every way
out: to the first caller from another task waiting for it, if any (``Turns.pass_on``).

The plain-call step is ``general_step``'s path for plain calls, copied into ``run`` so
that such a step needs no coroutine of its own: a step with one plain hook costs 10-12 %
less with it, with ten 7-12 % less, measured side by side in one process (the plan on and
off, asyncio and trio; the instance-installed ``run`` it replaces gained as much). It
serves the plain-hook rows against pluggy in ``python -m benchmarks.peers``. Where a
``before_run`` asked for something the step goes on in ``general_step``, with the calls
already made. Errors are counted in their phase and a missing fetch is named, as there.
``run`` is the class's own method, defined in its body (not assigned from a function
here), so that the API reference renders it with its signature and docstring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._base import _MonitoredSessionBase

__all__ = ["plain_steps"]


def plain_steps(session: _MonitoredSessionBase) -> bool:
    """Whether every hook call of ``session``'s steps is a plain function (or it has none),
    with nothing entered or timed around a step and the session's own step counter (the
    constructor adds: one lane, no ``retry_on``)."""
    return bool(
        not session._setup.step_hooks
        and not session._setup.traces_before_run
        and session._local is not None
        and all(plan.plain is not None or not plan.calls for plan in (session._before, session._after))
    )
