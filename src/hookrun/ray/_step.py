"""``RayStepSession``: a ``StepSession`` whose every step is one Ray task.

Each run submits ``remote_fn.remote(feed_dict)`` and answers fetches by key from the
mapping the task returns. Ray retries a task whose worker crashed (``max_retries``,
3 by default), so a step function may run more than once for one step: make it
idempotent, or pass ``task_options={"max_retries": 0}`` to have the crash recovered by
re-creating the session instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ray
from ray.remote_function import RemoteFunction

from .._session._raw import StepSession
from ._errors import await_ref
from ._runtime import ensure_ray

__all__ = ["RayStepSession"]


class RayStepSession(StepSession):
    """A session whose every ``run`` is one Ray task ``remote_fn.remote(feed_dict)``.

    ``remote_fn`` is a function decorated with ``@ray.remote`` or a plain function
    (then decorated here); it returns a mapping (or ``None``), and a missing fetch key
    raises ``KeyError`` listing the keys it returned. ``task_options`` go to
    ``.options()``. If Ray is not initialised, the first run starts a local Ray on
    127.0.0.1 (without a dashboard) that stays up until the process exits.

    Args:
        remote_fn: The step, a function (plain, or decorated with ``@ray.remote``) of the
            feed dict returning a mapping.
        task_options: Options for each task's ``.options()``. ``None``: none.
    """

    def __init__(
        self,
        remote_fn: object,
        *,
        task_options: Mapping[str, Any] | None = None,
    ) -> None:
        function: Any
        if isinstance(remote_fn, RemoteFunction):
            function = remote_fn
        elif callable(remote_fn) and not isinstance(remote_fn, type):
            function = ray.remote(remote_fn)
        else:
            raise TypeError(
                "RayStepSession needs a function (plain or decorated with @ray.remote), "
                f"got {remote_fn!r}"
            )
        if task_options is not None:
            if not isinstance(task_options, Mapping):
                raise TypeError(f"task_options must be a mapping, got {type(task_options).__name__}")
            function = function.options(**task_options)
        self.remote_fn = function
        self._label = getattr(remote_fn, "__qualname__", None) or _remote_name(remote_fn)
        super().__init__(self._remote_step)

    def __repr__(self) -> str:
        return f"RayStepSession({self._label})"

    async def _remote_step(self, feed_dict: Mapping[Any, Any]) -> Any:
        await ensure_ray()
        return await await_ref(self.remote_fn.remote(dict(feed_dict)), repr(self))


def _remote_name(remote_fn: object) -> str:
    function = getattr(remote_fn, "_function", None)
    return str(getattr(function, "__qualname__", None) or type(remote_fn).__name__)
