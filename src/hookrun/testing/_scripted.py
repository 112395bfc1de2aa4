"""Hand-written doubles: a recording hook, a scripted session and a scripted creator.

``RecordingHook`` records every call with its salient arguments (and can be
told what to return or raise per phase); ``ScriptedSession`` answers fetches
from a script and raises scripted errors at given steps, for fault injection;
``ScriptedCreator`` hands out scripted sessions and can fail creations.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from .._coordinator._tasks import Coordinator
from .._errors import SessionClosedError
from .._hook_protocol import (
    RunMetadata,
    RunOptions,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)

__all__ = ["Call", "RecordingHook", "ScriptedCreator", "ScriptedSession"]


@dataclass(frozen=True, slots=True)
class Call:
    """One recorded hook call: the phase and its salient arguments."""

    phase: str
    args: Mapping[str, Any] = field(default_factory=dict)


class RecordingHook(SessionRunHook):
    """A hook that records every call; ``request`` is returned from ``before_run``.

    ``request`` may be a ``SessionRunArgs`` or a callable ``(run_context) -> SessionRunArgs | None``.
    ``raises`` maps a phase to an exception raised there (once, or every time with
    ``raise_always``). ``stop_in`` lists phases in which the hook requests stop.
    ``log`` may be shared between hooks to record the global order of calls.
    It keeps no per-step state, so steps in flight may overlap under it.

    Args:
        name: Its name in traces, errors and ``log``.
        request: What ``before_run`` returns: ``SessionRunArgs``, or a callable of the run
            context.
        raises: Phase → an exception raised there.
        raise_always: Raise it at every call of the phase, not only the first.
        stop_in: The phases in which it requests stop.
        log: A list, shared between hooks, of ``(name, phase)`` in call order. ``None``: its
            own.
    """

    overlapping_steps = True

    def __init__(
        self,
        name: str = "recorder",
        *,
        request: SessionRunArgs | Callable[[SessionRunContext], SessionRunArgs | None] | None = None,
        raises: Mapping[str, BaseException] | None = None,
        raise_always: bool = False,
        stop_in: Sequence[str] = (),
        log: list[tuple[str, str]] | None = None,
    ) -> None:
        self.name = name
        self.request = request
        self.raises = dict(raises or {})
        self.raise_always = raise_always
        self.stop_in = tuple(stop_in)
        self.calls: list[Call] = []
        self.log = log if log is not None else []

    def phases(self) -> list[str]:
        """The phases called so far, in order."""
        return [call.phase for call in self.calls]

    def count(self, phase: str) -> int:
        return sum(call.phase == phase for call in self.calls)

    def _record(self, phase: str, **args: Any) -> None:
        self.calls.append(Call(phase, args))
        self.log.append((self.name, phase))
        exc = self.raises.get(phase)
        if exc is not None:
            if not self.raise_always:
                del self.raises[phase]
            raise exc

    async def begin(self) -> None:
        self._record("begin")

    async def after_create_session(self, session: Any, coord: Coordinator) -> None:
        self._record("after_create_session", session=session, coord=coord)

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        self._record("before_run", run_context=run_context, global_step=run_context.global_step)
        if "before_run" in self.stop_in:
            run_context.request_stop()
        if callable(self.request):
            return self.request(run_context)
        return self.request

    async def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        self._record(
            "after_run",
            run_context=run_context,
            results=run_values.results,
            global_step=run_values.global_step,
            options=run_values.options,
            run_metadata=run_values.run_metadata,
        )
        if "after_run" in self.stop_in:
            run_context.request_stop()

    async def end(self, session: Any) -> None:
        self._record("end", session=session)


class ScriptedSession:
    """A session that answers fetches from ``values`` and fails on cue.

    ``values`` maps a key to a value or to a callable ``(step, feed_dict) -> value``;
    a key not in ``values`` is answered with the fed value if fed, else ``KeyError``.
    ``errors`` maps a (0-based, per-session) step to an exception raised instead of
    answering; ``hang_at`` lists steps where ``run`` waits until cancelled.
    Every ``run`` call is recorded in ``runs`` as ``(fetches, feed_dict, options)``.

    Args:
        values: Key → value, or → callable ``(step, feed_dict)``. ``None``: none (only fed
            keys are answered).
        errors: Step (0-based, of this session) → an exception raised instead of answering.
        hang_at: Steps at which ``run`` waits until cancelled.
        name: Its name in ``repr``.
    """

    def __init__(
        self,
        values: Mapping[Any, Any] | None = None,
        *,
        errors: Mapping[int, BaseException] | None = None,
        hang_at: Sequence[int] = (),
        name: str = "session",
    ) -> None:
        self.values = dict(values or {})
        self.errors = dict(errors or {})
        self.hang_at = set(hang_at)
        self.name = name
        self.steps = 0
        self.closed = 0
        self.runs: list[tuple[list[Hashable], dict[Hashable, Any], RunOptions]] = []

    def __repr__(self) -> str:
        return f"ScriptedSession({self.name!r}, steps={self.steps}, closed={self.closed})"

    async def run(
        self,
        fetches: Sequence[Hashable],
        feed_dict: Mapping[Any, Any],
        options: RunOptions,
        run_metadata: RunMetadata,
    ) -> list[Any]:
        if self.closed:
            raise SessionClosedError(f"{self!r} used after close")
        step = self.steps
        self.steps += 1
        self.runs.append((list(fetches), dict(feed_dict), options))
        if step in self.hang_at:
            await anyio.sleep_forever()
        error = self.errors.get(step)
        if error is not None:
            raise error
        return [self._answer(key, step, feed_dict) for key in fetches]

    def _answer(self, key: Hashable, step: int, feed_dict: Mapping[Any, Any]) -> Any:
        if key in self.values:
            value = self.values[key]
            return value(step, feed_dict) if callable(value) else value
        if key in feed_dict:
            return feed_dict[key]
        raise KeyError(f"{self!r} has no value for fetch {key!r}")

    async def aclose(self) -> None:
        self.closed += 1


class ScriptedCreator:
    """Creates ``ScriptedSession``s answering from ``values``.

    ``errors`` maps a creation attempt (0-based) to an exception raised instead of
    creating; ``session_errors`` and ``hang_at`` map a session's number (0-based, counting
    only sessions actually created) to that session's ``errors`` and ``hang_at``.

    Args:
        values: What every session answers from (see ``ScriptedSession``).
        session_errors: Session number (0-based) → that session's ``errors``.
        errors: Creation attempt (0-based) → an exception raised instead of creating.
        hang_at: Session number → that session's ``hang_at``.
    """

    def __init__(
        self,
        values: Mapping[Any, Any] | None = None,
        *,
        session_errors: Mapping[int, Mapping[int, BaseException]] | None = None,
        errors: Mapping[int, BaseException] | None = None,
        hang_at: Mapping[int, Sequence[int]] | None = None,
    ) -> None:
        self.values = dict(values or {})
        self.session_errors = dict(session_errors or {})
        self.errors = dict(errors or {})
        self.hang_at = dict(hang_at or {})
        self.attempts = 0
        self.sessions: list[ScriptedSession] = []

    async def create_session(self) -> ScriptedSession:
        number = self.attempts
        self.attempts += 1
        error = self.errors.get(number)
        if error is not None:
            raise error
        session = ScriptedSession(
            self.values,
            errors=self.session_errors.get(len(self.sessions)),
            hang_at=self.hang_at.get(len(self.sessions), ()),
            name=f"session-{len(self.sessions)}",
        )
        self.sessions.append(session)
        return session
