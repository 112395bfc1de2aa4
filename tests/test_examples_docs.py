"""The examples the documentation shows run, on both backends, and do what the pages say."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from examples import (
    backends,
    built_in_hooks,
    checkpointing,
    concepts,
    errors_and_cancellation,
    overlapping_steps,
    porting_ignite,
    porting_tensorflow,
    quickstart,
    remote_future,
    seeing_logs,
    tracing,
    writing_hooks,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.anyio
async def test_the_concepts_block_steps_a_session_class_of_your_own() -> None:
    assert await concepts.main() == [[0.0], [2.0], [4.0]]


def test_the_retry_policy_the_concepts_page_spells_out_is_the_default() -> None:
    import hookrun

    assert concepts.default_retry_policy() == hookrun.RetryPolicy()


@pytest.mark.anyio
async def test_checkpoints_wired_by_hand_resume_where_they_stopped(tmp_path: Path) -> None:
    assert await checkpointing.wired(tmp_path, 300) == 300
    assert await checkpointing.wired(tmp_path, 500) == 500  # restored at 300, saved every 100


@pytest.mark.anyio
async def test_the_checkpointer_saves_finds_and_restores_by_hand(tmp_path: Path) -> None:
    seen = await checkpointing.by_hand(tmp_path)
    assert seen["state"] == {"weights": [0.5, 0.25], "epoch": 2}
    assert (seen["latest"], seen["every"], seen["best"]) == (7, [7], None)
    assert seen["model"].step == seen["ema"].step == 7 and seen["model"].path != seen["ema"].path


@pytest.mark.anyio
async def test_a_subclass_and_a_function_hook_of_the_built_in_hooks_page() -> None:
    seen = await built_in_hooks.main(25)
    assert seen["started_at"] is not None  # the subclass's begin ran, after its base's
    assert [step for step, _ in seen["pushed"]] == [1, 11, 21]
    assert seen["pushed"][0][1] == pytest.approx(1.0)


@pytest.mark.anyio
async def test_per_step_state_in_the_run_context_holds_with_steps_in_flight(capsys: pytest.CaptureFixture[str]) -> None:
    await overlapping_steps.main(overlapping_steps.EveryTenth(), steps=25, in_flight=4)
    assert capsys.readouterr().out.splitlines() == ["0.0", "10.0", "20.0"]


@pytest.mark.anyio
async def test_per_step_state_on_self_is_refused_with_steps_in_flight() -> None:
    with pytest.raises(TypeError, match=r"hooks\[0\] \(EveryTenthOnSelf\) does not declare overlapping_steps = True"):
        await overlapping_steps.main(overlapping_steps.EveryTenthOnSelf(), in_flight=4)


@pytest.mark.anyio
async def test_the_tracing_program_makes_a_span_per_step_run_and_hook_call() -> None:
    names = await tracing.main(3)
    assert {"hookrun.step", "hookrun.run", "hookrun.before_run StopAtStepHook", "hookrun.after_run StopAtStepHook"} <= set(names)
    assert all(names.count(name) == 3 for name in names)  # each span once per step


@pytest.mark.anyio
async def test_a_future_of_a_thread_pool_is_awaited_on_the_event_loop() -> None:
    assert await remote_future.main() == 144


@pytest.mark.anyio
async def test_writing_hooks_schedules_fire_where_the_page_says(tmp_path: Path) -> None:
    log = tmp_path / "losses.jsonl"
    outcome = await writing_hooks.main(25, log)
    seen = outcome["seen"]
    assert seen["every_ten"] == [1, 11, 21]  # on_after_run sees the step after the run
    assert seen["before_every_ten"] == [0, 10, 20]  # on_before_run sees the step before it
    assert seen["report"] == [1, 11, 21]  # with fetches: the same steps, fetched only then
    assert seen["once"] == [5]
    assert seen["steps_or_time"][0] == 1 and seen["steps_or_time"] == sorted(set(seen["steps_or_time"]))
    assert seen["end"] == [0]
    assert outcome["ordered"] == ["first", "second"]  # sequential() keeps the order
    assert outcome["best"] == pytest.approx(1.0 / 25)  # LossWatcher stopped the run at step 25
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(1, 26))  # in_thread hook wrote every step


@pytest.mark.anyio
async def test_writing_hooks_on_exception_closes_the_file(tmp_path: Path) -> None:
    log = await writing_hooks.failing(tmp_path / "losses.csv", steps=3)
    assert log.file is None  # closed by on_exception, after the error
    assert (tmp_path / "losses.csv").read_text().splitlines() == ["1,0.5", "2,0.5", "3,0.5"]


@pytest.mark.anyio
async def test_the_ported_tensorflow_hook_reads_without_training() -> None:
    lines, updates = await porting_tensorflow.main(30)
    assert updates == 30  # hookrun.fetch in the hook read the accuracy without a training step
    assert [line.split(":")[0] for line in lines[:3]] == ["step 10", "step 20", "step 30"]
    assert lines[-1] == "done at step 30"


@pytest.mark.anyio
async def test_ignite_handlers_as_hooks() -> None:
    assert await porting_ignite.main(2) == [
        "epoch 1 completed at iteration 3",
        "iteration 4: loss 1.50",  # Ignite's every=4: iterations 4, 8, ...
        "epoch 2 completed at iteration 6",
        "completed",
    ]


@pytest.mark.anyio
async def test_recovery_from_your_own_error_type() -> None:
    results, sessions = await errors_and_cancellation.recover_from_your_own_error()
    assert results == [0, 10, 20, 30, 40] and sessions == 2


@pytest.mark.anyio
async def test_a_hung_hook_times_out_naming_itself() -> None:
    exc = await errors_and_cancellation.a_hook_that_hangs()
    assert isinstance(exc.hook, errors_and_cancellation.Stuck)
    assert (exc.phase, exc.limit) == ("after_run", 0.05)
    assert str(exc) == "hook Stuck took longer than hook_timeout=0.05s in after_run"


@pytest.mark.anyio
async def test_a_failing_hook_raises_its_own_error_and_cancels_its_siblings() -> None:
    exc, sibling_cancelled = await errors_and_cancellation.a_hook_that_fails()
    assert type(exc) is ValueError and str(exc) == "this hook is broken"
    assert sibling_cancelled


@pytest.mark.anyio
async def test_cancelling_from_outside_closes_the_session() -> None:
    assert await errors_and_cancellation.cancelled_from_outside() == {"cancelled": True, "steps": 3, "closed": 1}


@pytest.mark.anyio
async def test_the_hooks_log_once_logging_is_configured(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="hookrun"):
        assert await seeing_logs.main(20) == 20
    messages = [record.getMessage() for record in caplog.records if record.name == "hookrun"]
    assert any(re.fullmatch(r"loss = 0\.1666+\d* \(\d+\.\d{3} sec\)", m) for m in messages), messages
    assert any(m.startswith("global_step/sec: ") for m in messages)
    assert any(m.startswith("step 20/20 (100.0%)") for m in messages)


def test_without_configuration_info_lines_do_not_show() -> None:
    """What the pages warn about: until logging is configured, the hooks' INFO lines are lost."""
    bare = subprocess.run(
        [sys.executable, "-c", "import anyio; from examples import seeing_logs; anyio.run(seeing_logs.main)"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    assert "loss =" not in bare.stderr and "global_step/sec" not in bare.stderr
    configured = subprocess.run(
        [sys.executable, "examples/seeing_logs.py"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert " INFO hookrun: loss = 1.0" in configured.stderr and "global_step/sec" in configured.stderr


def test_every_backend_runs_the_quick_start() -> None:
    results = backends.run_on_every_backend(quickstart.main)
    assert set(results) >= {"asyncio", "trio"}
    assert all(value == [0.0, 2.0, 4.0] for value in results.values())


def test_every_snippet_the_docs_include_exists() -> None:
    """Each ``--8<-- "file:section"`` of the docs names a section its example file marks."""
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for path, name in re.findall(r'--8<-- "([^":]+)(?::([\w-]+))?"', page.read_text(encoding="utf-8")):
            source = (ROOT / path).read_text(encoding="utf-8")
            if name:
                assert f"# --8<-- [start:{name}]" in source, f"{page.name}: {path} has no section {name!r}"
                assert f"# --8<-- [end:{name}]" in source


def test_the_api_reference_covers_every_public_name() -> None:
    import hookrun
    import hookrun.hooks

    pages = "\n".join(page.read_text(encoding="utf-8") for page in (ROOT / "docs" / "reference").glob("*.md"))
    listed = {name.strip() for group in re.findall(r"members: \[([^\]]*)\]", pages) for name in group.split(",")}

    def documented(name: str, *modules: str) -> bool:
        return name in listed or any(f"::: {module}.{name}\n" in pages for module in modules)

    modules = {"hooks"}  # subpackages have pages of their own
    missing = [n for n in hookrun.__all__ if n not in modules and not documented(n, "hookrun", "hookrun.hooks")]
    missing += [n for n in hookrun.hooks.__all__ if not documented(n, "hookrun.hooks")]
    assert not missing, f"not in docs/reference: {missing}"
    assert "::: hookrun.testing\n" in pages
    for module in ("hookrun.ray", "hookrun.dask", "hookrun.remote.await_future"):
        assert f"::: {module}\n" in pages, f"{module} is not in docs/reference"


def test_getting_started_installs_and_runs_the_demo_as_the_readme_does() -> None:
    """The package index's install and the clone's first command, as the README gives them."""

    def sh_blocks(text: str) -> list[str]:
        return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    install, clone = sh_blocks(page)[:2]
    assert install == sh_blocks(readme.split("## Install", 1)[1])[0]
    assert clone.strip() == sh_blocks(readme.split("## Set up", 1)[1])[0].splitlines()[0]
    assert "checkpoints: " in page  # the demo's output as it now prints it


def test_getting_started_lists_every_extra_of_the_package() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert re.findall(r"^\| `([a-z]+)` \|", page, flags=re.MULTILINE) == list(extras)


def test_the_docs_cite_nothing_a_user_does_not_have() -> None:
    """No behaviour contract, issue numbers, internal trace labels or one machine's paths."""
    texts = {path: path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]}
    for path, text in texts.items():
        for pattern in (r"SPEC(\.md)?\b", r"\b[Ii]ssue #?\d", r"\[T\d\d\]|\btrace T\d", r"/work/|/home/\w"):
            assert not re.search(pattern, text), f"{path.name} matches {pattern!r}"
        assert "16 runs" not in text and "16 times in a row" not in text
