"""Two-node clusters for ``benchmarks.cluster``, started through the engines' command lines.

``isolate`` re-runs the benchmark in a network and PID namespace of its own (root, or
user namespaces): loopback is its only interface, and every process it starts ends
with it. ``Started`` keeps the processes it started and stops them by their PIDs
(SIGTERM, then SIGKILL for what is left of each one's tree). Ray: a head on 127.0.0.1
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

__all__ = ["ISOLATED", "Started", "cli", "dask_worker", "isolate", "ray_node", "wait_for_port"]

ISOLATED = "HOOKRUN_BENCH_ISOLATED"
_UNSHARE = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]


def isolate(module: str, argv: list[str]) -> None:
    """Run ``python -m module argv`` in a namespace of its own and exit with its status,
    unless this process already is that run (then bring loopback up and return)."""
    if os.environ.get(ISOLATED) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        return
    env = {**os.environ, ISOLATED: "1"}
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # a real multi-node Ray
    done = subprocess.run([*_UNSHARE, sys.executable, "-m", module, *argv], env=env, check=False)
    raise SystemExit(done.returncode)


class Started:
    """The processes of one cluster, stopped by their PIDs."""

    def __init__(self, log_dir: str, env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.env = env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with open(os.path.join(self.log_dir, f"{name}.log"), "ab") as out:
            proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL ``name``'s process and everything under it at once (a lost node)."""
        tree = _tree(self.procs.pop(name).pid)
        for member in tree:
            try:
                member.kill()
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(tree, timeout=10)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            proc = self.procs.pop(name)
            tree = _tree(proc.pid)
            if proc.poll() is None:
                proc.terminate()
            _, alive = psutil.wait_procs(tree, timeout=20)
            for member in alive:
                try:
                    member.kill()
                except psutil.NoSuchProcess:
                    continue
            psutil.wait_procs(alive, timeout=10)


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    return [root, *root.children(recursive=True)]


def wait_for_port(host: str, port: int, within: float) -> None:
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


def ray_node(started: Started, name: str, *, head: bool, port: int, ip: str, cpus: int) -> None:
    common = ["--block", f"--num-cpus={cpus}", "--object-store-memory=100000000", "--disable-usage-stats"]
    if head:
        argv = [cli("ray"), "start", "--head", f"--port={port}", f"--node-ip-address={ip}",
                "--include-dashboard=false", f"--temp-dir={started.log_dir}/ray", *common]
    else:
        argv = [cli("ray"), "start", f"--address=127.0.0.1:{port}", f"--node-ip-address={ip}", *common]
    started.start(name, argv)


def dask_worker(started: Started, name: str, *, port: int, ip: str, threads: int) -> None:
    started.start(name, [cli("dask"), "worker", f"tcp://127.0.0.1:{port}", "--host", ip, "--name", name,
                         "--nthreads", str(threads), "--nworkers", "1", "--no-dashboard", "--memory-limit", "0"])
