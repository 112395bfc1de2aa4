"""An ``iterate()`` iterator with steps in flight that the loop let go of without closing
it (a ``break`` with no ``aclose()`` nor ``contextlib.aclosing``): its steps go on in the
background, and what they raise is not lost. A ``KeyboardInterrupt`` or ``SystemExit``
comes out of the session's close (leaving ``async with``, or ``aclose()``) as itself, and
the hooks get ``on_exception`` with it, not ``end``; any other error of a step is logged,
and the session closes as usual."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping

import anyio
import pytest

from hookrun import (
    MonitoredSession,
    RunAfterStopError,
    SessionRunContext,
    SessionRunValues,
    StepSession,
)

from ._in_flight_support import Recorder

pytestmark = pytest.mark.anyio

LIMIT = 20.0  # a guard against a hang, not a measure
FATAL = [KeyboardInterrupt, SystemExit]


class Raising(Recorder):
    """A recorder whose ``after_run`` raises ``error`` once, for the step fed ``{"k": 2}``."""

    def __init__(self, error: type[BaseException] | None) -> None:
        super().__init__()
        self.error = error
        self.raised: list[BaseException] = []

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        await super().after_run(run_context, run_values)
        feed = run_context.original_args.feed_dict
        if self.error is not None and feed is not None and feed["k"] == 2 and not self.raised:
            self.raised.append(self.error("from after_run"))
            raise self.raised[-1]


class Pipeline:
    """A session of 4 lanes whose step fed ``{"k": 2}`` waits for ``go`` once its run
    started (``started``), then raises ``error`` (if any) or returns ``{"y": 2}``."""

    def __init__(self, error: type[BaseException] | None, hook: Raising | None = None) -> None:
        self.started, self.go = anyio.Event(), anyio.Event()
        self.raised: list[BaseException] = []
        self.hook = hook or Raising(None)

        async def step(feeds: Mapping[str, int]) -> dict[str, int]:
            if feeds["k"] == 2:
                self.started.set()
                await self.go.wait()
                if error is not None:
                    self.raised.append(error("from the run"))
                    raise self.raised[-1]
            return {"y": feeds["k"]}

        self.session = MonitoredSession(lambda: StepSession(step), [self.hook], max_in_flight=4)

    async def break_out(self, *, go_first: bool = False, keep: list[object] | None = None) -> None:
        """Take the first result and break once the step fed 2 runs (``go_first``: once it
        ended); the loop lets go of the iterator without closing it (``keep``: the caller
        keeps it, unclosed, in this list)."""
        steps = self.session.iterate("y", ({"k": k} for k in range(6)))
        if keep is not None:
            keep.append(steps)
        async for _ in steps:
            await self.started.wait()
            if go_first:
                self.go.set()
                while not (self.raised or self.hook.raised):
                    await anyio.wait_all_tasks_blocked()
                await anyio.wait_all_tasks_blocked()  # the step ended in its runner
            break
        self.go.set()


@pytest.mark.parametrize("go_first", [False, True], ids=["raised after the drop", "raised before the drop"])
@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_a_step_raising_it_after_a_break_makes_the_block_raise_it(error: type[BaseException], go_first: bool) -> None:
    pipeline = Pipeline(error)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with pipeline.session:
                await pipeline.break_out(go_first=go_first)
    assert raised.value is pipeline.raised[0]
    assert pipeline.hook.exceptions == [raised.value] and pipeline.hook.ends == 0


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_a_hook_raising_it_after_a_break_makes_the_block_raise_it(error: type[BaseException]) -> None:
    pipeline = Pipeline(None, Raising(error))
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with pipeline.session:
                await pipeline.break_out()
    assert raised.value is pipeline.hook.raised[0]
    assert pipeline.hook.exceptions == [raised.value] and pipeline.hook.ends == 0


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_aclose_of_the_session_raises_it(error: type[BaseException]) -> None:
    pipeline = Pipeline(error)
    with anyio.fail_after(LIMIT):
        async with pipeline.session:
            await pipeline.break_out()
            with pytest.raises(error) as raised:
                await pipeline.session.aclose()
    assert raised.value is pipeline.raised[0]
    assert pipeline.hook.exceptions == [raised.value] and pipeline.hook.ends == 0


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_it_wins_over_the_error_the_block_raises(error: type[BaseException]) -> None:
    pipeline = Pipeline(error)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with pipeline.session:
                await pipeline.break_out(go_first=True)
                raise ValueError("the block's own error")
    assert raised.value is pipeline.raised[0]
    assert isinstance(raised.value.__context__, ValueError)
    assert pipeline.hook.exceptions == [raised.value]


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_a_step_answering_the_loops_cancellation_with_it_makes_the_block_raise_it(
    error: type[BaseException],
) -> None:
    """The cancellation lands in the loop body: the dropped iterator cancels its steps,
    and the step that answers with the exception makes the close raise it."""
    raised: list[BaseException] = []
    started = anyio.Event()

    async def step(feeds: Mapping[str, int]) -> dict[str, int]:
        if feeds["k"] == 1:
            started.set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                raised.append(error("raised while being cancelled"))
                raise raised[-1] from None
        return {"y": feeds["k"]}

    hook = Recorder()
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as caught:
            async with MonitoredSession(lambda: StepSession(step), [hook], max_in_flight=4) as sess:
                with anyio.CancelScope() as scope:
                    async for _ in sess.iterate("y", ({"k": k} for k in range(6))):
                        await started.wait()
                        scope.cancel()
                        await anyio.sleep_forever()
    assert caught.value is raised[0]
    assert hook.exceptions == [caught.value] and hook.ends == 0


@pytest.mark.parametrize("go_first", [False, True], ids=["raised after the drop", "raised before the drop"])
async def test_another_error_of_a_step_after_a_break_is_logged(
    go_first: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The session closes as usual (the hooks' ``end``), and the error is not lost silently."""
    pipeline = Pipeline(ValueError)
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with pipeline.session:
            await pipeline.break_out(go_first=go_first)
    assert pipeline.hook.ends == 1 and pipeline.hook.exceptions == []
    (record,) = [r for r in caplog.records if "let go of" in r.getMessage()]
    assert record.exc_info is not None and record.exc_info[1] is pipeline.raised[0]
    assert "a break without aclose()" in record.getMessage()


class FailingFeeds:
    """Async feeds: three, then, once ``go`` is set, ``error`` (kept in ``raised``). The
    pipeline waits for the fourth as the loop breaks out at the first result."""

    def __init__(self, error: type[BaseException]) -> None:
        self.error = error
        self.go = anyio.Event()
        self.raised: list[BaseException] = []

    async def __aiter__(self) -> AsyncIterator[dict[str, int]]:
        for k in range(3):
            yield {"k": k}
        await self.go.wait()
        self.raised.append(self.error("from the feeds"))
        raise self.raised[-1]

    async def break_out(self, pipeline: Pipeline) -> None:
        async for _ in pipeline.session.iterate("y", self):
            await pipeline.started.wait()
            break
        pipeline.go.set()
        self.go.set()
        while not self.raised:
            await anyio.wait_all_tasks_blocked()
        await anyio.wait_all_tasks_blocked()  # the admission that took it ended


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_the_feeds_raising_it_after_a_break_makes_the_block_raise_it(error: type[BaseException]) -> None:
    pipeline, feeds = Pipeline(None), FailingFeeds(error)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with pipeline.session:
                await feeds.break_out(pipeline)
    assert raised.value is feeds.raised[0]
    assert pipeline.hook.exceptions == [raised.value] and pipeline.hook.ends == 0


async def test_another_error_of_the_feeds_after_a_break_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    pipeline, feeds = Pipeline(None), FailingFeeds(ValueError)
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with pipeline.session:
            await feeds.break_out(pipeline)
    assert pipeline.hook.ends == 1 and pipeline.hook.exceptions == []
    (record,) = [r for r in caplog.records if "let go of" in r.getMessage()]
    assert record.exc_info is not None and record.exc_info[1] is feeds.raised[0]
    assert "taking a feed" in record.getMessage()


async def test_a_keyboard_interrupt_of_the_block_itself_comes_out_with_a_note() -> None:
    """The block raises ``KeyboardInterrupt`` while a step of a dropped iterator left a
    ``SystemExit``: the block's comes out, and names the other."""
    pipeline = Pipeline(SystemExit)
    with anyio.fail_after(LIMIT):
        with pytest.raises(KeyboardInterrupt) as raised:
            async with pipeline.session:
                await pipeline.break_out(go_first=True)
                raise KeyboardInterrupt("the block's own")
    assert str(raised.value) == "the block's own"
    assert any("also raised SystemExit" in note for note in raised.value.__notes__)
    assert pipeline.hook.exceptions == [raised.value]


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_an_iterator_kept_unclosed_in_a_variable_does_not_lose_it(error: type[BaseException]) -> None:
    """The caller breaks out of the loop and keeps the iterator in a variable, never closing
    it: the step's error still comes out of the block."""
    pipeline = Pipeline(error)
    kept: list[object] = []
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with pipeline.session:
                await pipeline.break_out(go_first=True, keep=kept)
    assert kept and raised.value is pipeline.raised[0]
    assert pipeline.hook.exceptions == [raised.value] and pipeline.hook.ends == 0


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_it_stops_the_session_at_once(error: type[BaseException]) -> None:
    """Once a step of an iterator let go of raised it, no new step starts (the process is
    being stopped): ``run()`` is refused as after a stop, the block then raises it."""
    pipeline = Pipeline(error)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with pipeline.session as sess:
                await pipeline.break_out(go_first=True)
                assert sess.should_stop()
                with pytest.raises(RunAfterStopError):
                    await sess.run("y", {"k": 0})
    assert raised.value is pipeline.raised[0]


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_an_iterator_that_raises_it_to_its_caller_leaves_nothing_for_the_close(error: type[BaseException]) -> None:
    """The iterating task gets the step's error from the loop itself: the close raises
    nothing more (no note of it on itself)."""
    pipeline = Pipeline(error)
    with anyio.fail_after(LIMIT):
        with pytest.raises(error) as raised:
            async with pipeline.session:
                pipeline.go.set()
                async for _ in pipeline.session.iterate("y", ({"k": k} for k in range(6))):
                    pass
    assert raised.value is pipeline.raised[0]
    assert not getattr(raised.value, "__notes__", None)


@pytest.mark.parametrize("error", FATAL, ids=lambda e: e.__name__)
async def test_a_close_from_another_task_raises_it_once_and_the_loop_ends(error: type[BaseException]) -> None:
    """A step's error waits while the loop body runs, and another task closes the session:
    that close raises it (once), and the loop then ends without raising it again."""
    pipeline = Pipeline(error)
    sess = pipeline.session
    closed: list[BaseException] = []
    seen: list[object] = []
    with anyio.fail_after(LIMIT):
        async with sess:
            async for y in sess.iterate("y", ({"k": k} for k in range(6))):
                seen.append(y)
                if len(seen) == 1:
                    await pipeline.started.wait()
                    pipeline.go.set()
                    while not pipeline.raised:
                        await anyio.wait_all_tasks_blocked()

                    async def close() -> None:
                        try:
                            await sess.aclose()
                        except BaseException as exc:  # the step's, raised in this task
                            closed.append(exc)

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(close)
    assert len(closed) == 1 and closed[0] is pipeline.raised[0]
    assert pipeline.hook.exceptions == [closed[0]] and pipeline.hook.ends == 0


async def test_a_kept_iterators_error_is_not_lost_when_another_iterator_raises_its_own() -> None:
    """Iterator ``a`` is kept unclosed and its step raises ``SystemExit``; iterator ``b``'s step
    raises ``KeyboardInterrupt``, which its loop raises and the caller catches: the block
    still raises ``a``'s."""
    a_goes = anyio.Event()
    raised: dict[str, BaseException] = {}

    async def step(feeds: Mapping[str, object]) -> dict[str, object]:
        who, k = feeds["who"], feeds["k"]
        if k == 1 and who == "a":
            with anyio.CancelScope(shield=True):
                await a_goes.wait()
            raised["a"] = SystemExit("a")
            raise raised["a"]
        if k == 1 and who == "b":
            raised["b"] = KeyboardInterrupt("b")
            raise raised["b"]
        return {"y": (who, k)}

    hook = Recorder()
    with anyio.fail_after(LIMIT):
        with pytest.raises(SystemExit) as out:
            async with MonitoredSession(lambda: StepSession(step), [hook], max_in_flight=4) as sess:
                kept = sess.iterate("y", ({"who": "a", "k": k} for k in range(3)))
                async for _ in kept:
                    break
                with pytest.raises(KeyboardInterrupt):
                    async for _ in sess.iterate("y", ({"who": "b", "k": k} for k in range(3))):
                        pass
                a_goes.set()
                while "a" not in raised:
                    await anyio.wait_all_tasks_blocked()
    assert out.value is raised["a"]
    assert hook.exceptions == [raised["a"]] and hook.ends == 0


async def test_an_iterator_raising_one_takes_its_others_too() -> None:
    """Two steps of one iterator raise (``SystemExit``, then ``KeyboardInterrupt`` for a step
    before it in feed order): the loop raises the first in feed order, naming the other in a
    note, and a caller who catches it leaves the block cleanly (``end``)."""
    second_done, first_goes = anyio.Event(), anyio.Event()

    async def step(feeds: Mapping[str, int]) -> dict[str, int]:
        k = feeds["k"]
        if k == 1:
            with anyio.CancelScope(shield=True):
                await first_goes.wait()
            raise KeyboardInterrupt("k=1")
        if k == 2:
            second_done.set()
            raise SystemExit("k=2")
        return {"y": k}

    hook = Recorder()
    caught: list[BaseException] = []
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(lambda: StepSession(step), [hook], max_in_flight=4) as sess:
            try:
                async for _ in sess.iterate("y", ({"k": k} for k in range(4))):
                    await second_done.wait()
                    await anyio.wait_all_tasks_blocked()
                    first_goes.set()
            except KeyboardInterrupt as exc:
                caught.append(exc)
    assert len(caught) == 1 and "SystemExit('k=2')" in " ".join(getattr(caught[0], "__notes__", []))
    assert hook.ends == 1 and hook.exceptions == []
