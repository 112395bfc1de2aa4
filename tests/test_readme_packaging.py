"""What ``pip install .`` installs: a wheel with the typing marker, the licence, the metadata and the command."""

from __future__ import annotations

import email.parser
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import hookrun

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """Build the wheel from a copy of the sources (the checkout gets no build/ directory)."""
    tree = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(tree)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (built,) = out.glob("hookrun-*.whl")
    return zipfile.ZipFile(built)


def metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.parser.Parser().parsestr(wheel.read(name).decode())


def test_the_wheel_holds_the_package_and_its_typing_marker(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert "hookrun/py.typed" in names
    assert {"hookrun/__init__.py", "hookrun/__main__.py", "hookrun/_session/_iterate.py", "hookrun/hooks/__init__.py"} <= names
    assert not [n for n in names if n.startswith(("tests/", "examples/", "benchmarks/"))]


def test_the_wheel_carries_the_licence_and_the_metadata(wheel: zipfile.ZipFile) -> None:
    meta = metadata(wheel)
    assert meta["Version"] == hookrun.__version__  # the version has one home: hookrun.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    licence = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert licence and "Apache License" in wheel.read(licence[0]).decode()
    classifiers = meta.get_all("Classifier") or []
    assert len(classifiers) >= 10
    # Older tools know no License-Expression: they read the licence from its classifier.
    assert "License :: OSI Approved :: Apache Software License" in classifiers
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Source", "Issues", "Changelog"}
    assert all(url.startswith("https://") for url in urls.values())
    assert sorted(meta.get_all("Project-URL") or []) == sorted(f"{name}, {url}" for name, url in urls.items())
    extras = set(meta.get_all("Provides-Extra") or [])
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert extras == declared
    assert not extras & {"test", "test-engines", "docs", "dev"}  # dependency groups, for contributors
    assert "anyio<5,>=4.11" in (meta.get_all("Requires-Dist") or [])


def test_the_index_page_is_a_description_of_its_own(wheel: zipfile.ZipFile) -> None:
    """The package index shows the long description: no links relative to a clone, no
    "from a clone" set-up, and the install command and extras a user of the index has."""
    meta = metadata(wheel)
    assert meta["Description-Content-Type"] == "text/markdown"
    description = meta.get_payload()
    assert isinstance(description, str) and description.lstrip().startswith("# hookrun")
    assert not re.findall(r"\]\((?!https://)[^)]*\)", description), "relative links do not work on an index page"
    assert "clone" not in description and ".venv/bin" not in description and "docs/" not in description
    assert "pip install 'hookrun[trio]'" in description and "hookrun demo --backend trio" in description
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = set(re.findall(r"`([a-z]+)`", description.split("Extras:", 1)[1].split(".", 1)[0]))
    assert named == set(extras)  # the contributors' groups are no extras: not in the metadata


def test_the_wheel_installs_the_hookrun_command(wheel: zipfile.ZipFile) -> None:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    assert "hookrun = hookrun.__main__:main" in wheel.read(name).decode()


def test_the_version_is_written_in_one_place_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert (ROOT / "src/hookrun/__init__.py").read_text().count(f'__version__ = "{hookrun.__version__}"') == 1


def test_importing_hookrun_imports_no_optional_engine() -> None:
    code = (
        "import sys, hookrun, hookrun.hooks\n"
        "heavy = {'trio', 'tensorboardX', 'tqdm', 'ray', 'dask', 'numpy', 'uvloop', 'opentelemetry', 'prometheus_client'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_documentation_url_is_where_the_site_is_built_for() -> None:
    """The metadata's Documentation link and the docs site's own address are one URL."""
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    site = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(), flags=re.MULTILINE)
    assert site is not None and site.group(1).rstrip("/") == urls["Documentation"].rstrip("/")
    assert urls["Issues"].startswith(urls["Source"]) and urls["Changelog"].startswith(urls["Source"])
