"""A griffe extension for the API reference: Sphinx conventions in the source become Markdown.

The docstrings use ``:func:`name``` and friends; Markdown has no roles, so
``:class:`SessionRunArgs``` is rendered as ``SessionRunArgs`` in code font
(a leading ``~`` is dropped, as Sphinx would). Module constants and type aliases
are documented with ``#:`` comments above them (Sphinx's attribute comments);
they become the attribute's docstring, so the reference shows them.
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

    def on_attribute_instance(self, *, node: Any, attr: griffe.Attribute, agent: Any, **kwargs: Any) -> None:
        """An attribute without a docstring takes the ``#:`` comment lines right above it."""
        if attr.docstring is not None or attr.lineno is None:
            return
        path = attr.filepath
        if isinstance(path, list) or path not in attr.lines_collection:
            return
        lines = attr.lines_collection[path]
        comment: list[str] = []
        index = attr.lineno - 2  # the line above the attribute (lineno is 1-based)
        while index >= 0 and lines[index].lstrip().startswith("#:"):
            comment.insert(0, lines[index].lstrip()[2:].strip())
            index -= 1
        if comment:
            text = _ROLE.sub(r"`\1`", " ".join(comment))
            attr.docstring = griffe.Docstring(text, lineno=index + 2, parent=attr)
