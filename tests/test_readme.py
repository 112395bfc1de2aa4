"""The README works as printed: its set-up commands, its Python blocks, its test command, its figures."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, flags=re.DOTALL | re.MULTILINE)
    assert match is not None, f"README has no section {title!r}"
    return match.group(1)


def env_with_venv_first(tmp_path: Path) -> dict[str, str]:
    """The environment a user has after activating the venv the tests run in."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["TMPDIR"] = str(tmp_path)
    return env


# -- set up ---------------------------------------------------------------------------------

UPGRADE_PIP = ".venv/bin/python -m pip install -q --upgrade 'pip>=25.1'"
TEST_COMMAND = f"{UPGRADE_PIP} && .venv/bin/pip install --group test && .venv/bin/python -m pytest -q -m 'not engine' -n auto"
ENGINES = {"ray", "dask", "distributed"}
GROUPS = {"test", "test-engines", "docs", "dev"}  # the contributors' requirements
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def group_requirements(group: str) -> list[str]:
    """A dependency group's requirements, with the groups it includes expanded."""
    found: list[str] = []
    for item in PYPROJECT["dependency-groups"][group]:
        found += group_requirements(item["include-group"]) if isinstance(item, dict) else [item]
    return found


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=;\[ ]", req, maxsplit=1)[0] for req in requirements}


def requirement_names(group: str) -> set[str]:
    return names(group_requirements(group))


def set_up_commands() -> tuple[str, str]:
    """The README's two set-up commands: install and run the demo; run the tests."""
    (setup,) = blocks("sh", section("Set up"))
    demo, tests = setup.strip().splitlines()
    return demo, tests


def test_set_up_is_exactly_two_commands_installing_trio_and_running_the_demo() -> None:
    demo, tests = set_up_commands()
    parts = demo.split(" && ")
    assert parts == [
        "python3 -m venv .venv", ".venv/bin/pip install -e '.[trio]'", ".venv/bin/hookrun demo --backend trio",
    ]
    assert tests == TEST_COMMAND
    assert any(req.startswith("trio") for req in EXTRAS["trio"])
    assert "coverage" in requirement_names("test")


def test_the_contributors_requirements_are_dependency_groups_not_extras() -> None:
    """A user of the package index sees only the features: test, docs and dev are groups."""
    assert set(PYPROJECT["dependency-groups"]) == GROUPS
    assert not GROUPS & set(EXTRAS)
    assert not [req for reqs in EXTRAS.values() for req in reqs if re.search(r"\[.*(test|docs|dev)", req)]


def test_the_engine_group_installs_what_the_engine_extras_install() -> None:
    """The engine suites run with the requirements a user of the ray and dask extras gets."""
    assert set(EXTRAS["ray"]) | set(EXTRAS["dask"]) <= set(group_requirements("test-engines"))


def test_the_install_section_lists_each_user_facing_extra_on_a_line_of_its_own() -> None:
    install = section("Install")
    assert blocks("sh", install) == ["pip install 'hookrun[trio]'\nhookrun demo --backend trio\n"]
    assert "`pip install hookrun`" in install
    listed = re.findall(r"^\* `([a-z]+)`: ", install, flags=re.MULTILINE)
    assert listed == list(EXTRAS)


def test_the_coverage_report_is_a_branch_coverage_floor_on_the_runtime_core() -> None:
    coverage = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]
    assert coverage["run"] == {"branch": True, "source": ["hookrun"], "parallel": True, "patch": ["subprocess"]}
    report = coverage["report"]
    assert report["fail_under"] == 95 and report["show_missing"] and report["skip_covered"]
    core = {
        "_dispatch/_dispatcher", "_dispatch/_start", "_dispatch/_workers", "_dispatch/_failures",
        "_dispatch/_plan", "_dispatch/_wake",
        "_session/_monitored", "_session/_lifecycle", "_session/_recovering", "_session/_state",
        "_session/_stepping", "_session/_lanes", "_session/_lane_sessions", "_session/_in_flight",
        "_session/_in_flight_iterate", "_session/_in_flight_iterate_exits", "_session/_in_flight_step_fn",
        "_session/_in_flight_setup",
        "_session/_in_flight_step", "_session/_runners", "_session/_run", "_cancelling",
    }
    assert set(report["include"]) == {f"src/hookrun/{name}.py" for name in core}
    for pattern in report["include"]:
        assert (ROOT / pattern).is_file(), pattern
    assert "95 %" in section("Set up")


def test_the_demo_command_of_the_readme_runs_as_printed(tmp_path: Path) -> None:
    """The demo part of the first command, with the environment the tests run in as its .venv."""
    demo = set_up_commands()[0].split(" && ")[-1].removeprefix(".venv/bin/")
    done = subprocess.run(
        demo, shell=True, cwd=tmp_path, env=env_with_venv_first(tmp_path),
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "on the trio backend" in done.stdout and "the pipeline ended cleanly" in done.stdout
    assert "(2 sessions created, one recovery)" in done.stdout
    (made,) = tmp_path.glob("hookrun-demo-*")  # the default output directory, named in the output
    assert str(made) in done.stdout


@pytest.mark.slow
def test_the_set_up_commands_work_on_a_fresh_copy(tmp_path: Path) -> None:
    """The first command verbatim, in a new environment: the demo runs on trio with only what
    the install brought; then the second's pip upgrade, and its group install resolves.
    (The second is the command that runs this test.)"""
    if os.environ.get("HOOKRUN_TESTS_OFFLINE"):
        pytest.skip("HOOKRUN_TESTS_OFFLINE is set: this test installs from the package index")
    demo = set_up_commands()[0]
    tree = tmp_path / "hookrun"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != str(Path(sys.executable).parent))
    env["TMPDIR"] = str(tmp_path)
    upgrade, install_group = set_up_commands()[1].split(" && ")[:2]
    script = (
        f"set -e\n{demo}\n.venv/bin/python -c 'import tqdm' 2>/dev/null && echo HAS_TQDM || true\n"
        # the second command's installs, as printed, on the pip the venv came with (resolved only)
        f"{upgrade}\n{install_group} --dry-run\n"
    )
    done = subprocess.run(
        ["bash", "-c", script], cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on the trio backend" in done.stdout and "(2 sessions created, one recovery)" in done.stdout
    assert "backend:   trio" in done.stdout and "Traceback" not in done.stderr
    assert "HAS_TQDM" not in done.stdout  # the bare install: the demo managed without the extras
    assert "Would install" in done.stdout and "pytest-" in done.stdout  # the test group resolved


# -- quick start ----------------------------------------------------------------------------


def test_the_quick_start_is_examples_quickstart_word_for_word() -> None:
    (quick,) = blocks("python", section("Quick start"))
    example = (ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8")
    docstring, body = example.split("\n", 1)
    assert docstring.startswith('"""') and docstring.endswith('"""')
    assert quick == body.lstrip("\n")


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_every_python_block_runs_verbatim_as_a_script(index: int, tmp_path: Path) -> None:
    code = blocks("python")[index]
    done = subprocess.run(
        [sys.executable, "-"], input=code, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    if "StopAtStepHook(last_step=3)" in code:
        assert done.stdout.splitlines() == [
            "step 1: loss 1.000", "step 2: loss 0.500", "step 3: loss 0.333", "[0.0, 2.0, 4.0]",
        ]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_every_python_block_runs_on_both_backends(index: int, backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {"__name__": "readme_block"}
    exec(compile(blocks("python")[index], f"README.md python block {index}", "exec"), namespace)
    main = namespace["main"]
    result = anyio.run(main, backend=backend)
    if index == 0:
        assert result == [0.0, 2.0, 4.0]
        assert capsys.readouterr().out.splitlines() == ["step 1: loss 1.000", "step 2: loss 0.500", "step 3: loss 0.333"]


# -- development ----------------------------------------------------------------------------


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    """.ci/run puts its own environment first on PATH, so it runs the command without the
    .venv/bin/ prefix of a user's environment; then it runs the engine suites."""
    command = set_up_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    lines = ci.splitlines()
    assert command.replace(".venv/bin/", "") in lines
    engines = "pip install -q --group test-engines && python -m pytest -q -m engine"
    at = lines.index(command.replace(".venv/bin/", ""))
    assert engines in lines and lines.index(engines) > at
    # set -e lets a failure inside an && list pass: the command's status is checked before going on.
    assert lines[at + 1].startswith("status=$?") and lines[at + 2] == '[ "$status" -eq 0 ] || exit "$status"'
    development = section("Development")
    assert ".venv/bin/pip install --group test-engines" in development
    assert "python -m pip install -q -e . --group dev" in lines[:at]  # what ruff, mypy and mkdocs need
    assert ".venv/bin/python -m pytest -q -m engine" in development
    assert 'export PATH="$VIRTUAL_ENV/bin:$PATH"' in ci
    # The command is measured as it runs (coverage started by every process), then reported.
    measured = [line for line in lines[:at] if line.startswith(("echo 'import coverage", "export COVERAGE_PROCESS_START"))]
    assert len(measured) == 2 and "coverage.process_startup()" in measured[0]
    assert "python -m coverage combine -q && python -m coverage report" in lines[at:]
    assert "rm -rf .venv" not in ci and "mktemp -d" in ci
    assert not blocks("sh", section("Development"))  # one place for the test command


def test_the_test_group_has_no_linters_and_dev_has_them() -> None:
    """The test group has no linters; dev has them, and ``all`` is every user-facing extra."""
    assert not requirement_names("test") & {"ruff", "mypy", "flake8", "black"}
    assert {"ruff", "mypy"} <= requirement_names("dev")
    assert set(EXTRAS) == {"trio", "uvloop", "tensorboard", "progress", "numpy", "ray", "dask", "otel", "prometheus", "all"}
    (everything,) = EXTRAS["all"]
    assert set(everything.split("[", 1)[1].rstrip("]").split(",")) == set(EXTRAS) - {"all"}


def test_the_test_group_is_light_and_the_engines_have_a_group_of_their_own() -> None:
    """The README's test command installs no engine; ``test-engines`` adds them to ``test``,
    and ``dev`` (the linters type-check the engine adapters) has them and the docs tooling."""
    assert not requirement_names("test") & ENGINES
    assert requirement_names("test") | ENGINES == requirement_names("test-engines")
    assert "psutil" in requirement_names("test")  # the tests of files and processes left open need it
    assert requirement_names("test-engines") | requirement_names("docs") <= requirement_names("dev")
    assert any(marker.startswith("engine:") for marker in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"])


def test_every_test_that_imports_an_engine_is_marked_engine() -> None:
    """Outside tests/ray and tests/dask (marked as a whole by their conftest), a test that
    reaches Ray or Dask carries ``@pytest.mark.engine`` itself."""
    needs = re.compile(r"\b(?:import |importorskip\(\"|\"--engine\", \")(?:ray|dask|distributed)\b")
    checked = 0
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.parent.name in ("ray", "dask"):
            continue
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test_"):
                continue
            if needs.search(ast.get_source_segment(text, node) or ""):
                checked += 1
                marks = [ast.unparse(decorator) for decorator in node.decorator_list]
                assert "pytest.mark.engine" in marks, f"{path.name}::{node.name} is not marked engine"
    assert checked >= 2  # the remote benchmarks' quick runs, at least


# -- claims ---------------------------------------------------------------------------------


def benchmark_medians(row: str) -> list[float]:
    table = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    match = re.search(rf"^\| {re.escape(row)} \|(.*)$", table, flags=re.MULTILINE)
    assert match is not None, f"docs/benchmarks.md has no row {row!r}"
    cells = [cell.strip() for cell in match.group(1).split("|")][:3]  # asyncio, uvloop, trio
    return [float(cell.split(" [")[0]) for cell in cells]


@pytest.mark.parametrize(("row", "kind"), [("async K=10", "async"), ("plain K=10", "plain")])
def test_the_readmes_figures_are_the_benchmarks(row: str, kind: str) -> None:
    medians = benchmark_medians(row)
    claim = f"{min(medians):.3g}\u2013{max(medians):.3g} µs"  # an en dash
    assert f"{claim} ({kind})" in README, f"README should say {claim} for ten {kind} hooks"
    assert claim in section("What you get")


def test_links_to_files_of_the_repository_resolve() -> None:
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README links to missing {target}"
