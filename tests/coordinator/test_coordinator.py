"""Tests of ``hookrun.Coordinator`` (and of TensorFlow's coordinator_test.py cases)."""

from __future__ import annotations

import logging

import anyio
import anyio.lowlevel
import pytest
from anyio.abc import TaskGroup
from trio.testing import MockClock

from hookrun._coordinator._tasks import Coordinator
from hookrun._errors import AbortedError, OutOfRangeError
from hookrun._global_step import LocalStepCounter

pytestmark = pytest.mark.anyio

LIMIT = 5.0  # bound for anything that could hang


class MyCleanStop(Exception):
    """A user-defined clean-stop type."""


async def wait_stop_then_finish(coord: Coordinator, finished: list[str], name: str) -> None:
    await coord.wait_for_stop()
    finished.append(name)


async def fail(message: str) -> None:
    raise ValueError(message)


def running_tasks() -> int:
    return len(anyio.get_running_tasks())


# -- stop API (172, 173) ----------------------------------------------------------


async def test_stop_api() -> None:
    """should_stop/wait_for_stop are False before and True after request_stop (172)."""
    coord = Coordinator()
    assert not coord.should_stop()
    assert not await coord.wait_for_stop(0.01)
    coord.request_stop()
    assert coord.should_stop()
    assert await coord.wait_for_stop(0.01)
    assert await coord.wait_for_stop()


async def test_stop_from_another_task_wakes_waiter() -> None:
    """A stop requested by another task wakes wait_for_stop (173)."""
    coord = Coordinator()
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(coord.wait_for_stop)
            await anyio.wait_all_tasks_blocked()
            coord.request_stop()
    assert coord.should_stop()


async def test_wait_for_stop_timeout_returns_false() -> None:
    """wait_for_stop returns False when the timeout expires without a stop request."""
    coord = Coordinator()
    with anyio.fail_after(LIMIT):
        assert await coord.wait_for_stop(0.01) is False
        assert await coord.wait_for_stop(-1) is False


# -- join (174-178) ---------------------------------------------------------------


async def test_join_waits_for_finished_tasks() -> None:
    """join returns without a stop request once every task finished (174, 175)."""
    finished: list[str] = []

    async def work(name: str) -> None:
        await anyio.lowlevel.checkpoint()
        finished.append(name)

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.start_soon(work, "a")
            coord.start_soon(work, "b")
            await coord.join()
            assert sorted(finished) == ["a", "b"]
            assert coord.joined
            assert not coord.should_stop()


async def test_join_never_requests_stop() -> None:
    """join blocks while tasks live and nobody requests stop (TF surprise 15)."""
    finished: list[str] = []
    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord, anyio.create_task_group() as tg:
            coord.start_soon(wait_stop_then_finish, coord, finished, "worker")
            tg.start_soon(coord.join)
            await anyio.wait_all_tasks_blocked()
            assert not coord.joined
            coord.request_stop()
    assert finished == ["worker"]


async def test_join_grace_expires_names_stragglers() -> None:
    """A task alive after the grace period makes join raise RuntimeError naming it (177)."""
    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.start_soon(anyio.sleep_forever, name="stubborn")
            coord.start_soon(anyio.sleep_forever, name="deaf")
            coord.request_stop()
            with pytest.raises(
                RuntimeError, match=r"^Coordinator stopped with tasks still running: stubborn deaf$"
            ):
                await coord.join(stop_grace_period=0.01)
            assert coord.joined
            assert "tasks=[]" in repr(coord)


async def test_join_ignore_live_tasks_logs_stragglers(caplog: pytest.LogCaptureFixture) -> None:
    """With ignore_live_tasks, stragglers are cancelled and logged, not raised (178)."""
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with Coordinator() as coord:
            coord.start_soon(anyio.sleep_forever)
            coord.request_stop()
            await coord.join(stop_grace_period=0.0, ignore_live_tasks=True)
    assert "grace period of 0s expired" in caplog.text
    assert "tasks still running: sleep_forever" in caplog.text


async def test_join_default_name_is_qualname() -> None:
    """A straggler is named by its function's qualified name by default."""

    class Worker:
        async def run(self) -> None:
            await anyio.sleep_forever()

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.start_soon(Worker().run)
            coord.request_stop()
            with pytest.raises(RuntimeError, match=r"running: .*Worker\.run$"):
                await coord.join(stop_grace_period=0.0)


async def test_join_exception_takes_precedence_over_stragglers() -> None:
    """A recorded exception wins over stragglers in join."""
    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.start_soon(anyio.sleep_forever)
            coord.request_stop(ValueError("first"))
            with pytest.raises(ValueError, match=r"^first$"):
                await coord.join(stop_grace_period=0.0)
            coord.clear_stop()


async def test_join_validates_grace() -> None:
    """A negative grace period is a ValueError naming the parameter."""
    coord = Coordinator()
    with pytest.raises(ValueError, match=r"join\(stop_grace_period=\.\.\.\) must be .* >= 0"):
        await coord.join(stop_grace_period=-1)


# -- exceptions (179-186) -----------------------------------------------------------


async def test_first_exception_wins_and_join_raises_it() -> None:
    """The first exception reported is re-raised by join; later ones are ignored (179, 180)."""
    coord = Coordinator()
    coord.request_stop(ValueError("first"))
    coord.request_stop(RuntimeError("second"))
    with pytest.raises(ValueError, match=r"^first$"):
        await coord.join()


async def test_exception_property() -> None:
    """exception is None until a real exception is recorded, then that exception."""
    coord = Coordinator()
    coord.request_stop(OutOfRangeError("clean"))
    assert coord.exception is None
    error = AbortedError("preempted")
    coord.request_stop(error)
    assert coord.exception is error
    coord.clear_stop()
    assert coord.exception is None


async def test_recorded_exception_is_the_argument() -> None:
    """request_stop records the exception given, not the one being handled (TF surprise 14)."""
    coord = Coordinator()
    given = ValueError("given")
    try:
        raise KeyError("handled")
    except KeyError:
        coord.request_stop(given)
    with pytest.raises(ValueError) as info:
        coord.raise_requested_exception()
    assert info.value is given


async def test_raise_keeps_original_traceback() -> None:
    """raise_requested_exception keeps the recorded exception's original traceback."""
    coord = Coordinator()
    try:
        await fail("boom")
    except ValueError as exc:
        coord.request_stop(exc)
    lengths = []
    for _ in range(2):
        with pytest.raises(ValueError, match=r"boom") as info:
            coord.raise_requested_exception()
        assert info.traceback[-1].name == "fail"
        lengths.append(len(info.traceback))
    assert lengths[0] == lengths[1]  # raising again does not pile up frames


async def test_plain_stop_does_not_mask_later_exception() -> None:
    """A plain stop request followed by an exception still records it (TensorFlow lost it)."""
    coord = Coordinator()
    coord.request_stop()
    coord.request_stop(ValueError("late"))
    with pytest.raises(ValueError, match=r"^late$"):
        await coord.join()


async def test_out_of_range_is_clean_stop_by_default() -> None:
    """OutOfRangeError (and subclasses) count as no exception by default (181)."""

    class Exhausted(OutOfRangeError):
        pass

    coord = Coordinator()
    coord.request_stop(Exhausted("done"))
    coord.request_stop(OutOfRangeError("done"))
    assert coord.should_stop()
    await coord.join()
    coord.raise_requested_exception()


async def test_every_clean_stop_type_is_clean_by_default() -> None:
    """The default clean-stop types are the monitored session's three, subclasses included."""
    for clean in (OutOfRangeError("done"), StopAsyncIteration(), anyio.EndOfStream(),
                  type("Drained", (anyio.EndOfStream,), {})()):
        coord = Coordinator()
        coord.request_stop(clean)
        assert coord.should_stop() and coord.exception is None
        await coord.join()


async def test_task_ending_its_stream_is_a_plain_stop() -> None:
    """A task reading a memory stream until EndOfStream stops the coordinator without error."""
    send, receive = anyio.create_memory_object_stream[int](1)
    got: list[int] = []

    async def consume() -> None:
        with receive:
            while True:
                got.append(await receive.receive())

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.start_soon(consume)
            async with send:
                await send.send(1)
            assert await coord.wait_for_stop()
    assert got == [1] and coord.exception is None


async def test_given_clean_stop_types_replace_default() -> None:
    """Given clean-stop types are honoured and replace OutOfRangeError (182)."""
    coord = Coordinator(clean_stop_exception_types=[MyCleanStop])
    coord.request_stop(MyCleanStop("clean"))
    coord.request_stop(OutOfRangeError("real now"))
    with pytest.raises(OutOfRangeError, match=r"^real now$"):
        await coord.join()


async def test_no_clean_stop_types() -> None:
    """An empty clean-stop list makes every exception real."""
    coord = Coordinator(clean_stop_exception_types=())
    coord.request_stop(OutOfRangeError("real"))
    with pytest.raises(OutOfRangeError, match=r"^real$"):
        coord.raise_requested_exception()


def test_clean_stop_types_validated() -> None:
    """Clean-stop types must be exception classes."""
    with pytest.raises(TypeError, match=r"clean_stop_exception_types=.*exception classes, got 3"):
        Coordinator(clean_stop_exception_types=[3])  # type: ignore[list-item]


def test_clean_stop_types_from_a_generator_are_checked_too() -> None:
    """A generator of clean-stop types is taken whole, and a non-exception class in it refused."""
    with pytest.raises(TypeError, match=r"clean_stop_exception_types=.*exception classes, got <class 'int'>"):
        Coordinator(clean_stop_exception_types=(t for t in (KeyError, int)))  # type: ignore[misc]


def test_clean_stop_types_from_a_generator_are_kept() -> None:
    """A generator of exception classes is a valid clean-stop list."""
    coord = Coordinator(clean_stop_exception_types=(t for t in (KeyError,)))
    coord.request_stop(KeyError("clean"))
    coord.raise_requested_exception()  # clean: nothing raised


def test_request_stop_validates_argument() -> None:
    """request_stop rejects what is neither None nor an exception."""
    with pytest.raises(TypeError, match=r"request_stop\(ex=...\) must be None or an exception"):
        Coordinator().request_stop("oops")  # type: ignore[arg-type]


async def test_stop_on_exception_sync_records_and_suppresses() -> None:
    """`with stop_on_exception()` records the first error and swallows it (183)."""
    coord = Coordinator()
    with coord.stop_on_exception():
        raise ValueError("first")
    with coord.stop_on_exception():
        raise RuntimeError("second")
    with coord.stop_on_exception():
        pass
    with pytest.raises(ValueError, match=r"^first$"):
        await coord.join()


async def test_stop_on_exception_async_records_and_suppresses() -> None:
    """`async with stop_on_exception()` records an error and swallows it (183)."""
    coord = Coordinator()
    async with coord.stop_on_exception():
        await fail("async")
    assert coord.should_stop()
    with pytest.raises(ValueError, match=r"^async$"):
        await coord.join()


async def test_stop_on_exception_without_error_does_not_stop() -> None:
    """A body that succeeds requests no stop."""
    coord = Coordinator()
    async with coord.stop_on_exception():
        await anyio.lowlevel.checkpoint()
    assert not coord.should_stop()


async def test_stop_on_exception_never_swallows_cancellation() -> None:
    """Cancellation passes through stop_on_exception in both forms (unlike TF's bare except)."""
    coord = Coordinator()
    with anyio.CancelScope() as scope:
        with coord.stop_on_exception():
            scope.cancel()
            await anyio.lowlevel.checkpoint()
    with anyio.CancelScope() as scope2:
        async with coord.stop_on_exception():
            scope2.cancel()
            await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught and scope2.cancelled_caught
    assert not coord.should_stop()


def test_stop_on_exception_never_swallows_keyboard_interrupt() -> None:
    """KeyboardInterrupt passes through stop_on_exception (TF surprise 16)."""
    coord = Coordinator()
    with pytest.raises(KeyboardInterrupt), coord.stop_on_exception():
        raise KeyboardInterrupt
    assert not coord.should_stop()


async def test_clear_stop_clears_exception() -> None:
    """After clear_stop a new error is recorded and re-raised (184)."""
    coord = Coordinator()
    coord.request_stop(ValueError("first"))
    with pytest.raises(ValueError, match=r"^first$"):
        await coord.join()
    coord.clear_stop()
    assert not coord.joined and not coord.should_stop()
    coord.request_stop(RuntimeError("second"))
    with pytest.raises(RuntimeError, match=r"^second$"):
        await coord.join()


async def test_request_stop_raises_if_joined() -> None:
    """After join request_stop(ex) raises ex at once; after clear_stop it records (185, 186)."""
    coord = Coordinator()
    coord.request_stop()
    await coord.join()
    coord.request_stop()  # a plain stop request is fine
    coord.request_stop(OutOfRangeError("clean"))  # so is a clean stop
    with pytest.raises(ValueError, match=r"^now$"):
        coord.request_stop(ValueError("now"))
    coord.raise_requested_exception()  # it was not recorded
    coord.clear_stop()
    coord.request_stop(ValueError("recorded"))
    with pytest.raises(ValueError, match=r"^recorded$"):
        await coord.join()


async def test_waiter_survives_clear_stop() -> None:
    """A task waiting for stop is woken by a stop requested after clear_stop."""
    coord = Coordinator()
    coord.request_stop()
    coord.clear_stop()
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(coord.wait_for_stop)
            await anyio.wait_all_tasks_blocked()
            coord.request_stop()


# -- background tasks ---------------------------------------------------------------


async def test_task_exception_becomes_stop_request() -> None:
    """An exception raised by a background task is recorded; the task group survives."""
    finished: list[str] = []
    with anyio.fail_after(LIMIT):
        coord = Coordinator()
        with pytest.raises(ValueError, match=r"^task failed$"):
            async with coord:
                coord.start_soon(wait_stop_then_finish, coord, finished, "peer")
                coord.start_soon(fail, "task failed")
                assert await coord.wait_for_stop()
    assert finished == ["peer"]
    assert coord.joined


async def test_task_clean_stop_exception_is_plain_stop() -> None:
    """A background task raising a clean-stop type stops without an error."""

    async def exhausted() -> None:
        raise OutOfRangeError("end of input")

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.start_soon(exhausted)
            await coord.wait_for_stop()
            await coord.join()


async def test_task_failing_after_join_is_recorded() -> None:
    """A task failing after join records its error instead of crashing the task group."""
    with anyio.fail_after(LIMIT):
        coord = Coordinator()
        with pytest.raises(ValueError, match=r"^late$"):
            async with coord:
                await coord.join()
                coord.start_soon(fail, "late")


async def test_start_soon_requires_open_coordinator() -> None:
    """start_soon outside `async with` is a RuntimeError naming the task."""
    coord = Coordinator()
    with pytest.raises(
        RuntimeError, match=r"cannot start task 'fail': the Coordinator is not open"
    ):
        coord.start_soon(fail, "x")
    async with coord:
        pass
    with pytest.raises(RuntimeError, match=r"not open"):
        coord.start_soon(fail, "x", name="after")


async def test_exit_raises_recorded_exception() -> None:
    """Leaving `async with` requests stop, joins the tasks and raises the recorded error."""
    finished: list[str] = []
    with anyio.fail_after(LIMIT), pytest.raises(AbortedError, match=r"^preempted$"):
        async with Coordinator() as coord:
            coord.start_soon(wait_stop_then_finish, coord, finished, "w")
            coord.request_stop(AbortedError("preempted"))
    assert finished == ["w"]


async def test_exit_names_stragglers() -> None:
    """Leaving `async with` cleanly with stragglers after the grace raises RuntimeError."""
    with anyio.fail_after(LIMIT), pytest.raises(RuntimeError, match=r"still running: forever$"):
        async with Coordinator(stop_grace_period=0.01) as coord:
            coord.start_soon(anyio.sleep_forever, name="forever")


async def test_exit_body_exception_propagates_with_note(caplog: pytest.LogCaptureFixture) -> None:
    """A body error propagates; the recorded error is logged and attached as a note."""
    with anyio.fail_after(LIMIT), pytest.raises(KeyError) as info:
        async with Coordinator(stop_grace_period=0.0) as coord:
            coord.start_soon(anyio.sleep_forever)
            coord.request_stop(ValueError("recorded"))
            raise KeyError("body")
    assert info.value.__notes__ == ["while the coordinator had recorded ValueError('recorded')"]
    assert "Coordinator had recorded an exception" in caplog.text


async def test_exit_under_cancellation_propagates_it() -> None:
    """A cancelled enclosing scope cancels the tasks too; exit neither hangs nor swallows it."""
    seen: list[str] = []

    async def worker() -> None:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    with anyio.fail_after(LIMIT), anyio.CancelScope() as scope:
        async with Coordinator() as coord:
            coord.start_soon(worker)
            await anyio.wait_all_tasks_blocked()
            scope.cancel()
            await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    assert seen == ["cancelled"]
    assert coord.joined
    coord.raise_requested_exception()  # cancellation was not recorded as an error


async def test_open_twice_is_an_error() -> None:
    """A coordinator cannot be entered while it is open."""
    async with Coordinator() as coord:
        with pytest.raises(RuntimeError, match=r"^Coordinator is already open$"):
            await coord.__aenter__()


# -- loop (187-189) -------------------------------------------------------------------


async def test_loop_calls_with_args_until_stop() -> None:
    """loop calls a sync target with positional args until it requests stop (187)."""
    counter = [3]

    def target(coord: Coordinator, box: list[int]) -> None:
        box[0] -= 1
        if box[0] == 0:
            coord.request_stop()

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.loop(0.001, target, coord, counter)
            await coord.wait_for_stop()
    assert counter == [0]


async def test_loop_async_target_back_to_back() -> None:
    """interval None calls an async target back to back (188, 189: kwargs via partial)."""
    calls: list[int] = []

    async def target(n: int) -> None:
        calls.append(n)
        if len(calls) == 5:
            raise OutOfRangeError("enough")

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.loop(None, target, 7)
            assert await coord.wait_for_stop()
    assert calls == [7] * 5


async def test_loop_back_to_back_does_not_starve_others() -> None:
    """A back-to-back loop checkpoints between calls, so other tasks keep running."""
    calls = [0]

    def target() -> None:
        calls[0] += 1
        if calls[0] > 10_000:
            raise RuntimeError("starved the event loop")

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.loop(0, target)
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            coord.request_stop()
    assert 1 <= calls[0] < 100


async def test_loop_calls_at_fixed_boundaries() -> None:
    """The k-th call happens no earlier than k intervals after the first."""
    times: list[float] = []

    def target() -> None:
        times.append(anyio.current_time())
        if len(times) == 4:
            raise OutOfRangeError

    with anyio.fail_after(LIMIT):
        async with Coordinator() as coord:
            coord.loop(0.02, target)
            await coord.wait_for_stop()
    for k, t in enumerate(times):
        assert t - times[0] >= k * 0.02 - 1e-3


@pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("trio", {"clock": MockClock(autojump_threshold=0)}), id="trio-mockclock")],
)
async def test_loop_does_not_drift(anyio_backend: object) -> None:
    """With a slow target, calls stay on start + k * interval (trio's MockClock)."""
    times: list[float] = []

    async def target() -> None:
        times.append(anyio.current_time())
        await anyio.sleep(0.3)
        if len(times) == 4:
            raise OutOfRangeError

    async with Coordinator() as coord:
        coord.loop(1.0, target)
        await coord.wait_for_stop()
    assert [round(t - times[0], 6) for t in times] == [0.0, 1.0, 2.0, 3.0]


async def test_loop_exception_is_recorded_and_ends_loop() -> None:
    """An exception from the target is recorded and ends the loop."""
    calls: list[int] = []

    def target() -> None:
        calls.append(1)
        raise ValueError("loop failed")

    with anyio.fail_after(LIMIT):
        coord = Coordinator()
        with pytest.raises(ValueError, match=r"^loop failed$"):
            async with coord:
                coord.loop(0, target, name="looper")
                await coord.wait_for_stop()
                await anyio.wait_all_tasks_blocked()
                assert "tasks=[]" in repr(coord)
    assert calls == [1]


async def test_loop_validates_interval() -> None:
    """A negative interval is a ValueError naming the parameter."""
    async with Coordinator() as coord:
        with pytest.raises(
            ValueError, match=r"loop\(interval=...\) must be None or .* >= 0, got -1"
        ):
            coord.loop(-1, print)


# -- hosted mode ------------------------------------------------------------------------


async def open_nested(coord: Coordinator, tg: TaskGroup) -> None:
    with anyio.CancelScope():
        await coord._open_in(tg)


async def test_hosted_open_and_close_at_different_levels() -> None:
    """_open_in and _close_hosted work from different nested scopes and leave no task."""
    finished: list[str] = []
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as parent:
            before = running_tasks()
            coord = Coordinator()
            await open_nested(coord, parent)
            coord.start_soon(wait_stop_then_finish, coord, finished, "w")
            assert running_tasks() > before
            with anyio.CancelScope():
                await coord._close_hosted(1.0)
            assert running_tasks() == before
    assert finished == ["w"]
    assert coord.joined
    assert repr(coord).startswith("<Coordinator closed")


async def test_hosted_close_inside_cancelled_scope_joins() -> None:
    """Closing hosted mode in an already-cancelled scope still gives tasks their grace."""
    finished: list[str] = []

    async def slow_cleanup() -> None:
        await coord.wait_for_stop()
        await anyio.sleep(0.01)  # cleanup that takes time
        finished.append("cleanup")

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as parent:
            coord = Coordinator()
            await coord._open_in(parent)
            coord.start_soon(slow_cleanup)
            with anyio.CancelScope() as scope:
                scope.cancel()
                await coord._close_hosted(LIMIT)
    assert finished == ["cleanup"]


async def test_hosted_close_ignores_stragglers(caplog: pytest.LogCaptureFixture) -> None:
    """Closing hosted mode cancels stragglers after the grace and only logs them."""
    with anyio.fail_after(LIMIT), caplog.at_level(logging.WARNING, logger="hookrun"):
        async with anyio.create_task_group() as parent:
            coord = Coordinator()
            await coord._open_in(parent)
            coord.start_soon(anyio.sleep_forever, name="straggler")
            with anyio.CancelScope() as scope:
                scope.cancel()
                await coord._close_hosted(0.01)
    assert "tasks still running: straggler" in caplog.text


async def test_hosted_close_raises_recorded_exception() -> None:
    """_close_hosted re-raises the recorded exception; without ignoring, stragglers too."""
    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as parent:
            coord = Coordinator()
            await coord._open_in(parent)
            coord.start_soon(fail, "background")
            with pytest.raises(ValueError, match=r"^background$"):
                await coord._close_hosted(1.0)
            coord.clear_stop()
            await coord._open_in(parent)
            coord.start_soon(anyio.sleep_forever, name="s")
            with pytest.raises(RuntimeError, match=r"still running: s$"):
                await coord._close_hosted(0.0, ignore_live_tasks=False)


async def test_close_hosted_refuses_standalone_coordinator() -> None:
    """_close_hosted on a coordinator opened by `async with` is a RuntimeError."""
    async with Coordinator() as coord:
        with pytest.raises(RuntimeError, match=r"opened by `async with`, not by _open_in"):
            await coord._close_hosted(0.0)


async def test_hosted_parent_cancelled_first() -> None:
    """If the parent task group is cancelled first, closing later still works."""
    with anyio.fail_after(LIMIT):
        coord = Coordinator()
        async with anyio.create_task_group() as parent:
            await coord._open_in(parent)
            coord.start_soon(anyio.sleep_forever)
            parent.cancel_scope.cancel()
        await coord._close_hosted(1.0)
    with pytest.raises(RuntimeError, match=r"not open"):
        coord.start_soon(anyio.sleep_forever)


# -- misc -----------------------------------------------------------------------------


def test_step_counter_default_and_given() -> None:
    """step_counter is the given counter, or a fresh LocalStepCounter."""
    counter = LocalStepCounter(5)
    assert Coordinator(step_counter=counter).step_counter is counter
    assert isinstance(Coordinator().step_counter, LocalStepCounter)
    with pytest.raises(TypeError, match=r"must implement StepCounter"):
        Coordinator(step_counter=object())  # type: ignore[arg-type]


def test_grace_validated() -> None:
    """A negative or NaN stop_grace_period is a ValueError naming the parameter."""
    for bad in (-1, float("nan")):
        with pytest.raises(ValueError, match=r"Coordinator\(stop_grace_period=...\) must be"):
            Coordinator(stop_grace_period=bad)


def test_repr() -> None:
    """repr shows the state, the live tasks and the recorded exception."""
    coord = Coordinator()
    coord.request_stop(ValueError("x"))
    assert repr(coord) == (
        "<Coordinator closed stop_requested=True joined=False tasks=[] exception=ValueError('x')>"
    )
