"""A griffe extension for the API reference: signatures name only what a user can import.

hookrun's signatures are written against private helpers now and then (a protocol
for an internal argument, a sentinel default, the class of a context manager).
The reference shows the public meaning instead:

* a class whose ``__init__`` takes an argument of a private type is made by hookrun,
  never by the user (``StepContext``, ``StepIterator``): it shows no constructor;
* a return annotation of a private type is left out (the docstring says what it is);
* a default naming a private constant shows that constant's value (``{}``).

The test that renders the reference checks that no private name is left.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import griffe

_PRIVATE = re.compile(r"(?<![\w.])_[A-Za-z]\w*")


def _names_private(expression: object) -> bool:
    return expression is not None and _PRIVATE.search(str(expression)) is not None


def _objects(obj: griffe.Object) -> Iterator[griffe.Object]:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)  # type: ignore[arg-type]


def _value_of(expression: str, module: str) -> str:
    """The value of a default expression naming a private constant, evaluated in its module."""
    value = eval(expression, vars(importlib.import_module(module)))  # the project's own source
    if isinstance(value, Mapping):
        value = dict(value)
    return repr(value)


class PublicSignatures(griffe.Extension):
    """Rewrite what names a private helper in the signatures of the loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in list(_objects(pkg)):
            if isinstance(obj, griffe.Class):
                init = obj.members.get("__init__")
                if isinstance(init, griffe.Function) and any(
                    _names_private(parameter.annotation) for parameter in init.parameters
                ):
                    obj.del_member("__init__")
            elif isinstance(obj, griffe.Function):
                if _names_private(obj.returns):
                    obj.returns = None
                for parameter in obj.parameters:
                    if _names_private(parameter.default):
                        parameter.default = _value_of(str(parameter.default), obj.module.path)
