"""``DaskStepCounter``: a global step shared across Dask clients, held by an async actor.

The counter is an async actor on one worker; its future is published on the
scheduler as a named dataset, so every client finds the same actor (a ``Lock``
makes create-or-join atomic). ``wait_for`` is one actor call parked on the
worker's event loop until the target is reached: nothing polls, and cancelling the
caller also withdraws the parked waiter. Invariants: the value only changes through
``increment`` and ``set``; a counter whose worker died surfaces as
``UnavailableError``, and the next call creates a new one (with ``initial``).
``recent()`` answers, without a round trip, with a value this counter read or wrote
itself within ``max_staleness`` seconds; ``get()`` always asks the actor.
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

import anyio
from distributed import Client, Future, Lock

from .._errors import UnavailableError
from ..remote._counter import RemoteStepCounter
from ..remote._shared_step import SharedStep
from ._errors import DaskActorLostError, await_actor_call, is_unreachable, unavailable

__all__ = ["DaskStepCounter"]

_ALIVE = ("finished", "pending")

#: The actor's proxy and its future (whose status says whether its worker is alive).
_Handle = tuple[Any, "Future[Any]"]


class DaskStepCounter(RemoteStepCounter[_Handle]):
    """A ``StepCounter`` shared by every client of a Dask cluster that uses ``name``.

    The first counter to be used creates the actor with ``initial``; the others join
    it and ``initial`` is ignored. ``client`` is a synchronous ``distributed.Client``
    and is never closed here. Call ``delete()`` once at the end of the job.

    ``recent()`` is the value this counter last read or wrote (``get``,
    ``increment``, ``set``) if that call was sent at most ``max_staleness`` seconds
    ago, else ``None``. A monitored session uses it for each step's
    ``run_context.global_step``, so a step makes one round trip to the counter (the
    increment), not two. ``max_staleness=0`` makes every step read the counter afresh.

    Args:
        client: A synchronous ``distributed.Client`` (never closed here).
        name: The counter's name: every client using it shares the counter.
        initial: The value of a counter this one creates.
        max_staleness: Seconds for which the value last read or written answers
            ``recent()``.
    """

    _kind: ClassVar[str] = "DaskStepCounter"

    def __init__(
        self,
        client: Client,
        name: str = "global_step",
        *,
        initial: int = 0,
        max_staleness: float = 0.05,
    ) -> None:
        super().__init__(name, initial=initial, max_staleness=max_staleness)
        if not isinstance(client, Client):
            raise TypeError(f"DaskStepCounter: client must be a distributed.Client, got {type(client).__name__}")
        self.client = client

    def __repr__(self) -> str:
        return f"DaskStepCounter({self.name!r})"

    async def delete(self) -> None:
        """Remove the shared counter for every client (once, at the end of the job)."""
        handle = self._drop()
        await anyio.to_thread.run_sync(self._unpublish)
        if handle is not None:
            handle[1].release()

    async def _open(self) -> _Handle:
        return await anyio.to_thread.run_sync(self._get_or_create)

    async def _invoke(self, handle: _Handle, method: str, args: tuple[int, ...], token: int | None) -> int:
        actor, future = handle
        if future.status not in _ALIVE:
            raise UnavailableError(f"{self!r}: the worker holding the counter was lost")
        on_cancel = None
        if token is not None:  # a cancelled caller cannot stop the parked call: withdraw it
            args = (*args, token)
            on_cancel = lambda: actor.forget(token)  # noqa: E731
        try:
            value: int = await await_actor_call(
                self.client, lambda: getattr(actor, method)(*args), on_cancel=on_cancel
            )
        except (OSError, RuntimeError) as exc:
            if is_unreachable(exc) or future.status not in _ALIVE:
                raise unavailable(repr(self), DaskActorLostError(str(exc))) from exc
            raise
        return value

    @property
    def _dataset(self) -> str:
        return f"hookrun-step-{self.name}"

    def _unpublish(self) -> None:
        with contextlib.suppress(KeyError):
            self.client.unpublish_dataset(self._dataset)

    def _get_or_create(self) -> _Handle:
        """Join the published counter, or create and publish one (under a cluster-wide lock)."""
        with self.client.as_current(), Lock(f"hookrun-step-{self.name}"):
            future = self.client.get_dataset(self._dataset, default=None)
            if not isinstance(future, Future) or future.status not in _ALIVE:
                future = self.client.submit(SharedStep, self.initial, actor=True, pure=False)
                self.client.publish_dataset(future, name=self._dataset, override=True)
            return future.result(), future
