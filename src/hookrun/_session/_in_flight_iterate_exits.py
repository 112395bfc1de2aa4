"""How ``iterate()``'s iterator with steps in flight (``InFlightIterator`` and its
``_Pipeline``, ``_in_flight_iterate.py``) ends other than by its feeds' end or a stop:
an error, the iterating task's cancellation, ``aclose()``, or the caller letting go of it.
What is cancelled and waited for, and which error comes out.

These run in the iterating task (or the task closing the iterator), never on a step's
path: ``_Pipeline.__anext__`` hands its error to ``failed``, ``InFlightIterator.aclose``
is ``close`` and its ``__del__`` calls ``dropped``. They read the pipeline's state (its
pending slots, its admission, its runners) as its own methods would.

An error other than a clean stop cancels the steps in flight and is raised (the error of
the step that failed first, not the cancellations it caused); with ``ordered=False`` a
step's results are yielded as soon as its raw run returns, which may be before its
``after_run`` (still called in step order; an error it raises comes from a later
``__anext__``); cancelling the iterating task in ``__anext__``, or ``aclose()``, cancels
the steps and waits for them (shielded, bounded by the grace period), so no task of the
iterator is left running once it ended. A step's ``KeyboardInterrupt`` or ``SystemExit``
(``_fatal``) wins over any other error and over the task's cancellation: it is never lost.

No hookrun code runs in the iterating task while its loop body runs, so a cancellation
landing there is seen when the loop lets go of the iterator: ``async for`` holds the only
reference to ``InFlightIterator``, a handle the session's tasks never hold (they hold its
``_Pipeline``), and CPython drops it as the exception leaves the loop. Its ``__del__`` then
runs in the iterating task: if that task is cancelled (its effective deadline is past:
``-inf`` once a scope of it was cancelled), admission stops and the steps in flight are
cancelled at once (a cancel scope is cancelled synchronously); they end in their runners.
An iterator kept in a variable outlives its loop and is not seen: ``aclose()`` (or
``contextlib.aclosing``) is the way to end it. A ``break`` leaves the steps in flight to
finish, as documented; once the iterator is dropped, no runner of it parks again.

What a step of a dropped iterator raised (before the drop or after it) no ``__anext__``
will raise (``left``): a ``KeyboardInterrupt`` or ``SystemExit`` goes to the session,
whose close raises it (``raise_left``: the hooks get ``on_exception`` with it,
not ``end``); a step's own error is logged, and the session goes on.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import anyio

from .._cancelling import task_cancelled
from .._errors import CLEAN_STOP_TYPES
from .._log import log_warning

if TYPE_CHECKING:
    from ._in_flight import InFlight
    from ._in_flight_iterate import _Pipeline
    from ._in_flight_step import Slot

__all__ = ["close", "dropped", "failed", "left", "raise_left"]


async def failed(p: _Pipeline, exc: BaseException) -> BaseException:
    """``__anext__`` ends with ``exc``: cancel the steps in flight and wait for them; what
    to raise (``exc``, or the error of the step that failed first, or a step's
    ``KeyboardInterrupt`` or ``SystemExit``)."""
    p._done = p._exhausted = True
    _cancel(p, exc)
    await _wait_out(p)
    p._close_runners()
    origin = _origin(p, exc)
    if not _fatal(origin):  # a step's KeyboardInterrupt or SystemExit wins over an error
        origin = _fatal_error(p) or origin  # or the task's cancellation: never lost
    p._pending.clear()
    _taken(p, origin)
    return origin


async def close(p: _Pipeline) -> None:
    """``InFlightIterator.aclose``."""
    p._closed = True
    p._done = True
    p._exhausted = True
    _cancel(p, RuntimeError("iterate(): the iterator was closed"))
    await _wait_out(p)
    p._close_runners()
    fatal = _fatal_error(p)
    p._pending.clear()
    p._wakeup()  # a task still in __anext__ (closed from another task) ends now
    if fatal is not None:  # a step's KeyboardInterrupt or SystemExit not raised yet: never lost
        _taken(p, fatal)
        raise fatal


def dropped(p: _Pipeline) -> None:
    """The caller let go of its iterator (out of its loop) before it ended. When the
    task letting go is cancelled (it left the loop by its cancellation, wherever it
    landed: in the loop body too), no step is admitted any more and the steps in flight
    are cancelled, here and now; they end in their runners, which then leave. Otherwise
    (a ``break``) the steps go on, as documented; either way no runner parks again.
    What its steps raised, and will raise, is ``left``'s."""
    p._dropped = True
    p._close_runners()
    for slot in p._pending:
        if slot.error is not None:
            left(p, slot)
    if not p._admitting and all(slot.done for slot in p._pending):
        return
    if task_cancelled():
        p._closed = p._done = p._exhausted = True
        _cancel(p, RuntimeError("iterate(): the task iterating was cancelled"))


def left(p: _Pipeline, slot: Slot) -> None:
    """A step of the pipeline (or the feed it took) ended with ``slot.error``. A
    ``KeyboardInterrupt`` or ``SystemExit`` is kept for the session's close to raise (the
    first one), unless a caller of the iterator raises it first (``_taken``): so it is never
    lost, whether the iterator is iterated, kept in a variable or let go of. When the
    iterator was let go of (no ``__anext__`` will raise anything), it also stops the
    session, and the step's own error (not a clean stop, nor what another step's failure
    or a cancellation caused) is logged."""
    error = slot.error
    assert error is not None
    step = slot.step
    if _fatal(error):
        engine = p._engine
        if not any(kept is slot for _, kept in engine.left):  # (a dropped iterator's may come again)
            engine.left.append((p, slot))
        if p._dropped:  # nobody will raise it before the close: no new step starts meanwhile
            engine.s._set_hook_stop()
    elif not p._dropped:
        return
    elif isinstance(error, Exception) and not isinstance(error, CLEAN_STOP_TYPES) and (step is None or step.cause is None):
        log_warning(
            "iterate(): %s of an iterator let go of before it ended (a break without aclose()) "
            "failed, and no caller will raise it: %r", "taking a feed" if step is None else "a step", error,
            exc_info=error, step=None if step is None else step.number,
        )


def _cancel(p: _Pipeline, why: BaseException) -> None:
    """Cancel the pipeline's steps in flight and its admission's wait (``_wait_out``
    waits for them)."""
    for slot in p._pending:
        step = slot.step
        if not slot.done and step is not None and step.cause is None:
            step.cause = why
            step.scope.cancel()
    if p._waiting is not None:
        p._waiting.cancel()


async def _wait_out(p: _Pipeline) -> None:
    """Wait for the steps ``_cancel`` cancelled and the admission under way to end
    (shielded, bounded)."""
    grace = p._engine.s._setup.grace
    with anyio.move_on_after(2 * grace + 1.0, shield=True):
        while p._admitting or any(not slot.done for slot in p._pending):
            await p._waker().wait()


def _fatal_error(p: _Pipeline) -> BaseException | None:
    """The first ``KeyboardInterrupt``, ``SystemExit``... a pending step ended with, if any."""
    return next((slot.error for slot in p._pending if slot.error is not None and _fatal(slot.error)), None)


def raise_left(engine: InFlight, error: BaseException | None) -> None:
    """At the session's close, once its steps ended (``error``: why it closes, when not
    cleanly): raise the first ``KeyboardInterrupt`` or ``SystemExit`` of an ``iterate()``
    step that no caller of its iterator raised (the others as notes on it), or add them
    as notes to ``error`` when it is one itself. Each is taken from its iterator, which
    will not raise it again."""
    left, engine.left = engine.left, []
    errors: list[BaseException] = []
    for pipeline, slot in left:
        if slot.error is not None:
            errors.append(slot.error)
            slot.error = None  # taken: the iterator skips its slot,
            pipeline._closed = pipeline._done = True  # and its loop ends, as the session closed
    if error is not None and _fatal(error):
        errors = [other for other in errors if other is not error]
        first = error
    elif errors:
        first = errors.pop(0)
    else:
        return
    for other in errors:
        first.add_note(f"hookrun: a step of an iterator also raised {other!r}")
    if first is not error:
        raise first


def _taken(p: _Pipeline, error: BaseException) -> None:
    """``error`` is raised to a caller of the iterator: the session's close no longer raises
    it, nor another ``KeyboardInterrupt`` or ``SystemExit`` of the same iterator (a note on
    ``error`` names it)."""
    engine = p._engine
    for kept in [entry for entry in engine.left if entry[0] is p]:
        engine.left.remove(kept)
        other = kept[1].error
        if other is not None and other is not error:
            error.add_note(f"hookrun: another step of this iterator also raised {other!r}")


def _origin(p: _Pipeline, exc: BaseException) -> BaseException:
    """The error of the step that failed first, when ``exc`` is a cancellation it caused."""
    cause = exc.__cause__
    if cause is None or not isinstance(exc, RuntimeError):
        return exc
    for slot in p._pending:
        if slot.error is cause:
            return cause
    return exc


def _fatal(error: BaseException) -> bool:
    """Whether a step's ``error`` must reach the caller whatever else happens: neither an
    ``Exception`` nor a cancellation (``KeyboardInterrupt``, ``SystemExit``...). Told without
    asking anyio, as an iterator collected after its event loop ended asks it too."""
    if isinstance(error, Exception):
        return False
    for module, name in (("asyncio", "CancelledError"), ("trio", "Cancelled")):
        cancelled = getattr(sys.modules.get(module), name, None)  # (None: not imported, or being imported)
        if cancelled is not None and isinstance(error, cancelled):
            return False
    return True
