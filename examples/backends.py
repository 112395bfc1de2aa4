"""One program, every event loop: asyncio, asyncio with uvloop, and trio.

hookrun code never names its event loop; the program's entry point picks it
through ``anyio.run``. uvloop needs ``pip install 'hookrun[uvloop]'`` and
trio ``pip install 'hookrun[trio]'``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any

import anyio


# --8<-- [start:run]
def run_on_every_backend(main: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    results = {
        "asyncio": anyio.run(main),  # the default
        "trio": anyio.run(main, backend="trio"),
    }
    if importlib.util.find_spec("uvloop") is not None:
        results["uvloop"] = anyio.run(main, backend="asyncio", backend_options={"use_uvloop": True})
    return results
# --8<-- [end:run]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    # Also when run as `python examples/backends.py`, not only `python -m examples.backends`.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from examples import quickstart

    print(run_on_every_backend(quickstart.main))
