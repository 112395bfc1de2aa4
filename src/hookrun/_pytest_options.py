"""The ini settings of hookrun's test kit: ``hookrun_testing`` and ``hookrun_backends``.

Declared by whichever of the two pytest loads first, and harmlessly by the other:
the always-installed entry point (``_pytest_entry.py``) and the kit's own plugin
(``hookrun.testing._plugin``, enabled by ``-p hookrun.testing`` even when entry
points are not loaded). Both import this module, and it imports nothing, so the
entry point stays inert and the two never import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

__all__ = ["BACKEND_NAMES", "add_ini_options"]

#: The backends ``hookrun_backends`` may list (the kit's fixtures map each to anyio's).
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
