"""examples/ray_workers.py: a chief and two worker processes share one global step; the chief checkpoints."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from examples import ray_steps, ray_workers

import hookrun

from .conftest import RayCluster

pytestmark = pytest.mark.anyio

LAST_STEP = 20


async def test_chief_and_workers_share_the_step_survive_a_lost_actor_and_the_chief_resumes(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """Every process stops at the last step; worker 1 re-creates its session once; no step is
    lost; the chief's checkpoints end at the stop step, and a restarted chief resumes from them."""
    checkpoints = tmp_path / "checkpoints"
    with anyio.fail_after(150):
        reports = await ray_workers.main(LAST_STEP, ray_cluster.address, str(checkpoints))
    by_role = {report["role"]: report for report in reports}
    assert sorted(by_role) == ["chief", "worker-1", "worker-2"]
    assert [by_role[role]["sessions"] for role in sorted(by_role)] == [1, 2, 1]
    final = max(report["last_step"] for report in reports)
    # Each process stops at the first shared step >= LAST_STEP it reaches; the others'
    # steps in flight then make the step go at most one further per other process.
    assert all(LAST_STEP <= report["last_step"] <= LAST_STEP + 2 for report in reports)
    # Each successful run advanced the shared step exactly once:
    assert sum(report["steps"] for report in reports) == final
    assert by_role["worker-1"]["first_step"] > 5 and by_role["worker-2"]["first_step"] > 10

    # The chief's checkpoints: increasing steps, the latest at the stop step (the shared
    # step when the chief ended), holding the chief's model as it ended.
    saved = hookrun.Checkpointer(checkpoints).all()
    steps = [info.step for info in saved]
    assert steps == sorted(set(steps)) and len(steps) >= 3, steps
    latest = hookrun.latest_checkpoint(checkpoints)
    assert latest == saved[-1].path
    chief = by_role["chief"]
    assert chief["last_step"] <= steps[-1] <= final
    restored = await hookrun.Checkpointer(checkpoints).restore()
    assert restored is not None and restored.step == steps[-1]
    assert restored.state["global_step"] == steps[-1]
    assert restored.state["session"]["updates"] == chief["updates"] == chief["steps"]

    # The chief alone, started again on the same directory: it resumes from the latest
    # checkpoint (the shared step and its model's state) and goes on to the new stop step.
    with anyio.fail_after(60):
        [again] = await ray_workers.main(LAST_STEP + 5, ray_cluster.address, str(checkpoints), workers=0)
    assert again["role"] == "chief" and again["sessions"] == 1
    assert again["first_step"] == restored.step + 1
    assert again["last_step"] == LAST_STEP + 5
    assert again["steps"] == LAST_STEP + 5 - restored.step
    assert again["updates"] == chief["updates"] + again["steps"]
    assert hookrun.Checkpointer(checkpoints).all()[-1].step == LAST_STEP + 5


async def test_with_steps_in_flight_each_lane_has_its_actor_and_only_the_lost_one_is_recreated(
    ray_cluster: RayCluster, tmp_path: Path
) -> None:
    """``--in-flight 2``: every process runs two actors (one per lane); worker 1's lost actor
    is re-created on its lane alone; each successful step still advances the shared step
    exactly once, and the chief's checkpoints are of steps it reached in order."""
    in_flight = 2
    checkpoints = tmp_path / "checkpoints"
    with anyio.fail_after(180):
        reports = await ray_workers.main(LAST_STEP, ray_cluster.address, str(checkpoints), in_flight=in_flight)
    by_role = {report["role"]: report for report in reports}
    assert [by_role[role]["sessions"] for role in sorted(by_role)] == [in_flight, in_flight + 1, in_flight]
    final = max(report["last_step"] for report in reports)
    assert sum(report["steps"] for report in reports) == final
    # After the shared step reached LAST_STEP, each process's steps in flight may still land.
    assert all(LAST_STEP <= report["last_step"] <= LAST_STEP + 3 * in_flight for report in reports)
    saved = hookrun.Checkpointer(checkpoints).all()
    steps = [info.step for info in saved]
    assert steps == sorted(set(steps)) and len(steps) >= 3, steps
    restored = await hookrun.Checkpointer(checkpoints).restore()
    assert restored is not None and restored.state["global_step"] == steps[-1] <= final
    # The state of the actor (one of the chief's two) that ran the checkpointed step:
    assert 1 <= restored.state["session"]["updates"] <= by_role["chief"]["steps"]


async def test_the_smallest_ray_program_runs_tasks_actors_and_a_future(ray_cluster: RayCluster, tmp_path: Path) -> None:
    """examples/ray_steps.py, shown whole on the distributed page: a task per step, an actor
    per session restored from its checkpoint, an object reference awaited."""
    with anyio.fail_after(120):
        assert await ray_steps.tasks(3) == [1.0, 0.5, pytest.approx(1 / 3)]
        assert await ray_steps.actors(str(tmp_path), 5) == 5.0
        assert await ray_steps.actors(str(tmp_path), 8) == 8.0  # a new actor, restored at 5
        assert await ray_steps.one_future() == 1024
