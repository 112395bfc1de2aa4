"""Which monitored sessions the running code is inside a step of: a context variable the
engine sets around every step, whatever ``max_in_flight`` is and whatever the hooks are.

A step's hook calls run in copies of the context of the task running the step (workers
included), and its raw run in that task itself, so they all see it; a task a hook starts
on a coordinator does not (``forget_steps``): it runs on its own, beside the steps.

A close, ``run()`` or ``iterate()`` of a session from inside one of its own steps is
refused with it: a close would wait for the step it is part of, a step would wait for a
lane or for the step it is part of.

With one lane a step function's hooked run (``run_with_hooks``) adds its lane too: another
hooked run from inside it (one of its hooks) is refused, as it would wait for itself.

Invariant: a step sets the variable when it starts and restores the value it found when
it ends, on every way out; nothing else sets it but ``forget_steps``.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["STEPS_GET", "STEPS_RESET", "STEPS_SET", "forget_steps", "inside_error", "inside_step"]

#: The sessions whose steps the running code is inside of, outermost first.
_STEPS: ContextVar[tuple[object, ...]] = ContextVar("hookrun_inside_steps", default=())
_get, _set = _STEPS.get, _STEPS.set


#: A step sets it with ``token = STEPS_SET((*STEPS_GET(), session))`` and leaves it with
#: ``STEPS_RESET(token)`` in a ``finally``; spelled out in each entry, as a call less on
#: every step counts on the hot path.
STEPS_GET, STEPS_SET, STEPS_RESET = _get, _set, _STEPS.reset


def inside_step(session: object) -> bool:
    """Whether the running code is inside a step of ``session``."""
    return session in _get()  # sessions compare by identity


def forget_steps() -> None:
    """The running task (a coordinator's, started from inside a step maybe) is inside no
    step: called first thing in the task, whose context is its own copy."""
    _set(())


def inside_error(session: object, what: str) -> RuntimeError:
    """The error refusing ``what`` (``"aclose()"``, ``"run()"``...) of ``session`` from inside
    one of its own steps."""
    name = type(session).__name__
    if what == "aclose()":
        return RuntimeError(
            f"{name}.aclose() called from inside one of its own steps (its raw run, a hook or a "
            "step function): a close waits for the running step, which would wait for ever; "
            "call run_context.request_stop() and leave the 'async with' block instead"
        )
    return RuntimeError(
        f"{name}.{what} called from inside one of its own steps (its raw run, a hook or a step "
        "function): that step would wait for itself; run the next step after this one returns "
        "(a step function may call step_context.run_with_hooks())"
    )
