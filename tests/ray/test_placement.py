"""NodeWatch, which keeps a creator's lanes off a lost node Ray still lists as alive
(Ray's node list and the raylet probe replaced here: no cluster needed)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hookrun.ray import _placement
from hookrun.ray._placement import NodeWatch

pytestmark = pytest.mark.anyio


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Three nodes listed alive by Ray; the test says whose raylet answers."""
    answers = {"a": True, "b": True, "c": True}
    nodes = [{"NodeID": n, "Alive": True, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": i} for i, n in enumerate(answers)]

    def listed() -> list[dict[str, Any]]:
        return [n for n in nodes if n["NodeID"] in answers]

    monkeypatch.setattr("ray.nodes", listed)
    monkeypatch.setattr(_placement, "_answers", lambda address: answers[nodes[address[1]]["NodeID"]])
    return answers


async def test_no_loss_leaves_placement_to_ray(cluster: dict[str, bool]) -> None:
    """With no actor lost, place() pins nothing."""
    assert await NodeWatch().place() is None


async def test_a_lost_node_that_does_not_answer_gets_no_new_actor(cluster: dict[str, bool]) -> None:
    """An actor lost on b, whose raylet refuses: new actors go to a and c in turn."""
    watch = NodeWatch()
    cluster["b"] = False
    await watch.lost("b")
    assert {await watch.place() for _ in range(4)} == {"a", "c"}


async def test_a_node_that_answers_is_forgotten(cluster: dict[str, bool]) -> None:
    """Only the actor's process was lost (its node answers): Ray places the next actor."""
    watch = NodeWatch()
    await watch.lost("b")
    assert await watch.place() is None


async def test_a_node_ray_lists_dead_is_left_to_ray(cluster: dict[str, bool]) -> None:
    """Once Ray no longer lists the node as alive, it avoids it itself: nothing is pinned."""
    watch = NodeWatch()
    cluster["b"] = False
    await watch.lost("b")
    del cluster["b"]
    assert await watch.place() is None


async def test_the_calls_waiting_on_a_lost_node_end_and_the_others_go_on(cluster: dict[str, bool]) -> None:
    """The calls on b are cancelled when b is found gone; a call on a is not."""
    watch = NodeWatch()
    ended: list[str] = []

    async def call(node: str) -> None:
        with anyio.CancelScope() as scope:
            watch.waiting(node, scope)
            await anyio.sleep_forever()
        watch.done(node, scope)
        ended.append(node)

    cluster["b"] = False
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for node in ("b", "b", "a"):
                tg.start_soon(call, node)
            await anyio.wait_all_tasks_blocked()
            await watch.lost("b")
            await anyio.wait_all_tasks_blocked()
            assert ended == ["b", "b"]
            tg.cancel_scope.cancel()
