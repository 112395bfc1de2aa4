"""A monitored session keeps its state in slots: every attribute a step reads from the
session is a slot or a class attribute, never a name looked up in the instance's dict,
and whatever a session of any kind sets on itself, entered, stepped, recovered and
closed, stays out of its ``__dict__`` except the few names meant to be there.

Past about 30 instance attributes CPython stops sharing the attribute keys of a class's
instances and keeps each one's attributes in a full dict: a new attribute set in the
constructor, outside the slots, would not break anything, but a session that set enough
of them would make every step read its state through a hash table again. These tests
say which attribute did."""

from __future__ import annotations

import contextlib
import dis
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from hookrun import (
    AbortedError,
    MonitoredSession,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
)
from hookrun._session import _stepping
from hookrun._session._base import _MonitoredSessionBase
from hookrun._session._state import SessionAttributes
from hookrun.testing import ScriptedCreator

pytestmark = pytest.mark.anyio

SLOTS = frozenset(_MonitoredSessionBase.__slots__)

#: What may live in a session's ``__dict__``: the public attributes only (no entry point
#: is installed on the instance, whatever the hooks or ``max_in_flight``).
PUBLIC = {"hooks", "max_in_flight"}

#: The methods of a step, from ``run()`` to the hooks' calls, and the step bodies (functions
#: taking the session as ``self``).
STEP_METHODS: list[Callable[..., Any]] = [
    _MonitoredSessionBase.run,
    _MonitoredSessionBase._admit,
    _MonitoredSessionBase.should_stop,
    _stepping.scoped_step,
    _stepping.general_step,
    _stepping.run_in_step_contexts,
]


def attributes_of_self(function: Callable[..., Any]) -> set[str]:
    """The names ``function`` reads or sets on its ``self`` (``self.name``)."""
    names: set[str] = set()
    previous = None
    for instruction in dis.get_instructions(function):
        if (
            previous is not None
            and previous.opname == "LOAD_FAST"
            and previous.argval == "self"
            and instruction.opname in {"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR"}
        ):
            names.add(str(instruction.argval))
        previous = instruction
    return names


@pytest.mark.parametrize("function", STEP_METHODS, ids=lambda f: f.__qualname__)
def test_a_step_reads_only_slots_and_class_attributes(function: Callable[..., Any]) -> None:
    names = attributes_of_self(function)
    assert names, f"{function.__qualname__}: no self.attribute found; is the scan still right?"
    in_dict = sorted(
        name for name in names if name not in SLOTS and not hasattr(MonitoredSession, name)
    )
    assert not in_dict, f"{function.__qualname__} reads {in_dict} from the session's __dict__"


def test_the_attribute_scan_finds_what_a_step_reads() -> None:
    """The scan is not vacuous: it sees the reads of ``run()``, its plain-call step's too."""
    assert MonitoredSession.run is vars(_MonitoredSessionBase)["run"]  # the class's own, never an instance's
    assert {"_busy", "_stats", "_before", "_after", "_turns", "_plain", "_state", "_lane", "_step", "_coord"} <= (
        attributes_of_self(MonitoredSession.run)
    )


def test_the_slots_are_the_sessions_own() -> None:
    """No slot shadows a method or a class attribute of a session class, and none repeats."""
    assert len(SLOTS) == len(_MonitoredSessionBase.__slots__)
    for cls in (MonitoredSession, SingularMonitoredSession):
        for name in SLOTS:
            descriptor = next(vars(k)[name] for k in cls.__mro__ if name in vars(k))
            assert type(descriptor).__name__ == "member_descriptor", (cls, name)


def test_the_session_inherits_no_part() -> None:
    """Its one base declares its slots; every entry point is its class's own (what
    introspection finds on ``MonitoredSession`` is what runs), none an inherited part's."""
    assert _MonitoredSessionBase.__mro__ == (_MonitoredSessionBase, SessionAttributes, object)
    assert not [name for name, value in vars(SessionAttributes).items() if callable(value) and not name.startswith("__")]
    for name in (
        "run", "iterate", "run_step_fn", "should_stop", "__aenter__", "__aexit__", "aclose", "raw_session",
        "statistics", "global_step", "step_counter",
    ):
        assert name in vars(_MonitoredSessionBase), name


class PlainHook(SessionRunHook):
    def before_run(self, run_context: SessionRunContext) -> None:
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        return None


class AsyncHook(SessionRunHook):
    async def before_run(self, run_context: SessionRunContext) -> None:
        await anyio.lowlevel.checkpoint()

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        return None


class ContextHook(PlainHook):
    @contextlib.contextmanager
    def step_context(self, run_context: SessionRunContext, run_metadata: Any) -> Iterator[None]:
        yield


class OverlappingHook(PlainHook):
    overlapping_steps = True


SESSIONS: dict[str, tuple[type[Any], Callable[[], list[SessionRunHook]], dict[str, Any], set[str]]] = {
    "plain hooks": (MonitoredSession, lambda: [PlainHook()], {}, PUBLIC),
    "async hooks": (MonitoredSession, lambda: [AsyncHook(), AsyncHook()], {}, PUBLIC),
    "a step context": (MonitoredSession, lambda: [ContextHook()], {}, PUBLIC),
    "no hooks, singular": (SingularMonitoredSession, list, {}, PUBLIC),
    "steps in flight": (MonitoredSession, lambda: [OverlappingHook()], {"max_in_flight": 2}, PUBLIC),
}


@pytest.mark.parametrize("kind", SESSIONS)
async def test_a_session_sets_nothing_else_on_itself(kind: str) -> None:
    """Built, entered, stepped, recovered from an ``AbortedError`` (a MonitoredSession)
    and closed: the ``__dict__`` holds only the names meant for it."""
    cls, hooks, options, allowed = SESSIONS[kind]
    recovers = cls is MonitoredSession
    lost = {2: AbortedError("the session was lost")} if recovers else {}
    session = cls(ScriptedCreator({"x": 1}, session_errors={0: lost}), hooks(), **options)
    assert set(vars(session)) <= allowed, sorted(set(vars(session)) - allowed)
    async with session:
        for _ in range(8):
            assert await session.run("x") == 1
        assert set(vars(session)) <= allowed, sorted(set(vars(session)) - allowed)
        if recovers:
            assert session.statistics().recoveries == 1
    assert set(vars(session)) <= allowed, sorted(set(vars(session)) - allowed)


async def test_a_subclass_keeps_its_own_attributes() -> None:
    """A user's subclass may set attributes of its own: they go to the instance's dict."""

    class Counting(MonitoredSession):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.steps_seen = 0

        async def run(self, *args: Any, **kwargs: Any) -> Any:
            self.steps_seen += 1
            return await super().run(*args, **kwargs)

    session = Counting(ScriptedCreator({"x": 1}), [PlainHook()])
    async with session:
        assert await session.run("x") == 1
        await session.run("x")
    assert session.steps_seen == 2
    assert vars(session)["steps_seen"] == 2
