"""What goes into a monitored session's checkpoint and how it comes back.

``Checkpointable`` is the protocol sessions and hooks implement:
``state_dict()`` and ``load_state_dict(state)``, each plain or async. A
session's checkpoint is the mapping::

    {"global_step": int, "session": <the session's state>, "hooks": {key: <state>}}

(``"session"`` only when the session is checkpointable). ``check_session_state``
checks a restored state has that shape (a ``CorruptCheckpointError`` naming the
file and the key otherwise), before anything is loaded. Each checkpointable
object gets a stable key: its ``checkpoint_key`` attribute if it has one,
else its class name, with ``#2``, ``#3``... for later objects of the same
class, so the saver and the restorer agree as long as the hooks are listed in
the same order. Composite hooks (``sequential``) contribute their members.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .._global_step import StepCounter
from .._log import logger
from ._file import MAX_STEP, CorruptCheckpointError

__all__ = [
    "Checkpointable",
    "apply_state",
    "check_session_state",
    "checkpointables",
    "collect_state",
    "is_checkpointable",
]


@runtime_checkable
class Checkpointable(Protocol):
    """State that survives restarts: ``state_dict()`` returns a mapping (or an awaitable
    of one); ``load_state_dict(state)`` takes it back (and may be async)."""

    def state_dict(self) -> Any:
        """This object's state, as a mapping the checkpoint codec can store."""
        ...

    def load_state_dict(self, state: Mapping[str, Any]) -> Any:
        """Take back a state returned by ``state_dict``."""
        ...


def is_checkpointable(obj: object) -> bool:
    """Whether ``obj`` has callable ``state_dict`` and ``load_state_dict``."""
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def _members(obj: object) -> Iterable[object]:
    yield obj
    inner = getattr(obj, "members", None)
    if type(obj).__name__ == "_SequentialHook" and isinstance(inner, tuple):
        for member in inner:
            yield from _members(member)
    wrapped = getattr(obj, "hook", None)
    if type(obj).__name__ == "_ThreadedHook" and wrapped is not None:
        yield from _members(wrapped)


def checkpointables(objects: Iterable[object]) -> dict[str, object]:
    """The checkpointable objects among ``objects`` (and their members), by stable key."""
    keyed: dict[str, object] = {}
    counts: dict[str, int] = {}
    seen: set[int] = set()
    for top in objects:
        for obj in _members(top):
            if id(obj) in seen or not is_checkpointable(obj):
                continue
            seen.add(id(obj))
            key = getattr(obj, "checkpoint_key", None)
            if not isinstance(key, str):
                name = type(obj).__name__
                counts[name] = counts.get(name, 0) + 1
                key = name if counts[name] == 1 else f"{name}#{counts[name]}"
            if key in keyed:
                raise ValueError(f"two checkpointable objects share the checkpoint key {key!r}")
            keyed[key] = obj
    return keyed


async def _call(fn: Any, *args: object) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _state_of(owner: str, obj: object) -> dict[str, Any]:
    state = await _call(obj.state_dict)  # type: ignore[attr-defined]
    if not isinstance(state, Mapping):
        raise TypeError(f"{owner} {obj!r}: state_dict() must return a mapping, got {type(state).__name__}")
    return dict(state)


async def collect_state(
    step: int, session: object, objects: Mapping[str, object], lanes: Sequence[object] | None = None
) -> dict[str, Any]:
    """The checkpoint of a monitored session at ``step``. With steps in flight, ``lanes`` are
    the raw sessions of its lanes (``None`` where a lane has none): each lane's state is
    kept under ``lanes`` (``None`` for a lane without one), and ``session`` is the first's."""
    state: dict[str, Any] = {"global_step": step}
    if lanes is not None and len(lanes) > 1:
        states = [await _state_of(f"lane {i}", raw) if is_checkpointable(raw) else None for i, raw in enumerate(lanes)]
        if any(lane is not None for lane in states):
            state["lanes"] = states
            if states[0] is not None:
                state["session"] = states[0]
    elif is_checkpointable(session):
        state["session"] = await _state_of("session", session)
    state["hooks"] = {key: await _state_of(f"hook {key!r}", obj) for key, obj in objects.items()}
    return state


async def apply_state(
    state: Mapping[str, Any],
    session: object,
    objects: Mapping[str, object],
    step_counter: StepCounter | None,
    source: str,
    saved_step: int,
) -> None:
    """Load a checkpoint read from ``source`` (saved at ``saved_step``) into the session, the
    hooks and the step counter; its shape is checked first (``check_session_state``)."""
    check_session_state(state, source)
    step = state.get("global_step", saved_step)
    if step_counter is not None:
        await step_counter.set(step)
    if "session" in state:
        if is_checkpointable(session):
            await _call(session.load_state_dict, state["session"])  # type: ignore[attr-defined]
        else:
            logger().warning(
                "checkpoint %r holds a session state, but the session %r has no load_state_dict; "
                "its state was not restored", source, session,
            )
    hooks = state.get("hooks", {})
    for key, hook_state in hooks.items():
        obj = objects.get(key)
        if obj is None:
            logger().warning(
                "checkpoint %r holds the state of %r, which no hook here claims; it was not restored",
                source, key,
            )
            continue
        await _call(obj.load_state_dict, hook_state)  # type: ignore[attr-defined]


def check_session_state(state: object, source: str) -> None:
    """Raise ``CorruptCheckpointError`` (naming ``source`` and the key) unless ``state`` has
    the shape of a monitored session's checkpoint: an int ``global_step`` from 0 to
    2**63-1, a mapping ``session``, a list ``lanes`` of mappings or ``None`` and a mapping
    ``hooks`` of str keys to mappings (each optional)."""
    if not isinstance(state, Mapping):
        raise CorruptCheckpointError(source, f"its state is a {type(state).__name__}, not a mapping")
    step = state.get("global_step", 0)
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        raise CorruptCheckpointError(source, f"its global_step is {step!r:.60}, not an int from 0 to 2**63-1")
    if "session" in state and not isinstance(state["session"], Mapping):
        raise CorruptCheckpointError(source, f"its session state is a {type(state['session']).__name__}, not a mapping")
    lanes = state.get("lanes", [])
    if not isinstance(lanes, list) or not all(lane is None or isinstance(lane, Mapping) for lane in lanes):
        raise CorruptCheckpointError(source, "its lanes are not a list of session states (mappings, or None)")
    hooks = state.get("hooks", {})
    if not isinstance(hooks, Mapping):
        raise CorruptCheckpointError(source, f"its hooks are a {type(hooks).__name__}, not a mapping of hook states")
    for key, hook_state in hooks.items():
        if not isinstance(key, str) or not isinstance(hook_state, Mapping):
            raise CorruptCheckpointError(
                source, f"its hook state {key!r:.60} is a {type(hook_state).__name__}, not a mapping under a str key"
            )
