"""``hookrun.remote.await_future``: a ``concurrent.futures``-style future awaited on any
event loop, without a thread parked on it.

``main()`` submits a blocking function to a thread pool and awaits its future: it
returns ``144``. Ray's ``ref.future()`` and a synchronous Dask client's futures are
awaited the same way.
"""

# --8<-- [start:program]
from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import anyio

from hookrun.remote import await_future


def slow_square(x: int) -> int:
    time.sleep(0.01)  # blocking work, in a thread of the pool
    return x * x


async def main() -> int:
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(slow_square, 12)
        value: int = await await_future(future)  # cancelled: future.cancel(), caller freed
    return value


if __name__ == "__main__":
    print(anyio.run(main, backend=sys.argv[1] if len(sys.argv) > 1 else "asyncio"))
# --8<-- [end:program]
