"""One rule for session creators at every entry point (sync or async, function or object),
refusals that name the function, and a session whose ``run`` cannot take a step's arguments."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hookrun import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from hookrun.testing import ScriptedSession

pytestmark = pytest.mark.anyio

SESSION_TYPES = [MonitoredSession, SingularMonitoredSession]


def make_session() -> ScriptedSession:
    return ScriptedSession({"x": 1})


def make_session_at(path: str) -> ScriptedSession:
    return ScriptedSession({"x": 1})


class SyncCreator:
    def create_session(self) -> ScriptedSession:
        return ScriptedSession({"x": 2})


@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_a_sync_factory_is_accepted(session_type: type[Any]) -> None:
    """A plain function or lambda of no arguments creates the session, as for the other entry points."""
    for factory in (make_session, lambda: ScriptedSession({"x": 1})):
        async with session_type(factory) as sess:
            assert await sess.run("x") == 1


@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_a_sync_create_session_is_accepted(session_type: type[Any]) -> None:
    """A creator object whose create_session is a plain method (TensorFlow's way) works."""
    async with session_type(SyncCreator()) as sess:
        assert await sess.run("x") == 2


async def test_a_sync_factory_returning_an_awaitable_is_awaited() -> None:
    """A plain factory handing back a coroutine has it awaited, as ChiefSessionCreator does."""

    async def build() -> ScriptedSession:
        return ScriptedSession({"x": 3})

    async with MonitoredSession(lambda: build()) as sess:
        assert await sess.run("x") == 3


@pytest.mark.parametrize(
    "build",
    [
        lambda factory: MonitoredSession(factory),
        lambda factory: SingularMonitoredSession(factory),
        lambda factory: ChiefSessionCreator(factory),
        lambda factory: WorkerSessionCreator(factory),
        lambda factory: MonitoredTrainingSession(factory),
        lambda factory: MonitoredTrainingSession(factory, is_chief=False),
    ],
)
def test_a_factory_needing_arguments_is_refused_by_name_everywhere(build: Any) -> None:
    """Every entry point refuses a factory that needs arguments, naming it (no '<function ... at 0x')."""
    with pytest.raises(TypeError, match=r"make_session_at needs arguments \(path\)") as caught:
        build(make_session_at)
    assert "0x" not in str(caught.value)


def test_creator_reprs_name_the_factory() -> None:
    """ChiefSessionCreator and WorkerSessionCreator show the factory's name, not its address."""
    assert repr(ChiefSessionCreator(make_session)) == "ChiefSessionCreator(make_session, checkpoint=None)"
    assert repr(WorkerSessionCreator(make_session)).startswith("WorkerSessionCreator(make_session,")


def test_a_creator_class_is_refused_with_a_hint() -> None:
    """Passing the creator class instead of an instance says to pass an instance."""
    with pytest.raises(TypeError, match=r"session_creator is the class SyncCreator; pass an instance"):
        MonitoredSession(SyncCreator)


@pytest.mark.parametrize("session_type", SESSION_TYPES)
async def test_a_session_with_tensorflows_run_signature_is_refused_at_creation(session_type: type[Any]) -> None:
    """run(fetches, feed_dict=None) is refused when the session is created, saying what run must accept."""
    ran: list[object] = []

    class TFStyle:
        async def run(self, fetches: object, feed_dict: object = None) -> list[int]:
            ran.append(fetches)
            return [1]

    async def create() -> TFStyle:
        return TFStyle()

    with anyio.fail_after(5), pytest.raises(
        TypeError,
        match=r"the session TFStyle has run\(fetches, feed_dict=None\), but a monitored session calls "
        r"run\(fetches, feed_dict, options, run_metadata\)",
    ):
        async with session_type(create):
            pass  # pragma: no cover - the creation fails
    assert ran == []


async def test_a_run_taking_the_four_arguments_in_any_form_is_accepted() -> None:
    """Defaults, *args and **kwargs that take the four arguments are all fine."""

    class Flexible:
        async def run(self, fetches: Any, *rest: Any, **extra: Any) -> list[int]:
            return [1 for _ in fetches]

    async def create() -> Flexible:
        return Flexible()

    async with SingularMonitoredSession(create) as sess:
        assert await sess.run("x") == 1
