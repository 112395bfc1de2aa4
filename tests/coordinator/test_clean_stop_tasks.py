"""A background task of the session's coordinator that ends its input ends the session cleanly."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hookrun import Coordinator, MonitoredSession, OutOfRangeError, SingularMonitoredSession
from hookrun.testing import RecordingHook, ScriptedCreator

pytestmark = pytest.mark.anyio

LIMIT = 10.0


class Producer(RecordingHook):
    """Starts a producer task on every new session's coordinator; it ends with ``ending``."""

    def __init__(self, ending: type[BaseException]) -> None:
        super().__init__("producer")
        self.ending = ending
        self.produced: list[int] = []

    async def after_create_session(self, session: Any, coord: Coordinator) -> None:
        await super().after_create_session(session, coord)
        coord.start_soon(self.produce, name="producer")

    async def produce(self) -> None:
        for item in range(3):
            self.produced.append(item)
            await anyio.lowlevel.checkpoint()
        raise self.ending("input exhausted")


@pytest.mark.parametrize("ending", [anyio.EndOfStream, OutOfRangeError, StopAsyncIteration])
@pytest.mark.parametrize("session_type", [MonitoredSession, SingularMonitoredSession])
async def test_a_task_ending_its_input_ends_the_session_cleanly(
    session_type: type[Any], ending: type[BaseException]
) -> None:
    producer = Producer(ending)
    other = RecordingHook("other")
    creator = ScriptedCreator({"x": 1})
    steps = 0
    with anyio.fail_after(LIMIT):
        async with session_type(creator, [producer, other]) as sess:
            coord = producer.calls[1].args["coord"]
            await coord.wait_for_stop()
            assert sess.should_stop()
            while not sess.should_stop():  # the usual loop: ends at once
                steps += 1
        # Nothing raised at exit; every end ran; the session was closed once.
    assert producer.produced == [0, 1, 2]
    assert producer.count("end") == 1 and other.count("end") == 1
    assert coord.exception is None
    assert creator.sessions[0].closed == 1
    assert steps == 0


async def test_a_real_error_of_a_task_still_propagates() -> None:
    """Only the clean-stop types are clean: any other task error is raised at exit (after
    end, since the block itself ended normally)."""

    class Failing(Producer):
        async def produce(self) -> None:
            raise ValueError("broken input")

    producer = Failing(anyio.EndOfStream)
    with anyio.fail_after(LIMIT), pytest.raises(ValueError, match="broken input"):
        async with SingularMonitoredSession(ScriptedCreator(), [producer]):
            await producer.calls[1].args["coord"].wait_for_stop()
    assert producer.count("end") == 1
