"""Where a Dask adapter gets its synchronous ``Client``: the user's, or one it makes.

A synchronous client runs its own IO-loop thread, which is what lets hookrun drive it
from asyncio and trio alike. Invariants: a client the user passed (or the default
client) is never closed here; a client made here from an address is rebuilt when it
has closed and closed by ``aclose``; blocking client calls run in a worker thread.
"""

from __future__ import annotations

import functools

import anyio
from distributed import Client, default_client

from .._log import logger

__all__ = ["ClientSource"]


class ClientSource:
    """The client of one session, creator or counter (see the module docstring)."""

    def __init__(self, owner: str, client: Client | None, address: str | None) -> None:
        if client is not None and address is not None:
            raise ValueError(f"{owner}: pass client= or address=, not both")
        if client is not None:
            if not isinstance(client, Client):
                raise TypeError(f"{owner}: client must be a distributed.Client, got {type(client).__name__}")
            if client.asynchronous:
                raise TypeError(
                    f"{owner}: client must be a synchronous distributed.Client (asynchronous=False): "
                    "hookrun drives it from any event loop through its own IO thread"
                )
        if address is not None and (not isinstance(address, str) or not address):
            raise ValueError(f"{owner}: address must be a scheduler address string, got {address!r}")
        self._owner = owner
        self._address = address
        self._client = client
        self.owned = address is not None

    def __repr__(self) -> str:
        return f"ClientSource({self._owner}, address={self._address!r})"

    @property
    def current(self) -> Client | None:
        """The client got last (``None`` before the first ``get`` or after ``aclose``)."""
        return self._client

    async def get(self) -> Client:
        """The client to submit to (made, or made again after it closed, if it is ours)."""
        if not self.owned:
            if self._client is None:
                self._client = _default_client(self._owner)
            return self._client
        client = self._client
        if client is None or client.status in ("closing", "closed"):
            if client is not None:
                logger().warning("%s: its Dask client closed; connecting a new one", self._owner)
                await self._close(client)
            connect = functools.partial(Client, self._address, set_as_default=False)
            self._client = client = await anyio.to_thread.run_sync(connect)
        return client

    async def aclose(self) -> None:
        """Close the client if it was made here (closing twice does nothing)."""
        client, self._client = self._client, None
        if self.owned and client is not None:
            await self._close(client)

    @staticmethod
    async def _close(client: Client) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(client.close)
            except Exception as exc:
                logger().warning("closing a Dask client failed: %r", exc)


def _default_client(owner: str) -> Client:
    try:
        client: Client = default_client()
    except ValueError:
        raise ValueError(
            f"{owner}: no Dask client: pass client= (a distributed.Client) or address= "
            "(a scheduler address), or create a default client first"
        ) from None
    if client.asynchronous:
        raise TypeError(f"{owner}: the default Dask client is asynchronous; pass a synchronous client=")
    return client
