"""``RayActorSessionCreator``: one Ray actor per session, created with restarts disabled.

The session's ``run`` is one call ``actor.<method>.remote(fetches, feed_dict)`` (with
``tags=`` when the run's options carry tags) returning one value per fetch. Invariants:
an actor is never restarted by Ray (a dead actor surfaces as ``UnavailableError``, so
the monitored session re-creates the session and every hook sees
``after_create_session``, instead of running on a silently reset actor); closing a
session kills its actor; a creation that fails kills the actor it started. An actor
class with ``state_dict`` and ``load_state_dict`` methods makes its sessions
checkpointable: a checkpoint holds the actor's state, and a re-created actor is
restored from it. A lost session actor makes its creator suspect the actor's node;
if that node no longer answers, the calls waiting on its other actors end at once
and new actors go to live nodes (``_placement``), so a dead node Ray has not yet
declared dead neither holds up the lanes nor gets a new session.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar, cast

import ray
from ray.actor import ActorClass, ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .._errors import UnavailableError
from .._log import logger
from ..remote._actor_session import RemoteActorSession, RemoteActorSessionCreator, check_step_method
from ..remote._waiting import WaitEnded
from ._errors import await_ref
from ._placement import NodeWatch, node_of_actor
from ._runtime import RayLease

__all__ = ["RayActorSession", "RayActorSessionCreator"]

#: Options that would let Ray restart a session actor or retry its calls behind hookrun's back.
_NO_RESTARTS = {"max_restarts": 0, "max_task_retries": 0}


class RayActorSession(RemoteActorSession):
    """A session backed by one Ray actor (made by ``RayActorSessionCreator``); closing
    it kills the actor.

    ``actor`` is the actor's handle, for calls outside a step; ``node`` the ID of the
    node it lives on.
    """

    _kind: ClassVar[str] = "RayActorSession"
    actor: ActorHandle[Any]

    def __init__(self, actor: Any, method: str, label: str, *, node: str | None = None, watch: NodeWatch | None = None) -> None:
        super().__init__(actor, method, label)
        self._step = getattr(actor, method)  # bound once: Ray binds a new method object per lookup
        self.node = node
        self._watch = watch
        # The calls waiting on this node's actors: the watch ends them if the node is gone.
        self._waits = None if watch is None or node is None else watch.calls(node)

    async def _call(
        self, fetches: list[Hashable], feed_dict: dict[Any, Any], tags: dict[str, Any] | None
    ) -> Sequence[Any]:
        if tags:
            ref = self._step.remote(fetches, feed_dict, tags=tags)
        else:
            ref = self._step.remote(fetches, feed_dict)
        waits = self._waits
        if waits is None:
            return cast("Sequence[Any]", await await_ref(ref, self))
        try:
            return cast("Sequence[Any]", await await_ref(ref, self, waits))
        except UnavailableError:
            if self._watch is not None:
                await self._watch.lost(self.node)
            raise
        except WaitEnded:  # the watch found the node gone while this call waited
            raise UnavailableError(f"{self!r}: the node of its actor ({self.node}) no longer answers") from None

    def _end(self) -> None:
        _kill(self.actor)


class _CheckpointableActorSession(RayActorSession):
    """A ``RayActorSession`` whose actor has ``state_dict`` / ``load_state_dict``: the
    session's state is the actor's (one actor call each way)."""

    async def state_dict(self) -> Any:
        return await await_ref(self.actor.state_dict.remote(), f"{self!r}.state_dict()")

    async def load_state_dict(self, state: Mapping[str, Any]) -> None:
        await await_ref(self.actor.load_state_dict.remote(dict(state)), f"{self!r}.load_state_dict()")


class RayActorSessionCreator(RemoteActorSessionCreator[RayActorSession]):
    """Creates a ``RayActorSession`` per session: a new actor of ``actor_cls`` each time.

    ``actor_cls`` is a class decorated with ``@ray.remote`` or a plain class (then
    decorated here); it is built with ``*args`` and ``**kwargs``. ``actor_options`` go
    to ``.options()`` (resources, scheduling, runtime env, ...); restarts and task
    retries are disabled and cannot be turned on. ``create_session`` waits until the
    actor is up, so an error in its constructor is raised there. If ``actor_cls``
    has ``state_dict()`` and ``load_state_dict(state)`` methods, its sessions are
    checkpointable (``hookrun.Checkpointable``): a checkpoint saver stores the
    actor's state and a restoring creator (``MonitoredTrainingSession``,
    ``ChiefSessionCreator``) loads it into each new actor.

    When one of its actors is lost and the actor's node no longer answers (its
    raylet refuses connections) but Ray has not yet declared it dead, the calls
    waiting on the creator's other actors on that node fail at once (their lanes
    are re-created), and new actors are pinned to the live nodes in turn until Ray
    declares it dead (unless ``actor_options`` place them itself: ``label_selector``,
    or a scheduling strategy other than ``"DEFAULT"``, ``"SPREAD"`` or a soft node
    affinity).

    Ray already initialised in this process is used as it is. Otherwise a local Ray
    is started on 127.0.0.1 without a dashboard, and ``aclose()`` (or leaving
    ``async with``) shuts it down; a Ray the program started is never shut down.

    Args:
        actor_cls: The actor's class, plain or decorated with ``@ray.remote``; its
            ``run(fetches, feed_dict)`` answers a step.
        *args: The arguments of its constructor.
        method: The name of the actor's method each run calls.
        actor_options: Options for ``.options()`` (resources, scheduling, runtime
            environment). ``None``: none.
        **kwargs: The keyword arguments of its constructor.
    """

    _kind: ClassVar[str] = "RayActorSessionCreator"

    def __init__(
        self,
        actor_cls: type | ActorClass[Any],
        *args: Any,
        method: str = "run",
        actor_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._cls, plain = _actor_class(actor_cls, method)
        self._session_type = (
            _CheckpointableActorSession
            if all(callable(getattr(plain, name, None)) for name in ("state_dict", "load_state_dict"))
            else RayActorSession
        )
        super().__init__(_class_name(actor_cls), method, args, kwargs)
        self._options = _session_actor_options(actor_options)
        self._lease = RayLease()
        self._watch = NodeWatch() if _may_avoid(self._options) else None

    async def aclose(self) -> None:
        """Shut down the local Ray this creator started, if it started one."""
        await self._lease.release()

    async def _start(self) -> RayActorSession:
        await self._lease.acquire()
        options = self._options
        pinned = None if self._watch is None else await self._watch.place()
        if pinned is not None:  # a lost node Ray still lists as alive: pin to a live one
            options = {**options, "scheduling_strategy": NodeAffinitySchedulingStrategy(pinned, soft=False)}
        actor = cast("ActorHandle[Any]", self._cls.options(**options).remote(*self._args, **self._kwargs))
        try:  # up once it answers: an error in its constructor is raised here
            node = await await_ref(actor.__ray_call__.remote(node_of_actor), f"creating {self._label}")
        except BaseException:
            _kill(actor)
            raise
        return self._session_type(actor, self._method, self._label, node=node, watch=self._watch)


def _actor_class(actor_cls: object, method: str) -> tuple[ActorClass[Any], object]:
    """The remote class to instantiate, and the plain class it wraps."""
    if not isinstance(method, str) or not method.isidentifier():
        raise ValueError(f"RayActorSessionCreator: method must be a method name, got {method!r}")
    if isinstance(actor_cls, ActorClass):
        plain = getattr(getattr(actor_cls, "__ray_metadata__", None), "modified_class", actor_cls)
        remote_cls = actor_cls
    elif isinstance(actor_cls, type):
        plain, remote_cls = actor_cls, ray.remote(actor_cls)
    else:
        raise TypeError(
            "RayActorSessionCreator needs a class (plain or decorated with @ray.remote), "
            f"got {type(actor_cls).__name__}"
        )
    check_step_method("RayActorSessionCreator", plain, _class_name(actor_cls), method)
    return remote_cls, plain


def _session_actor_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    if options is None:
        return dict(_NO_RESTARTS)
    if not isinstance(options, Mapping):
        raise TypeError(f"actor_options must be a mapping, got {type(options).__name__}")
    for key, allowed in _NO_RESTARTS.items():
        if options.get(key, allowed) != allowed:
            raise ValueError(
                f"actor_options[{key!r}]={options[key]!r}: a session actor must not be "
                "restarted or retried by Ray (it would run on silently reset state); "
                "hookrun re-creates the session instead"
            )
    return {**options, **_NO_RESTARTS}


def _may_avoid(options: Mapping[str, Any]) -> bool:
    """Whether hookrun may keep new actors off a lost node (the user did not pin them there)."""
    strategy = options.get("scheduling_strategy")
    soft = isinstance(strategy, NodeAffinitySchedulingStrategy) and strategy.soft
    return "label_selector" not in options and (strategy is None or isinstance(strategy, str) or soft)


def _class_name(actor_cls: object) -> str:
    metadata = getattr(actor_cls, "__ray_metadata__", None)
    name = getattr(metadata, "class_name", None) or getattr(actor_cls, "__qualname__", None)
    return str(name or type(actor_cls).__name__).rsplit(".", 1)[-1]


def _kill(actor: ActorHandle[Any]) -> None:
    """Kill ``actor`` if Ray is still up; an actor that is already dead is fine."""
    if not ray.is_initialized():
        return
    try:
        ray.kill(actor, no_restart=True)
    except Exception as exc:
        logger().warning("killing the session actor %r failed: %r", actor, exc)
