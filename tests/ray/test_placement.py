"""NodeWatch, which keeps a creator's lanes off a lost node Ray still lists as alive
(Ray's node list and the raylet probe replaced here: no cluster needed)."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import anyio
import pytest

from hookrun.ray import _placement
from hookrun.ray._placement import NodeWatch
from hookrun.remote._future import wait_future
from hookrun.remote._waiting import WaitEnded

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
    """The calls on b are ended (their futures cancelled) when b is found gone; a call on a is not."""
    watch = NodeWatch()
    ended: list[str] = []
    futures = [concurrent.futures.Future[None]() for _ in range(3)]

    async def call(i: int, node: str) -> None:
        with pytest.raises(WaitEnded):
            await wait_future(futures[i], None, watch.calls(node))
        ended.append(node)

    cluster["b"] = False
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for i, node in enumerate(("b", "b", "a")):
                tg.start_soon(call, i, node)
            await anyio.wait_all_tasks_blocked()
            await watch.lost("b")
            await anyio.wait_all_tasks_blocked()
            assert ended == ["b", "b"]
            assert [f.cancelled() for f in futures] == [True, True, False]
            assert [len(watch.calls(node)) for node in ("a", "b")] == [1, 0]
            tg.cancel_scope.cancel()
