"""hookrun's pytest entry point: inert unless a project enables the test kit.

pytest loads every installed ``pytest11`` entry point, so this module does
nothing on its own: it declares the ini settings ``hookrun_testing`` and
``hookrun_backends`` (``_pytest_options.py``) and, only when ``hookrun_testing =
true``, loads the plugin of ``hookrun.testing``. Enabling it with ``-p hookrun.testing`` does not need
this module. It imports nothing from the kit unless the kit is enabled.

The one thing it does while the kit is off: a test that asks for one of the
kit's fixtures fails its setup with pytest's "fixture 'drive' not found", and
this module adds to that report how to enable the kit. No other report, test or
fixture changes.
"""

from __future__ import annotations

from typing import Any

import pytest

from ._pytest_options import add_ini_options

__all__ = ["KIT_FIXTURES", "PLUGIN_NAMES", "pytest_addoption", "pytest_configure", "pytest_runtest_logreport"]

#: The names the kit's plugin is registered under (by ``-p``, or by this module).
PLUGIN_NAMES = ("hookrun.testing", "hookrun.testing._plugin")

#: The fixtures the kit's plugin defines.
KIT_FIXTURES = ("drive", "mock_clock")

ENABLE_HINT = (
    "hookrun: {name!r} is a fixture of hookrun's test kit, which is off unless enabled: run "
    "pytest with -p hookrun.testing, or set hookrun_testing = true in your pytest configuration "
    "([pytest] in pytest.ini, [tool.pytest.ini_options] in pyproject.toml), or put "
    'pytest_plugins = ["hookrun.testing"] in your root conftest.py'
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


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker sends the report on
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add how to enable the kit to the report of a setup that missed one of its fixtures."""
    name = getattr(report.longrepr, "argname", None)  # pytest's FixtureLookupError report
    if report.when == "setup" and report.failed and name in KIT_FIXTURES:
        report.longrepr = _WithHint(report.longrepr, ENABLE_HINT.format(name=name))  # type: ignore[assignment]


class _WithHint:
    """A failure's report followed by a hint: pytest prints it, and the short summary stays as it was."""

    def __init__(self, report: Any, hint: str) -> None:
        self.report = report
        self.hint = hint

    def toterminal(self, tw: Any) -> None:
        self.report.toterminal(tw)
        tw.line("")
        tw.line(self.hint, bold=True)

    def __str__(self) -> str:
        return f"{self.report}\n\n{self.hint}"
