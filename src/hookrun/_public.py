"""Public names: each re-exported class and function says the module users import it from.

hookrun defines its classes and functions in private modules (``hookrun._errors``) and
re-exports them from public packages (``hookrun``, ``hookrun.hooks``, ...). Their
``__module__`` is what tracebacks, ``repr``, ``help()`` and pickle show, so each public
package calls :func:`publish` on its exports once they are imported: ``__module__``
becomes the public package (``hookrun.SessionClosedError``). An object exported by two
packages keeps the first one that publishes it. Pickle finds a class or function by
``__module__`` and ``__qualname__``: only objects the package holds under their own
name are published, so pickling by reference still finds them.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping

__all__ = ["publish"]


def _is_private(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "hookrun" and any(part.startswith("_") for part in parts[1:])


def publish(package: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Set ``__module__`` to ``package`` for the classes and functions ``names`` of ``namespace``
    that still name a private hookrun module."""
    for name in names:
        obj = namespace.get(name)
        if not (isinstance(obj, type) or inspect.isfunction(obj)):
            continue  # constants, type aliases, lazily imported names not loaded yet
        if getattr(obj, "__qualname__", None) == name and _is_private(obj.__module__):
            obj.__module__ = package
