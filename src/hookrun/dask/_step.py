"""``DaskStepSession``: a ``StepSession`` whose every step is one Dask task.

Each run submits ``fn(feed_dict)`` with ``pure=False`` (Dask would otherwise give
two runs with equal feeds the same key and serve the second from its cache, so the
step would not run again) and answers fetches by key from the mapping it returns.
The scheduler re-runs a task whose worker died, so a step function may run more
than once for one step: make it idempotent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from distributed import Client

from .._session._raw import StepSession
from ._client import ClientSource
from ._step_task import Kept, close_kept, run_task

__all__ = ["DaskStepSession"]


class DaskStepSession(StepSession):
    """A session whose every ``run`` is one Dask task ``fn(feed_dict)`` returning a mapping.

    ``client`` is a synchronous ``distributed.Client`` that stays yours (hookrun never
    closes it); ``address`` makes the session connect a client of its own, rebuilt if
    it closes and closed with the session; with neither, the default client is used.

    Args:
        fn: The step, a function of the feed dict returning a mapping, run as a Dask task.
        client: A synchronous ``distributed.Client`` to use (never closed here).
        address: A scheduler's address to connect a client of the session's own to.
    """

    def __init__(
        self, fn: Callable[..., Any], *, client: Client | None = None, address: str | None = None
    ) -> None:
        if not callable(fn) or isinstance(fn, type):
            raise TypeError(f"DaskStepSession needs a function, got {fn!r}")
        self.fn = fn
        self._label = getattr(fn, "__qualname__", type(fn).__name__)
        self._source = ClientSource(f"DaskStepSession({self._label})", client, address)
        self._kept = Kept()  # the latest step's future, kept until the next submission
        super().__init__(self._remote_step)

    def __repr__(self) -> str:
        return f"DaskStepSession({self._label})"

    @property
    def client(self) -> Client | None:
        """The client in use (``None`` before the first run of a session given an address)."""
        return self._source.current

    async def _remote_step(self, feed_dict: Mapping[Any, Any]) -> Any:
        client = await self._source.get()
        return await run_task(
            client, self.fn, dict(feed_dict), repr(self), own_client=self._source.owned, kept=self._kept
        )

    async def aclose(self) -> None:
        """Close the session: every later ``run`` raises ``SessionClosedError``, the
        latest step's future is released before this returns (a step still running is
        released when it ends), and the client this session connected is closed (never
        one that was passed in)."""
        await super().aclose()
        try:
            await close_kept(self._source.current, self._kept)
        finally:  # cancelled meanwhile: the client is closed all the same
            await self._source.aclose()
