"""The on-demand benchmarks (checkpoints, remote steps) run in their quick mode on tiny
sizes and produce a complete JSON document of positive, finite figures.

Nothing here times anything: the checks are on the document's shape and sanity only.
Each runs in a fresh interpreter (a benchmark collects garbage before each sample,
which in the large heap of the test process costs far more than the benchmark). The
remote ones start their own local cluster (never beside the Ray or Dask test clusters)
and are marked ``engine``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
STATS = {"median", "min", "max", "n"}


def _check_stats(value: Any, where: str, *, positive: bool = True) -> None:
    assert isinstance(value, dict) and set(value) == STATS, f"{where}: {value!r}"
    for key in ("median", "min", "max"):
        number = value[key]
        assert isinstance(number, float | int) and math.isfinite(number), f"{where}.{key} = {number!r}"
        if positive:
            assert number > 0, f"{where}.{key} = {number!r}"
    assert value["min"] <= value["median"] <= value["max"], where
    assert value["n"] >= 1, where


def _main(module: str, *args: str, out: Path) -> subprocess.CompletedProcess[str]:
    """``python -m module args --json out`` in a fresh interpreter: a benchmark collects
    garbage before each sample, which in the test process (a large heap) costs ten times
    the benchmark itself."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    done = subprocess.run(
        [sys.executable, "-m", module, *args, "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _run(module: str, *args: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "result.json"
    done = _main(module, "--quick", *args, out=out)
    assert "target" in done.stdout  # the readable table went to stdout
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["meta"]["quick"] is True
    return result


def _check_targets(result: dict[str, Any], expected: set[str]) -> None:
    assert set(result["targets"]) == expected
    for name, verdict in result["targets"].items():
        assert isinstance(verdict["met"], bool), name
        assert math.isfinite(verdict["median"]), name


def test_checkpoints_quick(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    out = tmp_path / "ckpt.json"
    _main("benchmarks.checkpoints", "--quick", "--mib", "0.5", "--dir", str(tmp_path), out=out)
    result = json.loads(out.read_text())
    assert result["meta"]["state_mib"] == pytest.approx(0.5)
    assert set(result["per_step_us"]) == {"save", "snapshot_write", "plain_write", "steps_idle", "steps_saving"}
    for name, value in result["per_step_us"].items():
        _check_stats(value, f"per_step_us.{name}")
    assert set(result["summary"]) - {"loop_ms_lost_per_save"} == {
        "save_mib_per_s", "plain_write_mib_per_s", "save_over_plain_throughput",
        "snapshot_write_mib_per_s", "snapshot_write_over_plain_throughput",
        "step_idle_us", "step_saving_us", "step_saving_over_idle", "saves_per_saving_sample",
    }
    for name, value in result["summary"].items():
        # A short sample may see no save end; the loop time lost per save may be below 0 (noise).
        _check_stats(value, f"summary.{name}", positive=name not in {"saves_per_saving_sample", "loop_ms_lost_per_save"})
    _check_targets(result, {"save_over_plain_throughput", "step_saving_over_idle"})
    assert list(tmp_path.iterdir()) == [out]  # its scratch directory is gone


def test_checkpoints_rejects_bad_sizes() -> None:
    from benchmarks import checkpoints

    with pytest.raises(SystemExit):
        checkpoints.parse_args(["--mib", "0"])


def _check_backends(result: dict[str, Any], *, shared: bool) -> None:
    assert set(result["backends"]) == {"asyncio", "trio"}
    cases = {"session": "raw", "hooked_0": "session", "noop_10": "session", "worker_hooks": "session"}
    if shared:  # Ray: the shared counter, and the same hooks on an in-process waiting step
        cases.update(shared_worker_hooks="session_inc", idle_noop_10="idle_session", idle_worker_hooks="idle_session")
    for backend, data in result["backends"].items():
        assert data["baseline"] == cases
        assert set(data["per_step_us"]) == {
            *cases, *cases.values(), "local_bare", "local_noop_10", "local_worker_hooks",
        }
        for name, value in data["per_step_us"].items():
            _check_stats(value, f"{backend}.per_step_us.{name}")
        for key in ("over_base", "over_base_us", "over_base_plain_mean"):
            assert set(data[key]) == set(cases)
            for name, value in data[key].items():
                _check_stats(value, f"{backend}.{key}.{name}", positive=False)
        assert set(data["local_hook_cost_over_session"]) == {"noop_10", "worker_hooks"}
        for name, value in data["local_hook_cost_over_session"].items():
            _check_stats(value, f"{backend}.local_hook_cost_over_session.{name}", positive=False)


@pytest.mark.engine
def test_remote_ray_quick(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    result = _run("benchmarks.remote", "--engine", "ray", tmp_path=tmp_path)
    _check_backends(result, shared=True)
    counter = result["counter"]
    assert set(counter["increments_per_s"]) == {"1", "2", "4"}
    for k, value in counter["increments_per_s"].items():
        _check_stats(value, f"counter.{k}")
    assert counter["final_value"] == counter["increments_per_worker"] * 7 * result["meta"]["rounds"]
    targeted = ("noop_10", "worker_hooks", "shared_worker_hooks")
    _check_targets(result, {f"{n}_{b}" for n in targeted for b in ("asyncio", "trio")})


@pytest.mark.engine
def test_remote_dask_quick(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    result = _run("benchmarks.remote", "--engine", "dask", tmp_path=tmp_path)
    _check_backends(result, shared=False)
    rates = result["pipeline"]["items_per_s"]
    assert set(rates) == {f"{w}_workers_{b}" for w in (1, 2) for b in ("asyncio", "trio")}
    for name, value in rates.items():
        _check_stats(value, f"pipeline.{name}")
    _check_targets(result, {"noop_10_asyncio", "noop_10_trio"})


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_peers_tiny_run_has_every_hookrun_column(backend: str, tmp_path: Path) -> None:
    """The peers run on either backend, its hookrun columns (the async floor included)
    complete for every K; the peers themselves are optional (skipped when missing)."""
    out = tmp_path / "peers.json"
    argv = ["--peers", "pluggy", "--hooks", "0,2", "--rounds", "1", "--sample-ms", "2", "--no-pin"]
    _main("benchmarks.peers", *argv, "--backend", backend, out=out)
    result = json.loads(out.read_text())
    assert result["meta"]["backend"] == backend
    for column in ("hookrun async", "hookrun plain", "hookrun async floor"):
        for k in ("0", "2"):
            _check_stats(result["overheads"][column]["overhead_us"][k], f"{column} K={k}", positive=False)
    assert ("pluggy (2 calls)" in result["overheads"]) != ("pluggy" in result["skipped"])


IN_FLIGHT_SHAPES = {"10ms_n1", "10ms_n8", "10ms_n64", "1ms_n64", "2-20ms_n8", "2-20ms_n64", "10ms_n256", "10ms_n1024"}


def test_in_flight_quick(tmp_path: Path) -> None:
    """The steps-in-flight benchmark on both backends: every shape's rates, efficiencies and
    ratio to the hand-written loop, and a verdict for each target."""
    from benchmarks import in_flight

    out = tmp_path / "in_flight.json"
    _main("benchmarks.in_flight", "--quick", "--backends", "asyncio,trio", "--no-pin", "--quiet", out=out)
    result = json.loads(out.read_text())
    assert result["meta"]["quick"] is True and result["skipped"] == {}
    assert set(result["backends"]) == {"asyncio", "trio"}
    for backend, shapes in result["backends"].items():
        assert set(shapes) == IN_FLIGHT_SHAPES
        for shape, data in shapes.items():
            assert data["steps"] == in_flight.QUICK_STEPS[(0.001 if shape.startswith("1ms") else 0.010, int(shape.split("_n")[1]))]
            for key in (
                "hookrun_steps_per_s", "loop_steps_per_s", "tasks_steps_per_s",
                "hookrun_efficiency", "loop_efficiency", "tasks_efficiency", "hookrun_over_loop",
            ):
                _check_stats(data[key], f"{backend}.{shape}.{key}")
            # Neither loop beats N over the steps' mean latency.
            for key in ("hookrun_efficiency", "loop_efficiency", "tasks_efficiency"):
                assert data[key]["max"] <= 1.001, (backend, shape, key)
    _check_targets(result, {
        f"{name}_{backend}" for backend in ("asyncio", "trio")
        for name in (
            "efficiency_10ms_n8", "efficiency_10ms_n64", "over_loop_1ms_n64", "over_loop_2-20ms_n8",
            "over_loop_2-20ms_n64", "over_loop_10ms_n256", "over_loop_10ms_n1024",
        )
    })


@pytest.mark.engine
def test_in_flight_dask_quick(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    result = _run("benchmarks.in_flight", "--engine", "dask", tmp_path=tmp_path)
    engine = result["engine"]
    assert set(engine["items_per_s"]) == {f"{w}_workers_n{n}_{b}" for w, n in ((1, 1), (1, 4), (2, 4)) for b in ("asyncio", "trio")}
    for name, value in {**engine["items_per_s"], **engine["ratios"]}.items():
        _check_stats(value, name)
    _check_targets(result, {f"2_workers_over_1_n4_{b}" for b in ("asyncio", "trio")})


@pytest.mark.engine
def test_in_flight_ray_quick(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    result = _run("benchmarks.in_flight", "--engine", "ray", tmp_path=tmp_path)
    engine = result["engine"]
    assert set(engine["items_per_s"]) == {f"{n}_actors_n{n}_{b}" for n in (1, 4) for b in ("asyncio", "trio")}
    for name, value in {**engine["items_per_s"], **engine["ratios"]}.items():
        _check_stats(value, name)
    _check_targets(result, {f"4_actors_over_1_{b}" for b in ("asyncio", "trio")})


@pytest.mark.parametrize(
    "bad", [["--copies", "0"], ["--copies", "-2"], ["--rounds", "0"], ["--sleep-ms", "-1"], ["--sleep-ms", "nan"], ["--sleep-ms", "inf"]]
)
def test_waiting_rejects_bad_arguments(bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import waiting

    with pytest.raises(SystemExit):
        waiting.parse_args(bad)
    assert bad[0] in capsys.readouterr().err


def test_waiting_steps_every_copy_of_a_case(tmp_path: Path) -> None:
    """``--copies 2``: each case is two sessions stepped in turn, one figure per round."""
    from benchmarks import waiting

    out = tmp_path / "waiting.json"
    argv = ["--quick", "--hooks", "1", "--rounds", "3", "--copies", "2", "--backends", "asyncio", "--peers", ""]
    assert waiting.main([*argv, "--no-pin", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["meta"]["copies"] == 2
    assert all(value["n"] == 3 for value in result["backends"]["asyncio"].values())


@pytest.mark.anyio
@pytest.mark.parametrize("statistics_first", [True, False])
async def test_waiting_opens_each_statistics_pair_in_the_order_asked(statistics_first: bool) -> None:
    """Of the sessions that differ only in their statistics, the one asked for is opened
    (and listed) first: the chunks alternate it, so neither always has the first place."""
    import contextlib

    from benchmarks._waiting_cases import open_cases

    async with contextlib.AsyncExitStack() as stack:
        names = [case.name for case in await open_cases(stack, 0.0, [1], False, 1, statistics_first)]
    on_off = ["on", "off"] if statistics_first else ["off", "on"]
    assert names == [
        "bare", "loop_1", *(f"{kind}_{s}_1" for kind in ("plain", "async") for s in on_off), "awaiting_on_1",
    ]


def test_waiting_alternates_the_order_from_chunk_to_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every chunk opens the cases anew, in turn with statistics first and last, on each backend."""
    from benchmarks import waiting

    asked: list[tuple[int, bool]] = []

    async def chunk(seconds: float, ks: Any, pluggy: bool, rounds: int, seed: int, probes: bool,
                    copies: int, statistics_first: bool) -> dict[str, list[float]]:
        asked.append((seed, statistics_first))
        kinds = ["loop", "plain_on", "plain_off", "async_on", "async_off", "awaiting_on"]
        return {f"{kind}_1": [1.0] * rounds for kind in kinds}

    monkeypatch.setattr(waiting, "_chunk", chunk)
    argv = ["--hooks", "1", "--rounds", "600", "--peers", "", "--no-pin", "--json", str(tmp_path / "w.json")]
    assert waiting.main(argv) == 0
    assert asked == [(0, True), (0, True), (250, False), (250, False), (500, True), (500, True)]


def test_waiting_quick(tmp_path: Path) -> None:
    """The waiting-step benchmark on both backends: every row for every K, and a verdict
    for each target (pluggy, and Ignite, are optional: skipped when missing)."""
    from benchmarks import waiting

    out = tmp_path / "waiting.json"
    argv = [
        "--quick",
        "--hooks",
        "1,2",
        "--rounds",
        "4",
        "--peers",
        "pluggy",
        "--no-pin",
        "--json",
        str(out),
    ]
    assert waiting.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["meta"]["quick"] is True
    assert set(result["backends"]) == {"asyncio", "trio"}
    prefixes = ["loop", "plain_on", "async_on", "plain_off", "async_off", "awaiting_on"]
    if "pluggy" not in result["skipped"]:
        prefixes.append("pluggy")
    for rows in result["backends"].values():
        assert set(rows) == {f"{prefix}_{k}" for prefix in prefixes for k in (1, 2)}
        for name, value in rows.items():
            assert value["n"] == 4 and all(
                math.isfinite(value[key]) for key in ("median", "p25", "p75")
            ), name
    expected = {
        f"statistics_{kind}_{k}_{b}"
        for kind in ("plain", "async")
        for k in (1, 2)
        for b in ("asyncio", "trio")
    }
    if "pluggy" not in result["skipped"]:
        expected |= {
            f"{kind}_over_pluggy_{k}_{b}"
            for kind in ("plain", "async")
            for k in (1, 2)
            for b in ("asyncio", "trio")
        }
    _check_targets(result, expected)
    assert "| hookrun async, statistics on |" in waiting.markdown(result)
