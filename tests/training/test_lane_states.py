"""A checkpoint of a session with N lanes keeps every lane's session state, and a resumed
session restores each lane's own; with another number of lanes the rule is stated in a
warning, never a silent copy of one lane's state."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from hookrun import Checkpointer, MonitoredTrainingSession

pytestmark = pytest.mark.anyio


class Worker:
    """A raw session that remembers the items it processed (its session state)."""

    made: ClassVar[list[Worker]] = []

    def __init__(self) -> None:
        self.items: list[int] = []
        Worker.made.append(self)

    async def run(self, fetches: Any, feed_dict: Mapping[str, Any], options: Any, run_metadata: Any) -> list[Any]:
        await anyio.sleep(0.001 * (feed_dict["i"] % 3))
        self.items.append(feed_dict["i"])
        return [feed_dict["i"] for _ in fetches]

    def state_dict(self) -> dict[str, list[int]]:
        return {"items": list(self.items)}

    async def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.items = list(state["items"])


async def _run(tmp_path: Path, lanes: int, items: range) -> list[Worker]:
    Worker.made = []
    with anyio.fail_after(20):
        async with MonitoredTrainingSession(
            Worker, checkpoint_dir=tmp_path, save_checkpoint_steps=1, max_in_flight=lanes, log_step_count_steps=None,
        ) as sess:
            assert [y async for y in sess.iterate("y", ({"i": i} for i in items))] == list(items)
    return list(Worker.made)


async def test_every_lanes_state_is_kept_and_each_lane_restores_its_own(tmp_path: Path) -> None:
    """Four lanes that processed different items come back each holding its own items."""
    first = await _run(tmp_path, 4, range(40))
    saved = [list(worker.items) for worker in first]
    latest = await Checkpointer(tmp_path).latest()
    assert latest is not None and latest.step == 40
    resumed = await _run(tmp_path, 4, range(0))
    assert [worker.items for worker in resumed] == saved
    assert len({tuple(items) for items in saved}) == 4  # the lanes did hold different items


async def test_more_lanes_than_were_saved_start_without_a_state_and_say_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Resumed with six lanes from four: lanes 0-3 restore their own, 4 and 5 start empty
    with a warning naming them."""
    first = await _run(tmp_path, 4, range(20))
    saved = [list(worker.items) for worker in first]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        resumed = await _run(tmp_path, 6, range(0))
    assert [worker.items for worker in resumed] == [*saved, [], []]
    messages = [r.getMessage() for r in caplog.records]
    assert any("no session state for lane 4" in m for m in messages)
    assert any("no session state for lane 5" in m for m in messages)


async def test_fewer_lanes_than_were_saved_say_which_states_are_not_restored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Resumed with two lanes from four: lanes 0 and 1 restore their own, and a warning
    says the states of lanes 2 to 3 are not restored."""
    first = await _run(tmp_path, 4, range(20))
    saved = [list(worker.items) for worker in first]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        resumed = await _run(tmp_path, 2, range(0))
    assert [worker.items for worker in resumed] == saved[:2]
    assert any("states of lanes 2 to 3 are not restored" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("resumed_with", [1, 2])
async def test_a_resume_with_fewer_lanes_warns_once_even_with_one_lane(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, resumed_with: int
) -> None:
    """Resumed with one lane (or two) from three: lane 0 restores its own, a warning says
    which lanes' states are not restored, once."""
    first = await _run(tmp_path, 3, range(12))
    saved = [list(worker.items) for worker in first]
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        resumed = await _run(tmp_path, resumed_with, range(3))
    assert [worker.items[: len(saved[lane])] for lane, worker in enumerate(resumed)] == saved[:resumed_with]
    warned = [r.getMessage() for r in caplog.records if "are not restored" in r.getMessage()]
    assert len(warned) == 1 and f"states of lanes {resumed_with} to 2 are not restored" in warned[0]
    assert ("1 lane:" in warned[0]) == (resumed_with == 1)


async def test_a_one_lane_checkpoint_gives_every_lane_its_state_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint saved with one lane, resumed with three: each lane starts from its
    session state, and a warning says so."""
    first = await _run(tmp_path, 1, range(5))
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        resumed = await _run(tmp_path, 3, range(0))
    assert [worker.items for worker in resumed] == [first[0].items] * 3
    assert any("saved with one lane" in r.getMessage() for r in caplog.records)


async def test_a_fresh_run_with_lanes_warns_nothing_about_lane_states(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A first run: every lane starts fresh, as the first one does, without a warning (the
    checkpoint the entry saves with the first lane is not read back by the others)."""
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        first = await _run(tmp_path, 3, range(9))
    # Only the warnings about the run's state (a slow hook on a loaded machine is not one).
    assert [r.getMessage() for r in caplog.records if "slow hook" not in r.getMessage()] == []
    assert sorted(i for worker in first for i in worker.items) == list(range(9))


async def test_a_checkpoint_saved_while_a_lane_is_recreated_keeps_that_lanes_state(tmp_path: Path) -> None:
    """A lane fails and is re-created while another step saves a checkpoint: that
    checkpoint keeps the lost lane's state as last saved (what its new session restores),
    never nothing; the new session restores it, from the newest checkpoint."""
    from hookrun import AbortedError

    lost = anyio.Event()
    back = anyio.Event()

    class Flaky(Worker):
        async def run(self, fetches: Any, feed_dict: Mapping[str, Any], options: Any, run_metadata: Any) -> list[Any]:
            if feed_dict["i"] == 4:
                await lost.wait()  # step 5 ends (and saves) once the other lane is lost
            if feed_dict["i"] == 5 and not lost.is_set():
                lost.set()
                raise AbortedError("lane lost")
            return await super().run(fetches, feed_dict, options, run_metadata)

    async def create() -> Flaky:
        if lost.is_set():  # the re-creation: held until step 5's checkpoint is taken
            await back.wait()
        return Flaky()

    class Release:
        """After the checkpoint hooks: step 5's state is collected when this runs."""

        overlapping_steps = True

        async def after_run(self, run_context: Any, run_values: Any) -> None:
            if run_values.global_step == 5:
                back.set()

    Worker.made = []
    with anyio.fail_after(20):
        async with MonitoredTrainingSession(
            create, hooks=[Release()], checkpointer=Checkpointer(tmp_path, max_to_keep=None),
            save_checkpoint_steps=1, max_in_flight=3, log_step_count_steps=None,
        ) as sess:
            assert [y async for y in sess.iterate("y", ({"i": i} for i in range(12)))] == list(range(12))
    checkpointer = Checkpointer(tmp_path, max_to_keep=None)
    states: dict[int, Any] = {}
    for info in checkpointer.all():
        checkpoint = await checkpointer.restore(info.path)
        assert checkpoint is not None
        states[info.step] = checkpoint.state
    assert 5 in states
    assert all(None not in states[step]["lanes"] for step in states if step >= 3)
    made = Worker.made
    assert len(made) == 4
    new = made[3]  # restored the lost lane's items, then ran step 5 again and went on
    assert 5 in new.items and not any(5 in worker.items for worker in made[:3])
    restored = new.items[: new.items.index(5)]
    assert restored and any(worker.items == restored for worker in made[:3])
