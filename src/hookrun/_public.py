"""Public names: each re-exported class and function says the module users import it from.

hookrun defines its classes and functions in private modules (``hookrun._errors``) and
re-exports them from public packages (``hookrun``, ``hookrun.hooks``, ...). Their
``__module__`` is what tracebacks, ``repr``, ``help()`` and pickle show, so each public
package calls :func:`publish` on its exports once they are imported: ``__module__``
becomes the public package (``hookrun.SessionClosedError``). An object exported by two
packages keeps the first one that publishes it. Pickle finds a class or function by
``__module__`` and ``__qualname__``: only objects the package holds under their own
name are published, so pickling by reference still finds them.

``hookrun`` imports some of its names on first use (``LAZY``); the built-in hooks
import a few of those modules first (the checkpoint classes), so the table lives
here, where both packages read it, and ``publish_loaded`` publishes whatever of it
is loaded.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Mapping

__all__ = ["LAZY", "OF_HOOKS", "publish", "publish_loaded"]


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


#: The names ``hookrun`` re-exports but imports on first use, so that ``import hookrun``
#: stays light, each with the module that defines it (relative to ``hookrun``).
LAZY: Mapping[str, str] = {
    "CheckpointCorruptionWarning": "._checkpoint._index",
    "CheckpointInfo": "._checkpoint._index",
    "Checkpointable": "._checkpoint._checkpointable",
    "Checkpointer": "._checkpoint._checkpointer",
    "ChiefSessionCreator": "._training._creators",
    "Codec": "._checkpoint._codec",
    "CorruptCheckpointError": "._checkpoint._file",
    "MonitoredTrainingSession": "._training._monitored_training",
    "MsgpackCodec": "._checkpoint._codec",
    "PickleCodec": "._checkpoint._codec",
    "RestoredCheckpoint": "._checkpoint._checkpointer",
    "UnsafeCodecWarning": "._checkpoint._codec",
    "WorkerSessionCreator": "._training._creators",
    "latest_checkpoint": "._checkpoint._checkpointer",
    "NeverTriggerTimer": "._timer",
    "SecondOrStepTimer": "._timer",
    "Trigger": ".hooks",
    "at_step": ".hooks",
    "every": ".hooks",
    "on_after_create_session": ".hooks",
    "on_after_run": ".hooks",
    "on_before_run": ".hooks",
    "on_begin": ".hooks",
    "on_end": ".hooks",
    "when": ".hooks",
}

#: The lazy names whose public home is ``hookrun.hooks`` (it publishes them).
OF_HOOKS = frozenset(name for name, module in LAZY.items() if module in (".hooks", "._timer"))


def publish_loaded() -> None:
    """Publish under ``hookrun`` the lazy names whose modules are imported by now."""
    for name, module in LAZY.items():
        loaded = sys.modules.get(f"hookrun{module}")
        if loaded is not None and name not in OF_HOOKS:
            publish("hookrun", vars(loaded), [name])
