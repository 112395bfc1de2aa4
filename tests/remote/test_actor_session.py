"""RemoteActorSession and its creator, the logic every engine's actor sessions share, over
an in-process 'actor': the call per run, tags, closing once, counting creations."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar

import anyio
import anyio.lowlevel
import pytest

import hookrun
from hookrun.remote._actor_session import (
    RemoteActorSession,
    RemoteActorSessionCreator,
    check_step_method,
)

pytestmark = pytest.mark.anyio


class Model:
    """The 'actor': counts its calls; a feed ``fail`` raises."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.calls = 0
        self.ended = 0

    def run(self, fetches: Sequence[str], feeds: Mapping[str, Any], tags: Mapping[str, Any] | None = None) -> list[Any]:
        self.calls += 1
        if "fail" in feeds:
            raise ValueError(f"model cannot take {feeds['fail']!r}")
        values = {"y": feeds.get("x", 0) + self.offset, "calls": self.calls, "tags": tags}
        return [values[key] for key in fetches]


class LocalActorSession(RemoteActorSession):
    _kind: ClassVar[str] = "LocalActorSession"
    actor: Model

    async def _call(
        self, fetches: list[Hashable], feed_dict: dict[Any, Any], tags: dict[str, Any] | None
    ) -> Sequence[Any]:
        assert type(fetches) is list and type(feed_dict) is dict
        method = getattr(self.actor, self._method)
        values: Sequence[Any] = method(fetches, feed_dict, tags=tags) if tags else method(fetches, feed_dict)
        return values

    def _end(self) -> None:
        self.actor.ended += 1


class LocalCreator(RemoteActorSessionCreator[LocalActorSession]):
    _kind: ClassVar[str] = "LocalCreator"

    def __init__(self, cls: type[Model], *args: Any, method: str = "run", **kwargs: Any) -> None:
        check_step_method(self._kind, cls, cls.__qualname__, method)
        super().__init__(cls.__qualname__, method, args, kwargs)
        self.cls = cls
        self.closed = 0

    async def _start(self) -> LocalActorSession:
        await anyio.lowlevel.checkpoint()
        return LocalActorSession(self.cls(*self._args, **self._kwargs), self._method, self._label)

    async def aclose(self) -> None:
        self.closed += 1


async def test_each_run_is_one_actor_call_with_tags_only_when_given() -> None:
    """The actor keeps state across runs; a run's tags reach the method as tags=."""
    async with LocalCreator(Model, 10) as creator:
        with anyio.fail_after(5):
            async with hookrun.MonitoredSession(creator) as sess:
                assert await sess.run(["y", "calls"], {"x": 1}) == [11, 1]
                tagged = hookrun.RunOptions(tags={"phase": "eval"})
                assert await sess.run(["calls", "tags"], options=tagged) == [2, {"phase": "eval"}]
                assert await sess.run({"n": "calls", "t": "tags"}) == {"n": 3, "t": None}
        assert creator.created == 1
    assert creator.closed == 1


async def test_closing_ends_the_actor_once_and_refuses_later_runs() -> None:
    """aclose ends the actor exactly once; run afterwards is SessionClosedError naming the session."""
    session = await LocalCreator(Model).create_session()
    assert repr(session) == "LocalActorSession(Model.run)"
    await session.aclose()
    await session.aclose()
    assert session.actor.ended == 1
    assert repr(session) == "LocalActorSession(Model.run, closed)"
    with pytest.raises(hookrun.SessionClosedError, match=r"LocalActorSession\(Model\.run, closed\): run\(\) after"):
        await session.run(["y"], {})
    assert session.actor.calls == 0


async def test_a_user_error_propagates_and_is_not_retried() -> None:
    """An error raised by the actor's method propagates as itself; no re-creation."""
    creator = LocalCreator(Model)
    with anyio.fail_after(5), pytest.raises(ValueError, match="model cannot take 'nan'"):
        async with hookrun.MonitoredSession(creator) as sess:
            await sess.run("y", {"fail": "nan"})
    assert creator.created == 1


async def test_created_counts_only_sessions_whose_actor_came_up() -> None:
    """A start that fails is not counted; the creator's repr names the class and method."""

    class Broken(Model):
        def __init__(self) -> None:
            raise RuntimeError("cannot build the model")

    creator = LocalCreator(Broken, method="run")
    assert repr(creator) == "LocalCreator(test_created_counts_only_sessions_whose_actor_came_up.<locals>.Broken, method='run')"
    with pytest.raises(RuntimeError, match="cannot build the model"):
        await creator.create_session()
    assert creator.created == 0


@pytest.mark.parametrize("method", ["train", 3, "offset"])
def test_a_missing_step_method_is_refused_naming_the_class(method: object) -> None:
    """A method the class does not have (or that is not callable) is refused when built."""
    with pytest.raises(AttributeError, match=rf"LocalCreator: Model has no method {method!r} to run"):
        LocalCreator(Model, method=method)  # type: ignore[arg-type]
