"""A griffe extension for the API reference: Sphinx roles in docstrings become inline code.

The docstrings use ``:func:`name``` and friends; Markdown has no roles, so
``:class:`SessionRunArgs``` is rendered as ``SessionRunArgs`` in code font
(a leading ``~`` is dropped, as Sphinx would).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj):`~?([^`]+)`")


class RstRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring griffe loads."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
