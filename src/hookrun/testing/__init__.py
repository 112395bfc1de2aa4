"""A kit for testing hooks: drive a hook through a scripted life, on asyncio and trio,
with a clock you control.

* :func:`drive` runs hooks in a real monitored session over a script of steps,
  with faults placed where you say, and returns a :class:`Record` of every hook
  call and session run.
* :class:`MockClock` is a clock you move with ``jump(seconds)``; pass it as the
  ``clock=`` of timers, built-in hooks, ``Coordinator.loop`` and ``drive``.
* Fault injection, in one vocabulary: ``drive(errors=..., creation_errors=...,
  cancel_after=...)`` and :class:`FaultyHook`.
* :class:`RecordingHook`, :class:`ScriptedSession` and :class:`ScriptedCreator`
  for tests that write their own session loop.
* A pytest plugin, off unless enabled with ``-p hookrun.testing``, the ini
  setting ``hookrun_testing = true`` (``[tool.pytest.ini_options]`` in
  ``pyproject.toml``) or ``pytest_plugins = ["hookrun.testing"]`` in a root
  ``conftest.py``: an ``anyio_backend`` parametrisation over asyncio and trio,
  and the ``mock_clock`` and ``drive`` fixtures. Without it, a test asking for
  them fails with pytest's "fixture 'drive' not found" (followed by a line
  from hookrun on how to enable the kit).
"""

from __future__ import annotations

from .._public import publish
from ._clock import MockClock
from ._faults import HANG, STOP, Fault, FaultyHook, cancel_after
from ._harness import Drive, StepScript, drive
from ._record import HookCall, Record, SessionRun
from ._scripted import Call, RecordingHook, ScriptedCreator, ScriptedSession

#: Enabling this package as a pytest plugin (``-p hookrun.testing``) loads the plugin itself.
pytest_plugins = ("hookrun.testing._plugin",)

__all__ = [
    "HANG",
    "STOP",
    "Call",
    "Drive",
    "Fault",
    "FaultyHook",
    "HookCall",
    "MockClock",
    "Record",
    "RecordingHook",
    "ScriptedCreator",
    "ScriptedSession",
    "SessionRun",
    "StepScript",
    "cancel_after",
    "drive",
]

publish(__name__, globals(), __all__)
