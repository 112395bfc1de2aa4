"""``AsyncCloseable``: ``async with`` for an object that closes with ``aclose()``.

Invariant: leaving the block awaits ``aclose()`` on every exit path (an error or a
cancellation included) and never swallows the exception.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

__all__ = ["AsyncCloseable"]


class AsyncCloseable:
    """Mixin: ``async with obj:`` returns ``obj`` and awaits ``obj.aclose()`` on the way out."""

    async def aclose(self) -> None:
        """Release what this object holds (closing twice does nothing)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
