"""The pytest plugin of ``hookrun.testing``, loaded only when a project enables it.

Enabled by ``-p hookrun.testing`` (or ``pytest_plugins = ["hookrun.testing"]``
in a root conftest), or by the ini setting ``hookrun_testing = true`` (read by
hookrun's always-installed, otherwise inert ``pytest11`` entry point).
Builds on anyio's own pytest plugin, which it registers if autoloading was
disabled. The fixtures are registered at configure time, after every
entry-point plugin, so its ``anyio_backend`` takes precedence over anyio's
default while a conftest's own ``anyio_backend`` still overrides it.
"""

from __future__ import annotations

import importlib.util

import pytest

from .._pytest_options import add_ini_options
from ._fixtures import BACKENDS, make_fixtures

__all__ = ["pytest_addoption", "pytest_configure"]

FIXTURES_NAME = "hookrun.testing.fixtures"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_ini_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    manager = config.pluginmanager
    if manager.has_plugin(FIXTURES_NAME):
        return
    _require_anyio_plugin(config)
    backends = list(config.getini("hookrun_backends"))
    manager.register(make_fixtures(_checked_backends(backends)), FIXTURES_NAME)


def _require_anyio_plugin(config: pytest.Config) -> None:
    manager = config.pluginmanager
    from anyio import pytest_plugin

    if manager.is_registered(pytest_plugin):
        return
    if manager.is_blocked("anyio"):
        raise pytest.UsageError(
            "hookrun.testing builds on anyio's pytest plugin, which is disabled here "
            "(-p no:anyio); enable it, or do not enable hookrun.testing"
        )
    manager.register(pytest_plugin, "anyio")


def _checked_backends(backends: list[str]) -> list[str]:
    if not backends:
        raise pytest.UsageError("hookrun_backends is empty: list at least one of " + ", ".join(BACKENDS))
    for name in backends:
        if name not in BACKENDS:
            raise pytest.UsageError(
                f"hookrun_backends: unknown backend {name!r}; choose from {', '.join(BACKENDS)}"
            )
        module = BACKENDS[name][1]
        if module is not None and importlib.util.find_spec(module) is None:
            raise pytest.UsageError(
                f"hookrun_backends lists {name!r}, but {module!r} is not installed: "
                f"install it, or remove {name!r} from hookrun_backends"
            )
    return backends
