"""MetricsFileHook: a row per step in a CSV or JSON-lines file, appended safely across a
resume, written at its cadence and closed on every exit."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from hookrun import AbortedError, LocalStepCounter, MonitoredSession, StepSession
from hookrun.hooks import MetricsFileHook, StopAtStepHook
from hookrun.hooks._metrics_table import MetricsTable
from hookrun.testing import ScriptedCreator

from ._support import FakeClock, drive

pytestmark = pytest.mark.anyio

LIMIT = 20.0


class Boom(Exception):
    """The error the tests raise."""


def losses(i: int) -> dict[str, Any]:
    return {"loss": 1.0 / (i + 1), "acc": i * 10}


def rows(path: Path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines()]


def open_under(directory: Path) -> list[str]:
    """The files under ``directory`` this process holds open."""
    root = os.path.realpath(directory)
    return [f.path for f in psutil.Process().open_files() if os.path.realpath(f.path).startswith(root)]


# -- construction ---------------------------------------------------------------------------


def test_the_format_comes_from_the_suffix_or_the_argument(tmp_path: Path) -> None:
    """.csv is CSV, .jsonl and .ndjson JSON lines; format= overrides; another suffix is refused."""
    assert MetricsFileHook(tmp_path / "m.csv", ["loss"]).format == "csv"
    assert MetricsFileHook(tmp_path / "m.JSONL", ["loss"]).format == "jsonl"
    assert MetricsFileHook(tmp_path / "m.ndjson", ["loss"]).format == "jsonl"
    assert MetricsFileHook(tmp_path / "m.log", ["loss"], format="csv").format == "csv"
    with pytest.raises(ValueError, match=r"cannot tell the format of path '.*m\.json' from its suffix '\.json'"):
        MetricsFileHook(tmp_path / "m.json", ["loss"])
    with pytest.raises(ValueError, match=r'format must be None, "csv" or "jsonl", got \'tsv\''):
        MetricsFileHook(tmp_path / "m.csv", ["loss"], format="tsv")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("metrics", "error", "message"),
    [
        ("loss", TypeError, r"metrics must be a mapping column -> fetch key or a list of string fetch keys, got 'loss'"),
        ([], ValueError, r"metrics must name at least one value to write, got \[\]"),
        ([3], TypeError, r"metrics: a column name must be a string, got 3"),
        (["step"], ValueError, r"metrics: column 'step' cannot be used \(the step's own column\)"),
        (["loss", "loss"], ValueError, r"metrics: column 'loss' cannot be used \(a column twice\)"),
        ({"a\nb": "loss"}, ValueError, r"metrics: column 'a\\nb' cannot be used: a column is a non-empty one-line string"),
        ({"": "loss"}, ValueError, r"metrics: column '' cannot be used"),
    ],
)
def test_bad_metrics_are_refused_naming_them(tmp_path: Path, metrics: Any, error: type[Exception], message: str) -> None:
    """metrics: the wrong kind, no column, a column named step, twice, or over two lines."""
    with pytest.raises(error, match=f"MetricsFileHook: {message}"):
        MetricsFileHook(tmp_path / "m.csv", metrics)


# -- what it writes -------------------------------------------------------------------------


async def test_a_csv_row_per_step(tmp_path: Path, session_kind: str) -> None:
    """A header, then the step and the fetched values of every step, closed at the end."""
    path = tmp_path / "metrics.csv"
    hook = MetricsFileHook(path, {"loss": "loss", "accuracy": "acc"})
    await drive([hook, StopAtStepHook(num_steps=3)], losses, kind=session_kind)
    assert path.read_text() == "step,loss,accuracy\n1,1.0,0\n2,0.5,10\n3,0.3333333333333333,20\n"
    assert open_under(tmp_path) == []


async def test_a_json_line_per_step(tmp_path: Path, session_kind: str) -> None:
    """An object per line with the step and each column, in column order."""
    path = tmp_path / "metrics.jsonl"
    await drive([MetricsFileHook(path, ["loss", "acc"]), StopAtStepHook(num_steps=2)], losses, kind=session_kind)
    assert path.read_text() == '{"step": 1, "loss": 1.0, "acc": 0}\n{"step": 2, "loss": 0.5, "acc": 10}\n'


async def test_every_n_steps_fetches_and_writes_only_those_steps(tmp_path: Path) -> None:
    """every_n_steps=2: rows at steps 2, 4, 6, and the values are fetched on those runs only."""
    path = tmp_path / "m.csv"
    fetched: list[int] = []

    def produce(i: int) -> dict[str, Any]:
        fetched.append(i)
        return {"loss": float(i)}

    hook = MetricsFileHook(path, ["loss"], every_n_steps=2)
    results = await drive([hook, StopAtStepHook(num_steps=7)], produce)
    assert rows(path) == [["step", "loss"], ["2", "1.0"], ["4", "3.0"], ["6", "5.0"]]
    assert len(results) == 7


class Scalar0d:
    """Stands for a NumPy scalar or a 0-d array: ``item()`` gives the number."""

    def __init__(self, value: object) -> None:
        self.value = value

    def item(self) -> object:
        return self.value


async def test_nan_infinities_huge_values_bools_and_0d_arrays(tmp_path: Path) -> None:
    """CSV keeps nan/inf as Python writes them; JSON lines writes null for them (JSON has none)."""
    values = {"a": math.nan, "b": -math.inf, "c": 10**30, "d": 1e308, "e": True, "f": Scalar0d(2.5)}
    for name in ("m.csv", "m.jsonl"):
        await drive([MetricsFileHook(tmp_path / name, list(values)), StopAtStepHook(num_steps=1)], lambda i: values)
    assert (tmp_path / "m.csv").read_text().splitlines()[1] == f"1,nan,-inf,{10**30},1e+308,True,2.5"
    row = json.loads((tmp_path / "m.jsonl").read_text())
    assert row == {"step": 1, "a": None, "b": None, "c": 10**30, "d": 1e308, "e": True, "f": 2.5}


async def test_numpy_scalars_are_written_as_numbers(tmp_path: Path) -> None:
    """np.float32, np.int64 and a 0-d array: plain numbers in both formats."""
    np = pytest.importorskip("numpy")
    values = {"a": np.float32(0.5), "b": np.int64(7), "c": np.array(1.25)}
    for name in ("m.csv", "m.jsonl"):
        await drive([MetricsFileHook(tmp_path / name, list(values)), StopAtStepHook(num_steps=1)], lambda i: values)
    assert (tmp_path / "m.csv").read_text().splitlines()[1] == "1,0.5,7,1.25"
    assert json.loads((tmp_path / "m.jsonl").read_text()) == {"step": 1, "a": 0.5, "b": 7, "c": 1.25}


async def test_a_value_that_is_not_a_number_fails_the_step_naming_the_column(tmp_path: Path) -> None:
    """A list fetched: a TypeError naming the column and the step; the rows before are kept."""
    path = tmp_path / "m.csv"
    hook = MetricsFileHook(path, ["loss"])
    produce = lambda i: {"loss": [1.0, 2.0] if i == 2 else 0.5}  # noqa: E731
    with pytest.raises(TypeError, match=r"value fetched for column 'loss' at step 3 is not a number: list \[1\.0, 2\.0\]"):
        await drive([hook, StopAtStepHook(num_steps=5)], produce)
    assert rows(path) == [["step", "loss"], ["1", "0.5"], ["2", "0.5"]]
    assert open_under(tmp_path) == []


async def test_an_int_too_long_to_write_is_an_error_naming_the_step(tmp_path: Path) -> None:
    """An int of more digits than Python writes out: a ValueError naming the step and the file."""
    hook = MetricsFileHook(tmp_path / "m.csv", ["loss"])
    with pytest.raises(ValueError, match=r"cannot write the row of step 1 to .*m\.csv: Exceeds the limit"):
        await drive([hook, StopAtStepHook(num_steps=2)], lambda i: {"loss": 10**5000})


# -- when it writes -------------------------------------------------------------------------


async def test_rows_are_written_every_flush_secs_and_at_the_end(tmp_path: Path) -> None:
    """Until flush_secs pass the rows wait in memory; then one write takes them all."""
    path = tmp_path / "m.csv"
    clock = FakeClock()
    seen: list[int] = []

    class Look:
        def before_run(self, run_context: Any) -> None:
            seen.append(len(path.read_text().splitlines()))
            clock.advance(4.0)

    hook = MetricsFileHook(path, ["loss"], flush_secs=10.0, clock=clock)
    await drive([hook, Look(), StopAtStepHook(num_steps=6)], losses)
    # The header at once; 12 s in (step 3) the first three rows; the last three at the end.
    assert seen == [1, 1, 1, 4, 4, 4]
    assert len(rows(path)) == 7


# -- resuming -------------------------------------------------------------------------------


async def test_a_resumed_run_drops_the_rows_after_its_step_and_a_torn_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, session_kind: str
) -> None:
    """Restored at step 2: rows 3 and 4 and the torn line go, steps 3.. are written once each."""
    path = tmp_path / "m.csv"
    path.write_text("step,loss\n1,0.1\n2,0.2\n3,0.3\n4,0.4\n5,0.")
    hook = MetricsFileHook(path, ["loss"])
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await drive(
            [hook, StopAtStepHook(last_step=4)], lambda i: {"loss": 9.0}, kind=session_kind,
            step_counter=LocalStepCounter(2),
        )
    assert rows(path) == [["step", "loss"], ["1", "0.1"], ["2", "0.2"], ["3", "9.0"], ["4", "9.0"]]
    assert [r.getMessage() for r in caplog.records] == [
        f"MetricsFileHook: {path}: dropped 2 rows after step 2 and a torn last line: the session "
        "starts at step 2, and each step after it is written when it is done again"
    ]


async def test_a_run_resumed_past_the_file_appends(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Rows up to the restored step are all kept, nothing is logged, the new rows follow."""
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "loss": 0.1}\n\n{"step": 2, "loss": 0.2}\n')
    with caplog.at_level(logging.WARNING, logger="hookrun"):
        await drive([MetricsFileHook(path, ["loss"]), StopAtStepHook(last_step=6)], lambda i: {"loss": 9.0},
                    step_counter=LocalStepCounter(5))
    assert [json.loads(line)["step"] for line in path.read_text().splitlines() if line] == [1, 2, 6]
    assert caplog.records == []


async def test_a_recovery_that_sets_the_step_back_cuts_the_file_there(tmp_path: Path) -> None:
    """The creator restores step 2 after the session at step 4 is lost: 3 and 4 are written once."""
    path = tmp_path / "m.csv"
    counter = LocalStepCounter()
    created = 0

    async def create() -> StepSession:
        nonlocal created
        created += 1
        if created == 2:
            await counter.set(2)  # as a creator restoring an older checkpoint does
        calls = 0

        def step(feed: Mapping[Hashable, Any]) -> dict[str, Any]:
            nonlocal calls
            calls += 1
            if created == 1 and calls == 5:
                raise AbortedError("lost")
            return {"loss": float(created * 10 + calls)}

        return StepSession(step)

    hooks = [MetricsFileHook(path, ["loss"], flush_secs=0)]
    with anyio.fail_after(LIMIT):
        async with MonitoredSession(create, hooks, step_counter=counter) as sess:
            for _ in range(7):  # the fifth is lost, recovered and answered by the new session
                await sess.run()
    assert rows(path) == [["step", "loss"], ["1", "11.0"], ["2", "12.0"], ["3", "21.0"], ["4", "22.0"], ["5", "23.0"]]


# -- files it does not own ------------------------------------------------------------------


async def enter(hook: MetricsFileHook) -> None:
    await drive([hook, StopAtStepHook(num_steps=1)], losses)


async def test_a_directory_at_the_path_is_refused(tmp_path: Path) -> None:
    """A directory where the file should be: IsADirectoryError naming it, at entry."""
    (tmp_path / "m.csv").mkdir()
    with pytest.raises(IsADirectoryError, match=r"MetricsFileHook: path '.*m\.csv' is a directory"):
        await enter(MetricsFileHook(tmp_path / "m.csv", ["loss"]))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("m.csv", "epoch,loss\n1,0.5\n", r"has the columns \['epoch', 'loss'\] but this hook writes \['step', 'loss'\]"),
        ("m.csv", "step,loss\n1,0.5,7\n", r"line 2 of .* is not a row of this table \(it has 3 cells, not 2\)"),
        ("m.csv", "step,loss\nfirst,0.5\n", r"line 2 of .* \(its first cell is not a step\)"),
        ("m.jsonl", '{"step": 1}\n{"step": 2,\n{"step": 3}\n', r"line 2 of .* \(it is not JSON\): b'\{\"step\": 2,'"),
        ("m.jsonl", '{"step": 1}\n[1, 2]\n', r'line 2 of .* \(it is not a JSON object with an integer "step"\)'),
        ("m.jsonl", '{"step": true}\n', r'line 1 of .* \(it is not a JSON object with an integer "step"\)'),
        ("m.jsonl", "just some notes", r"line 1 of .* \(it is not the start of this table\)"),
        ("m.csv", "notes", r"line 1 of .* \(it is not the start of this table\)"),
    ],
)
async def test_a_file_that_is_not_this_table_is_refused_and_left_alone(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    """Another header, a malformed line, another file: an error naming it; not a byte changed."""
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=f"MetricsFileHook: .*{message}"):
        await enter(MetricsFileHook(path, ["loss"]))
    assert path.read_text() == content
    assert open_under(tmp_path) == []


async def test_a_file_with_windows_line_ends_is_appended_to(tmp_path: Path) -> None:
    """Rows ended by "\\r\\n" (the file was saved on Windows) are rows: kept, and appended to."""
    path = tmp_path / "m.csv"
    path.write_bytes(b'step,"loss"\r\n1,0.5\r\n')
    await drive([MetricsFileHook(path, ["loss"]), StopAtStepHook(last_step=2)], losses,
                step_counter=LocalStepCounter(1))
    assert path.read_bytes() == b'step,"loss"\r\n1,0.5\r\n2,1.0\n'


async def test_binary_junk_is_refused(tmp_path: Path) -> None:
    """Bytes that are not UTF-8: refused naming the line."""
    path = tmp_path / "m.jsonl"
    path.write_bytes(b'{"step": 1}\n\xff\xfe\n')
    with pytest.raises(ValueError, match=r"line 2 of .* \(it is not UTF-8 text\)"):
        await enter(MetricsFileHook(path, ["loss"]))


async def test_a_torn_header_is_written_again(tmp_path: Path) -> None:
    """A file cut inside its header (the first write was cut short): it starts again."""
    path = tmp_path / "m.csv"
    path.write_text("step,lo")
    await enter(MetricsFileHook(path, ["loss"]))
    assert rows(path) == [["step", "loss"], ["1", "1.0"]]


async def test_a_missing_folder_is_made(tmp_path: Path) -> None:
    """The file's folder is created, as the summary writers create theirs."""
    path = tmp_path / "runs" / "a" / "m.csv"
    await enter(MetricsFileHook(path, ["loss"]))
    assert rows(path)[1] == ["1", "1.0"]


# -- every exit -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["error", "cancellation"])
async def test_the_file_is_written_and_closed_on_an_error_or_a_cancellation(tmp_path: Path, how: str) -> None:
    """Rows waiting in memory are written, and the file is closed, whichever way the block ends."""
    path = tmp_path / "m.csv"
    hooks = [MetricsFileHook(path, ["loss"], flush_secs=3600)]
    with anyio.fail_after(LIMIT), anyio.CancelScope() as outer:
        try:
            async with MonitoredSession(ScriptedCreator({"loss": 0.5}), hooks) as sess:
                for _ in range(3):
                    await sess.run()
                if how == "error":
                    raise Boom("in the block")
                outer.cancel()
                await anyio.sleep_forever()
        except Boom:
            assert how == "error"
    assert rows(path) == [["step", "loss"], ["1", "0.5"], ["2", "0.5"], ["3", "0.5"]]
    assert open_under(tmp_path) == []


async def test_a_cancellation_during_a_write_leaves_whole_lines_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while its worker thread writes step 3's row: the row is written once, and the
    rest at the close; the file ends in a whole line and is closed."""
    path = tmp_path / "m.csv"
    writing, release = threading.Event(), threading.Event()
    real_write = MetricsTable.write
    calls = 0

    def slow_write(table: MetricsTable, lines: list[str]) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            writing.set()
            release.wait(LIMIT)
        real_write(table, lines)

    monkeypatch.setattr(MetricsTable, "write", slow_write)
    hook = MetricsFileHook(path, ["loss"], flush_secs=0)

    async def run(scope: anyio.CancelScope) -> None:
        with scope:
            await drive([hook], lambda i: {"loss": float(i)}, max_steps=100)

    with anyio.fail_after(LIMIT):
        async with anyio.create_task_group() as group:
            scope = anyio.CancelScope()
            group.start_soon(run, scope)
            await anyio.to_thread.run_sync(writing.wait)
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert scope.cancelled_caught
    assert rows(path) == [["step", "loss"], ["1", "0.0"], ["2", "1.0"], ["3", "2.0"]]
    assert path.read_bytes().endswith(b"\n")
    assert open_under(tmp_path) == []


async def test_steps_in_flight_write_rows_in_step_order(tmp_path: Path) -> None:
    """max_in_flight=3 with runs ending out of order: each step once, in order."""
    path = tmp_path / "m.csv"

    class Slow:
        async def run(self, fetches: Sequence[Hashable], feed: Mapping[Hashable, Any], *args: object) -> list[Any]:
            await anyio.sleep(0.001 * (3 - feed["i"] % 3))
            return [float(feed["i"]) for _ in fetches]

    async def create() -> Slow:
        return Slow()

    with anyio.fail_after(LIMIT):
        async with MonitoredSession(create, [MetricsFileHook(path, ["x"])], max_in_flight=3) as sess:
            async for _ in sess.iterate(["x"], ({"i": i} for i in range(12))):
                pass
    assert rows(path) == [["step", "x"], *[[str(i + 1), f"{float(i)}"] for i in range(12)]]


async def test_cancelled_at_any_point_the_file_holds_whole_rows_each_once(tmp_path: Path) -> None:
    """Cancelled after N schedule points, for every N (a lost session recovered on the way):
    the file is whole lines, a header and strictly increasing steps, and is closed."""
    from hookrun.testing import drive as drive_kit

    for points in range(2000):
        path = tmp_path / f"{points}.csv"
        hook = MetricsFileHook(path, ["loss"], flush_secs=0)
        record = await drive_kit(hook, steps=4, values={"loss": 1.0}, errors={2: "aborted"}, cancel_after=points)
        if path.exists():
            text = path.read_text()
            assert text == "" or text.endswith("\n"), (points, text)
            steps = [int(row[0]) for row in rows(path)[1:]]
            assert steps == sorted(set(steps)), (points, steps)
        if not record.cancelled:
            break
    else:
        pytest.fail("the life was still cancelled after 2000 schedule points")
    assert rows(path) == [["step", "loss"], *[[str(i), "1.0"] for i in range(1, 5)]]
    assert open_under(tmp_path) == []


async def test_the_example_crashes_resumes_and_holds_each_step_once(tmp_path: Path) -> None:
    """examples/metrics_file.py: crash at 13 (rows 1-12, checkpoint 10), then resume: 1-20 once."""
    from examples import metrics_file

    with pytest.raises(metrics_file.Crash, match="crashed at step 13"):
        await metrics_file.main(tmp_path, steps=20, crash_at=13)
    assert [row[0] for row in rows(tmp_path / "metrics.csv")][-1] == "12"
    lines = await metrics_file.main(tmp_path, steps=20)
    assert lines[0] == "step,loss,lr"
    assert [line.split(",")[0] for line in lines[1:]] == [str(step) for step in range(1, 21)]
    # As docs/hooks.md quotes them.
    assert lines[1:3] == ["1,1.0,0.1", "2,0.5,0.1"] and lines[-1] == "20,0.05,0.01"
