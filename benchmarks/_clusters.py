"""Two-node clusters for ``benchmarks.cluster``, started through the engines' command lines.

``isolate`` re-runs the benchmark in a network and PID namespace of its own (root, or
user namespaces): loopback is its only interface, and every process it starts ends
with it. ``Processes`` keeps the processes it started and stops them by their PIDs
(SIGTERM, then SIGKILL for what is left of each one's tree); the cluster tests start
theirs with it too. Ray: a head on 127.0.0.1
and a second node on 127.0.0.2; Dask: a scheduler on 127.0.0.1 and workers on
127.0.0.2 and 127.0.0.3.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import psutil

__all__ = [
    "ISOLATED", "ROOT", "UNSHARE", "Processes", "cli", "dask_worker", "isolate", "loopback_up", "ray_node", "wait_for_port",
]

ISOLATED = "HOOKRUN_BENCH_ISOLATED"
#: The repository's root: the processes started here run in it.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: A network and PID namespace of its own for the command that follows (ended with it).
UNSHARE = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


def isolate(module: str, argv: list[str]) -> None:
    """Run ``python -m module argv`` in a namespace of its own and exit with its status,
    unless this process already is that run (then bring loopback up and return)."""
    if os.environ.get(ISOLATED) == "1":
        loopback_up()
        return
    env = {**os.environ, ISOLATED: "1"}
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # a real multi-node Ray
    done = subprocess.run([*UNSHARE, sys.executable, "-m", module, *argv], env=env, check=False)
    raise SystemExit(done.returncode)


def loopback_up() -> None:
    """Bring up the namespace's loopback interface (127.0.0.0/8: every address on it works)."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


class Processes:
    """The processes a cluster run started, each stopped by its PID and its descendants' PIDs."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
        """Start ``argv`` in the repository's root, its output appended to ``log`` in the log folder."""
        with open(os.path.join(self.log_dir, log), "ab") as out:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        self.started.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> list[int]:
        """SIGKILL ``proc`` and every process under it at once (a node or worker lost); their PIDs."""
        tree = _tree(proc.pid)
        for member in tree:
            try:
                member.kill()
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(tree, timeout=10)
        proc.wait(timeout=10)
        return [member.pid for member in tree]

    def stop_all(self, grace: float = 20.0) -> None:
        """SIGTERM each started process (its tree after ``grace`` seconds: SIGKILL), newest first."""
        for proc in reversed(self.started):
            tree = _tree(proc.pid)
            if proc.poll() is None:
                proc.terminate()
            _, alive = psutil.wait_procs(tree, timeout=grace)
            for member in alive:
                try:
                    member.kill()
                except psutil.NoSuchProcess:
                    continue
            psutil.wait_procs(alive, timeout=10)
            if proc.poll() is None:
                proc.wait(timeout=10)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    return [root, *root.children(recursive=True)]


def wait_for_port(host: str, port: int, within: float) -> None:
    """Wait (bounded) until ``host:port`` accepts a connection."""
    deadline = time.monotonic() + within
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {within:.0f} s") from None
            time.sleep(0.1)


def cli(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


def ray_node(
    procs: Processes, env: dict[str, str], name: str, *, head: bool, port: int, ip: str, cpus: int
) -> subprocess.Popen[bytes]:
    common = ["--block", f"--num-cpus={cpus}", "--object-store-memory=100000000", "--disable-usage-stats"]
    if head:
        argv = [cli("ray"), "start", "--head", f"--port={port}", f"--node-ip-address={ip}",
                "--include-dashboard=false", f"--temp-dir={procs.log_dir}/ray", *common]
    else:
        argv = [cli("ray"), "start", f"--address=127.0.0.1:{port}", f"--node-ip-address={ip}", *common]
    return procs.start(argv, env, f"{name}.log")


def dask_worker(
    procs: Processes, env: dict[str, str], name: str, *, port: int, ip: str, threads: int
) -> subprocess.Popen[bytes]:
    argv = [cli("dask"), "worker", f"tcp://127.0.0.1:{port}", "--host", ip, "--name", name,
            "--nthreads", str(threads), "--nworkers", "1", "--no-dashboard", "--memory-limit", "0"]
    return procs.start(argv, env, f"{name}.log")
