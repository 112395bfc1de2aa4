"""The threads that write checkpoint files, at a lower CPU priority than the event loop's.

A ``Checkpointer`` writes files (after the state is snapshotted) through
:func:`run_lowered`, which runs the blocking work in a thread whose nice value
is raised by ``nice`` (Linux, where the nice value belongs to one thread). On a
machine whose CPUs are all busy the scheduler then gives a save the CPU time
the event loop leaves, instead of slowing its steps; on an idle CPU it changes
nothing. A thread cannot lower its nice value again, so these threads are kept
for the purpose (one per concurrent write, reused, daemons) rather than
borrowed from a pool. Elsewhere, and with ``nice=0``, the work runs in the
calling thread.

Invariants: a job runs exactly once, in a thread of the right priority that
belongs to this process (a forked child makes its own); its result or
exception is handed back to the caller, which blocks until then.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run_lowered"]

T = TypeVar("T")

#: Whether ``os.nice`` changes only the calling thread (Linux), not the whole process.
PER_THREAD_NICE = sys.platform.startswith("linux")

_Job = tuple[Callable[..., Any], tuple[Any, ...], list[tuple[bool, Any]], threading.Event]


class _Writer:
    """One daemon thread at a raised nice value, running the jobs put in its queue."""

    def __init__(self, nice: int) -> None:
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, args=(nice,), name="hookrun-checkpoint-writer", daemon=True)
        self.thread.start()

    def _serve(self, nice: int) -> None:
        with contextlib.suppress(OSError):
            os.nice(nice)
        while True:
            fn, args, outcome, done = self.jobs.get()
            try:
                outcome.append((True, fn(*args)))
            except BaseException as exc:  # handed to the caller, which re-raises it
                outcome.append((False, exc))
            finally:
                done.set()
            del fn, args, outcome, done  # hold nothing of the last job while waiting


_lock = threading.Lock()
_idle: dict[int, list[_Writer]] = {}


def run_lowered(nice: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a thread ``nice`` below the caller's priority; block until it returns."""
    if not nice or not PER_THREAD_NICE:
        return fn(*args)
    pid = os.getpid()
    with _lock:
        idle = _idle.setdefault(nice, [])
        while idle and idle[-1].pid != pid:  # made before a fork: those threads are gone
            idle.clear()
        writer = idle.pop() if idle else None
    if writer is None:
        writer = _Writer(nice)
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()
    writer.jobs.put((fn, args, outcome, done))
    done.wait()
    with _lock:
        _idle.setdefault(nice, []).append(writer)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
