"""Imported first by ``hookrun.ray``: without Ray installed, a
``ModuleNotFoundError`` that says which extra installs it (``hookrun[ray]``). An error
raised inside an installed engine is left as it is."""

from __future__ import annotations

try:
    import ray as _engine
except ModuleNotFoundError as exc:
    if exc.name != "ray":
        raise
    raise ModuleNotFoundError(
        "hookrun.ray needs Ray, which is not installed; install it with: pip install 'hookrun[ray]'",
        name=exc.name,
    ) from exc
del _engine
