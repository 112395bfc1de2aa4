"""Every hook's ``on_exception``, called when a monitored session exits without ending:
``ExitHooks``, one per monitored session.

Which hooks: those the session started, i.e. whose ``begin`` was called (a hook with
no ``begin`` of its own once every ``begin`` returned): a hook nothing was ever called
on has nothing to release. To know it, the ``begin`` calls are marked when the session
is built (``watch_begin``); a session none of whose hooks has ``on_exception`` marks
nothing and pays nothing.

When: once, at the first close that does not end the hooks (``settle``): an error, a
cancellation, or no session to end with. A close that calls ``end`` settles them too,
so ``on_exception`` never comes with ``end``, nor ``end`` after it.

How: as ``end`` is called (concurrently, each started in hook-list order, by the same
dispatcher, with the same ``hook_timeout``), with ``(session, exception)``, in a task
group of its own under ``anyio.move_on_after(stop_grace_period, shield=True)``: the
cancellation being handled does not interrupt the clean-up, and a clean-up that hangs
is given up, logged, after the grace period. An error an ``on_exception`` raises is
caught, logged, and added to ``exception`` as a note; it never cancels the other
calls and never replaces ``exception``.

Invariant: ``on_exception`` is called at most once per hook and session, never after
``end`` began, and every call is over (returned, raised or cancelled) when ``settle``
returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from .._dispatch._dispatcher import Dispatcher
from .._dispatch._plan import Call, PhasePlan
from .._dispatch._start import check_plain_result
from .._log import log_warning

__all__ = ["ExitHooks"]


class ExitHooks:
    """The ``on_exception`` calls of one monitored session, and whether they are due."""

    __slots__ = ("_begins", "_begun", "_calls", "_grace", "_returned", "settled")

    def __init__(self, plan: PhasePlan, grace: float) -> None:
        self._calls = plan.calls
        self._grace = grace
        self._begun: set[int] = set()  # the hooks whose begin was called
        self._begins = 0  # how many begin calls there are, and how many returned
        self._returned = 0
        #: Whether the hooks were ended or told of the exit (nothing more is called).
        self.settled = False

    def watch_begin(self, begin: PhasePlan) -> PhasePlan:
        """The begin plan to run, with each call marking its hook as started (``begin``
        itself when no hook has ``on_exception``)."""
        if not self._calls:
            return begin
        self._begins = len(begin.calls)
        return PhasePlan(begin.phase, [call.wrapped(self._marked(call)) for call in begin.calls])

    async def settle(
        self, session: object, *, ending: bool, exception: BaseException | None, step: int | None = None
    ) -> None:
        """A close: the hooks are ``ending`` (``end`` is about to be called), or are not,
        because of ``exception`` (``None``: not known yet, nothing is called now)."""
        if self.settled or (not ending and exception is None):
            return
        self.settled = True
        if exception is None or ending:
            return
        calls = [call for call in self._calls if self._started(call.index)]
        if calls:
            await self._call(calls, session, exception, step)

    def _started(self, index: int) -> bool:
        return index in self._begun or self._returned == self._begins

    async def _call(
        self, calls: Sequence[Call], session: object, exception: BaseException, step: int | None
    ) -> None:
        failures: list[tuple[str, BaseException]] = []
        plan = PhasePlan("on_exception", [call.wrapped(_guarded(call, failures)) for call in calls])
        with anyio.move_on_after(self._grace, shield=True) as bound:
            try:
                async with anyio.create_task_group() as tg:
                    dispatcher = Dispatcher((), task_group=lambda: tg)
                    await dispatcher.run(plan, [(session, exception)] * len(calls))
                    tg.cancel_scope.cancel()  # the workers it parked there
            except Exception as exc:  # the dispatcher's own, never a hook's (those are caught)
                failures.append(("the on_exception phase", exc))
        if bound.cancelled_caught:
            log_warning(
                "the hooks' on_exception took longer than stop_grace_period=%ss; gave up waiting",
                self._grace, step=step, phase="on_exception",
            )
        for who, error in failures:
            log_warning(
                "%s failed while the session exits with %r: %r", who, exception, error,
                exc_info=error, step=step, phase="on_exception",
            )
            exception.add_note(f"hookrun: {who} also failed: {error!r}")

    def _marked(self, call: Call) -> Callable[..., Any]:
        fn, index = call.fn, call.index
        if call.is_async:

            async def marked_async(*args: Any) -> Any:
                self._begun.add(index)
                result = await fn(*args)
                self._returned += 1
                return result

            return marked_async

        def marked(*args: Any) -> Any:
            self._begun.add(index)
            result = fn(*args)
            self._returned += 1
            return result

        return marked


def _guarded(call: Call, failures: list[tuple[str, BaseException]]) -> Callable[..., Any]:
    """``call.fn`` recording its error in ``failures`` instead of raising it."""
    fn, who = call.fn, f"hook {call.name}.on_exception"
    if call.is_async:

        async def guarded_async(*args: Any) -> None:
            try:
                await fn(*args)
            except Exception as exc:
                failures.append((who, exc))

        return guarded_async

    def guarded(*args: Any) -> None:
        try:
            check_plain_result(call, fn(*args))
        except Exception as exc:
            failures.append((who, exc))

    return guarded
