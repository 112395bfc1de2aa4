"""hookrun's pytest entry point: inert unless a project enables the test kit.

pytest loads every installed ``pytest11`` entry point, so this module does
nothing on its own: it declares the ini settings ``hookrun_testing`` and
``hookrun_backends`` (``_pytest_options.py``) and, only when ``hookrun_testing =
true``, loads the plugin of ``hookrun.testing``. Enabling it with ``-p hookrun.testing`` does not need
this module. It imports nothing from the kit unless the kit is enabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._pytest_options import add_ini_options

if TYPE_CHECKING:
    import pytest

__all__ = ["PLUGIN_NAMES", "pytest_addoption", "pytest_configure"]

#: The names the kit's plugin is registered under (by ``-p``, or by this module).
PLUGIN_NAMES = ("hookrun.testing", "hookrun.testing._plugin")


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
