"""Clusters started through the engines' command-line tools, inside a namespace of their own.

A test runs a scenario module with ``run_isolated``: ``unshare`` gives it a network
namespace whose only interface is loopback (so nothing it starts can listen beyond
this machine, and no engine can rewrite 127.0.0.1 into another address) and a PID
namespace whose first process is the scenario (so the kernel ends every process left
in it when the scenario ends). Inside, the scenario brings loopback up, starts the
engine's processes with ``Processes`` and stops them by the PIDs it started, never
with an engine's own "stop everything" command. ``Processes``, ``loopback_up`` and
``wait_for_port`` are the cluster benchmark's (``benchmarks._clusters``), shared.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
from benchmarks._clusters import UNSHARE, Processes, loopback_up, wait_for_port

__all__ = ["ROOT", "Processes", "loopback_up", "namespace_problem", "others_alive", "run_isolated", "wait_for_port"]

ROOT = Path(__file__).resolve().parent.parent.parent


def namespace_problem() -> str | None:
    """Why a network namespace cannot be made here (``None``: it can)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux-only"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "making a network namespace needs unshare (util-linux) and ip (iproute2)"
    try:
        done = subprocess.run([*UNSHARE, "ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc!r}"
    if done.returncode != 0:
        return f"cannot make a network and PID namespace here (needs root or user namespaces): {done.stderr.strip()}"
    return None


def run_isolated(module: str, args: list[str], *, timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python -m module args`` in a namespace of its own; return the JSON it prints last."""
    argv = [*UNSHARE, sys.executable, "-m", module, *args]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # our own process group: unshare, and through it the namespace
        out, err = proc.communicate()
        raise AssertionError(f"{module} did not finish within {timeout:.0f} s:\n{err[-6000:]}") from None
    assert proc.returncode == 0, f"{module} failed ({proc.returncode}):\n{err[-6000:]}"
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def others_alive() -> list[str]:
    """The other live processes of this PID namespace (its first process is the scenario)."""
    left = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.info["pid"] == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        left.append(f"{proc.info['pid']}: {' '.join(proc.info['cmdline'] or [])[:120]}")
    return left
