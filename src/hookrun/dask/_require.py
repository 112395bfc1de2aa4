"""Imported first by ``hookrun.dask``: without Dask (dask and distributed) installed, a
``ModuleNotFoundError`` that says which extra installs it (``hookrun[dask]``). An error
raised inside an installed engine is left as it is."""

from __future__ import annotations

try:
    import dask as _dask
    import distributed as _distributed
except ModuleNotFoundError as exc:
    if exc.name not in ("dask", "distributed"):
        raise
    raise ModuleNotFoundError(
        f"hookrun.dask needs Dask ({exc.name!r} is not installed); install it with: "
        "pip install 'hookrun[dask]'",
        name=exc.name,
    ) from exc
del _dask, _distributed
