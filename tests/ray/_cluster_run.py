"""A two-node Ray cluster started with ``ray start``, a job on it, and one node killed mid-run.

Run by ``test_cluster.py`` as ``python -m tests.ray._cluster_run`` inside a network and
PID namespace of its own (``tests.remote._netns``); prints one JSON line. The head
(127.0.0.1) and a second node (127.0.0.2) are started through the command line and
stopped by their PIDs. For each backend (asyncio, trio) the second node is started,
a monitored session with ``LANES`` actor lanes, made on the two nodes in turn (a
soft node affinity, honoured because the actors ask for some CPU), and a shared
``RayStepCounter`` living on the second node runs ``ITEMS`` items of ``WORK_S``
each, and the second node (raylet, workers and all) is SIGKILLed after ``KILL_AT``
items.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

PORT = 6390
LANES = 4
ITEMS = 60
KILL_AT = 20
WORK_S = 0.02

#: The health checks of Ray's control store, quickened so that a dead node is declared
#: dead within seconds (Ray's defaults take tens of seconds).
FAST_DEATH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


class Worker:
    """A session actor: each step waits ``WORK_S`` and answers the item and its node."""

    def __init__(self) -> None:
        import ray

        self.node = ray.get_runtime_context().get_node_id()

    async def run(self, fetches: list[str], feed_dict: dict[str, Any]) -> list[Any]:
        import asyncio

        await asyncio.sleep(WORK_S)
        return [feed_dict["x"] if key == "x" else self.node for key in fetches]


def ray_env(root: str) -> dict[str, str]:
    """The environment of the cluster's processes: a real multi-node Ray (not the
    single-machine mode a loopback-only local Ray uses), no auth token, code importable."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    env.update(FAST_DEATH, RAY_AUTH_MODE="disabled", PYTHONPATH=root, RAY_USAGE_STATS_ENABLED="0")
    return env


def node_argv(temp_dir: str, *, head: bool) -> list[str]:
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    common = ["--block", "--num-cpus=1", "--object-store-memory=80000000", "--disable-usage-stats"]
    if head:
        return [ray_cli, "start", "--head", f"--port={PORT}", "--node-ip-address=127.0.0.1",
                "--include-dashboard=false", f"--temp-dir={temp_dir}", *common]
    return [ray_cli, "start", f"--address=127.0.0.1:{PORT}", "--node-ip-address=127.0.0.2", *common]


def on_node(node: str) -> dict[str, Any]:
    """A soft affinity to ``node``. The actor asks for a sliver of a CPU: Ray places an
    actor that asks for no resource at all on any node, its soft affinity notwithstanding."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"num_cpus": 0.01, "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=True)}


class InTurn:
    """A session creator taking each session from the next of ``creators`` in turn."""

    def __init__(self, *creators: Any) -> None:
        self.creators = creators
        self._turn = 0

    @property
    def created(self) -> int:
        return sum(creator.created for creator in self.creators)

    async def create_session(self) -> Any:
        self._turn += 1
        return await self.creators[self._turn % len(self.creators)].create_session()

    async def __aenter__(self) -> InTurn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for creator in self.creators:
            await creator.aclose()


async def job(backend: str, head: str, node_b: str, kill: Callable[[], object], directory: str) -> dict[str, Any]:
    """The session's run: what came back, the final step, the checkpoints' steps."""
    import anyio

    import hookrun
    from hookrun.hooks import CheckpointSaverHook
    from hookrun.ray import RayActorSessionCreator, RayStepCounter

    checkpointer = hookrun.Checkpointer(directory, max_to_keep=None)
    counter = RayStepCounter(f"step-{backend}", node=node_b)
    creator = InTurn(*(RayActorSessionCreator(Worker, actor_options=on_node(node)) for node in (head, node_b)))
    hooks = [CheckpointSaverHook(save_steps=10, checkpointer=checkpointer)]
    got: list[int] = []
    nodes: list[str] = []
    started = time.monotonic()
    killed_at = back_at = None
    counter_node = None
    with anyio.fail_after(240):
        async with creator, counter, hookrun.MonitoredSession(creator, hooks, step_counter=counter, max_in_flight=LANES) as sess:
            async for x, node in sess.iterate(["x", "node"], ({"x": i} for i in range(ITEMS))):
                got.append(x)
                nodes.append(node)
                if len(got) == KILL_AT:
                    counter_node = await _node_of(counter)
                    kill()
                    killed_at = time.monotonic()
                elif killed_at is not None and back_at is None:
                    back_at = time.monotonic()
        final = await counter.get()
        await counter.delete()
    return {
        "items": got,
        "final_step": final,
        "checkpoint_steps": [info.step for info in checkpointer.all()],
        "created": creator.created,
        "counter_node": counter_node,
        "nodes_before": sorted(set(nodes[:KILL_AT])),
        "nodes_after": sorted(set(nodes[KILL_AT + LANES * 2 :])),
        "seconds": round(time.monotonic() - started, 2),
        "kill_to_next_item_s": None if back_at is None or killed_at is None else round(back_at - killed_at, 2),
    }


async def _node_of(counter: Any) -> str:
    import ray

    from hookrun.ray._placement import node_of_actor
    from hookrun.remote import await_future

    handle = ray.get_actor(counter.name, namespace=counter.namespace)
    node: str = await await_future(handle.__ray_call__.remote(node_of_actor).future())
    return node


def main() -> None:
    from tests.remote._netns import ROOT, Processes, loopback_up, others_alive, wait_for_port

    loopback_up()
    temp_dir = tempfile.mkdtemp(prefix="hkr-rc-", dir="/tmp")  # short: Ray puts sockets there
    env = ray_env(str(ROOT))
    os.environ.clear()
    os.environ.update(env)  # before Ray is imported: the driver joins as a cluster node's driver
    import anyio
    import ray

    procs = Processes(temp_dir)
    result: dict[str, Any] = {"temp_dir": temp_dir}
    try:
        procs.start(node_argv(temp_dir, head=True), env, "head.log")
        wait_for_port("127.0.0.1", PORT, 120)
        ray.init(address=f"127.0.0.1:{PORT}", _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
        result["head"] = ray.get_runtime_context().get_node_id()
        for backend in ("asyncio", "trio"):
            node = procs.start(node_argv(temp_dir, head=False), env, f"node-{backend}.log")
            node_b = _wait_second_node(ray, within=120)
            directory = os.path.join(temp_dir, f"ckpt-{backend}")
            kill = functools.partial(procs.kill, node)
            run = anyio.run(job, backend, result["head"], node_b, kill, directory, backend=backend)
            result[backend] = {**run, "node_b": node_b}
        ray.shutdown()
    finally:
        procs.stop_all()
    deadline = time.monotonic() + 20
    while (left := others_alive()) and time.monotonic() < deadline:
        time.sleep(0.2)
    result["left"] = left
    print(json.dumps(result), flush=True)


def _wait_second_node(ray: Any, within: float) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [n for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == "127.0.0.2"]
        if alive:
            node = str(alive[0]["NodeID"])
            _ready(ray, node, deadline - time.monotonic())
            return node
        time.sleep(0.2)
    raise TimeoutError(f"the second node did not join within {within:.0f} s")


def _ready(ray: Any, node: str, within: float) -> None:
    """Wait until an actor can run on ``node`` (a node just listed may not take one yet,
    and a soft affinity to it would then go elsewhere)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(Worker).options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
    actor = probe.remote()
    ray.get(actor.__ray_ready__.remote(), timeout=max(1.0, within))
    ray.kill(actor)


if __name__ == "__main__":
    main()
