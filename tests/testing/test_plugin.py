"""The pytest plugin of hookrun.testing: off unless enabled, then both backends and fixtures.

Each test runs pytest in a fresh project directory (a subprocess), as a user would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

USER_TESTS = '''
import sys
import pytest

@pytest.mark.anyio
async def test_async(anyio_backend):
    pass

def test_kit_not_imported():
    assert "hookrun.testing" not in sys.modules
'''

KIT_TESTS = '''
import pytest
from hookrun.hooks import StopAtStepHook

async def test_drive(drive, mock_clock):
    record = await drive(StopAtStepHook(last_step=2), steps=5, tick=1)
    assert record.steps == 2 and mock_clock() == 2
'''


def run_pytest(
    project: Path, *args: str, ini: str = "", env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run pytest in ``project`` (with a pytest.ini holding ``ini``); return (exit code, output)."""
    # Hypothesis and xdist play no part here and would double the start-up of each run.
    (project / "pytest.ini").write_text(f"[pytest]\naddopts = -p no:cacheprovider -p no:hypothesispytest -p no:xdist\n{ini}\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-W", "error", *args],
        cwd=project,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return completed.returncode, completed.stdout + completed.stderr


def outcomes(output: str) -> list[tuple[str, str]]:
    """The ``(test_x[param], PASSED)`` pairs of a verbose run."""
    found: list[tuple[str, str]] = re.findall(r"::(\S+) (PASSED|FAILED|ERROR|SKIPPED)", output)
    return sorted(found)


def test_installing_hookrun_changes_nothing(tmp_path: Path) -> None:
    """Without enabling the kit, a project's run is exactly as with hookrun's entry point blocked:
    same tests, same backends, same outcomes, and the kit is never imported."""
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    code, output = run_pytest(tmp_path)
    blocked_code, blocked = run_pytest(tmp_path, "-p", "no:hookrun")
    assert code == blocked_code == 0, output
    assert outcomes(output) == outcomes(blocked)
    code, listing = run_pytest(tmp_path, "--fixtures")
    assert code == 0 and "mock_clock" not in listing and "hookrun.testing" not in listing
    code, listing = run_pytest(tmp_path, "--fixtures", "-p", "hookrun.testing")
    assert code == 0 and "mock_clock" in listing  # the check above can fail


def test_the_kit_fixtures_are_absent_unless_enabled(tmp_path: Path) -> None:
    """A test asking for the kit's fixtures errors when the kit is not enabled."""
    (tmp_path / "test_kit.py").write_text(KIT_TESTS)
    code, output = run_pytest(tmp_path)
    assert code != 0 and "fixture 'drive' not found" in output


def test_a_missing_kit_fixture_says_how_to_enable_the_kit(tmp_path: Path) -> None:
    """The error of a test asking for drive without the kit names the three ways to enable it."""
    (tmp_path / "test_kit.py").write_text(KIT_TESTS)
    code, output = run_pytest(tmp_path)
    assert code != 0 and "fixture 'drive' not found" in output
    hint = output[output.index("hookrun: 'drive' is a fixture of hookrun's test kit") :]
    assert "-p hookrun.testing" in hint and "hookrun_testing = true" in hint
    assert 'pytest_plugins = ["hookrun.testing"]' in hint
    code, blocked = run_pytest(tmp_path, "-p", "no:hookrun")
    assert code != 0 and "hookrun's test kit" not in blocked  # the hint is the entry point's


@pytest.mark.parametrize(
    ("args", "ini"),
    [(("-p", "hookrun.testing"), ""), ((), "hookrun_testing = true")],
    ids=["-p", "ini"],
)
def test_enabled_the_kit_runs_on_both_backends(tmp_path: Path, args: tuple[str, ...], ini: str) -> None:
    """Enabled by -p or by the ini setting, a test using drive runs on asyncio and trio,
    without an anyio mark."""
    (tmp_path / "test_kit.py").write_text(KIT_TESTS)
    code, output = run_pytest(tmp_path, *args, ini=ini)
    assert code == 0, output
    assert outcomes(output) == [("test_drive[asyncio]", "PASSED"), ("test_drive[trio]", "PASSED")]


@pytest.mark.parametrize("backends", ["asyncio", "asyncio+uvloop trio"])
def test_backends_come_from_the_ini(tmp_path: Path, backends: str) -> None:
    """hookrun_backends narrows (or widens) the backends."""
    (tmp_path / "test_kit.py").write_text(KIT_TESTS)
    code, output = run_pytest(tmp_path, ini=f"hookrun_testing = true\nhookrun_backends = {backends}")
    assert code == 0, output
    assert outcomes(output) == [(f"test_drive[{name}]", "PASSED") for name in sorted(backends.split())]


def test_an_unknown_backend_is_a_usage_error(tmp_path: Path) -> None:
    """A backend name the kit does not know stops the run at once, naming it."""
    (tmp_path / "test_kit.py").write_text(KIT_TESTS)
    code, output = run_pytest(tmp_path, ini="hookrun_testing = true\nhookrun_backends = curio")
    assert code == 4 and "unknown backend 'curio'" in output


def test_works_with_plugin_autoload_disabled(tmp_path: Path) -> None:
    """With PYTEST_DISABLE_PLUGIN_AUTOLOAD, -p hookrun.testing registers anyio's plugin itself."""
    (tmp_path / "test_kit.py").write_text(KIT_TESTS)
    code, output = run_pytest(
        tmp_path, "-p", "hookrun.testing", env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    )
    assert code == 0, output
    assert len(outcomes(output)) == 2


def test_a_conftest_anyio_backend_still_wins(tmp_path: Path) -> None:
    """A project's own anyio_backend fixture overrides the kit's."""
    (tmp_path / "test_kit.py").write_text(KIT_TESTS)
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(params=['trio'])\n"
        "def anyio_backend(request):\n    return request.param\n"
    )
    code, output = run_pytest(tmp_path, "-p", "hookrun.testing")
    assert code == 0, output
    assert outcomes(output) == [("test_drive[trio]", "PASSED")]
