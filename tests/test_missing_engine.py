"""``import hookrun.ray`` / ``import hookrun.dask`` without the engine installed: an
error naming the extra that installs it, as the built-in hooks' optional dependencies do.
Each runs in a fresh interpreter in which the engine cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _import_without(module: str, hidden: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"sys.modules[{hidden!r}] = None  # as if it were not installed\n"
        "try:\n"
        f"    import {module}\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize(
    ("module", "hidden", "extra"),
    [
        ("hookrun.ray", "ray", "ray"),
        ("hookrun.dask", "dask", "dask"),
        # Dask without distributed: needs dask itself installed (the engine suites' extra).
        pytest.param("hookrun.dask", "distributed", "dask", marks=pytest.mark.engine),
    ],
)
def test_importing_an_adapter_without_its_engine_names_the_extra(module: str, hidden: str, extra: str) -> None:
    """The error is still a ModuleNotFoundError for the engine, and says what to install."""
    done = _import_without(module, hidden)
    assert done.returncode == 0, done.stderr
    kind, name, message = done.stdout.strip().split("|")
    assert (kind, name) == ("ModuleNotFoundError", hidden)
    assert f"{module} needs" in message
    assert f"pip install 'hookrun[{extra}]'" in message


@pytest.mark.engine  # needs Ray installed
def test_an_error_inside_the_installed_engine_is_not_masked() -> None:
    """A module the engine itself misses is reported as it is, not as the engine missing."""
    done = _import_without("hookrun.ray", "ray._raylet")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("|")[1] == "ray._raylet" and "pip install" not in done.stdout
