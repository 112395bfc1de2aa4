"""hookrun's pytest entry point: inert unless a project enables the test kit.

pytest loads every installed ``pytest11`` entry point, so this module does
nothing on its own: it declares the ini settings ``hookrun_testing`` and
``hookrun_backends`` and, only when ``hookrun_testing = true``, loads the plugin
of ``hookrun.testing``. Enabling it with ``-p hookrun.testing`` does not need
this module. It imports nothing from the kit unless the kit is enabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

__all__ = ["PLUGIN_NAMES", "add_ini_options", "pytest_addoption", "pytest_configure"]

#: The names the kit's plugin is registered under (by ``-p``, or by this module).
PLUGIN_NAMES = ("hookrun.testing", "hookrun.testing._plugin")
BACKEND_NAMES = ("asyncio", "trio", "asyncio+uvloop")


def add_ini_options(parser: pytest.Parser) -> None:
    """Declare the kit's ini settings (declaring them again is harmless)."""
    parser.addini(
        "hookrun_testing",
        type="bool",
        default=False,
        help="enable hookrun's test kit (anyio_backend over asyncio and trio, "
        "mock_clock and drive fixtures); same as -p hookrun.testing",
    )
    parser.addini(
        "hookrun_backends",
        type="args",
        default=["asyncio", "trio"],
        help=f"backends the hookrun test kit runs async tests on: {', '.join(BACKEND_NAMES)}",
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    add_ini_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    manager = config.pluginmanager
    if not config.getini("hookrun_testing") or any(map(manager.has_plugin, PLUGIN_NAMES)):
        return
    from .testing import _plugin

    # Registered directly (not imported through pytest) so that a conftest that
    # already imported hookrun.testing causes no assertion-rewrite warning.
    manager.register(_plugin, "hookrun.testing._plugin")
