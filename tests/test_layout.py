"""The layout of ``src/hookrun``: one subsystem per subpackage, imports that go one way
between subsystems, names that do not read alike, and a test folder per subsystem."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "hookrun"

#: The subsystems, lowest first: each imports only subsystems listed before it. A
#: subsystem is a top-level module of ``hookrun`` (the shared pieces), a subpackage, or
#: ``hookrun`` itself (its ``__init__``, the public layer). The subpackages' docstrings
#: say the same, each naming what it imports.
LAYERS = [
    # shared pieces, imported from everywhere
    "_errors",
    "_log",
    "_public",
    "_pytest_options",
    "_global_step",
    "_validate",
    "_timer",
    "_inside",
    "_cancelling",
    "_coordinator",
    "_hook_protocol",
    # the runtime
    "_dispatch",
    "_observe",
    "_checkpoint",
    "_session",
    "remote",
    # built on the runtime
    "hooks",
    "_training",
    "_demo",
    "testing",
    "ray",
    "dask",
    # entry points and the public layer
    "_pytest_entry",
    "hookrun",
    "__main__",
]


def modules() -> Iterator[tuple[str, Path]]:
    """Every module of the package, by dotted name."""
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def subsystem(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "hookrun"


def is_module(dotted: str) -> bool:
    path = SRC.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """The hookrun modules ``module`` imports, anywhere in it (top level, functions,
    ``TYPE_CHECKING`` blocks), with the line of each import."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names if alias.name.split(".")[0] == "hookrun")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            elif (node.module or "").split(".")[0] == "hookrun":
                target = node.module or ""
            else:
                continue
            for alias in node.names:
                name = f"{target}.{alias.name}"
                yield (name if is_module(name) else target), node.lineno


def subsystem_imports() -> dict[str, dict[str, list[str]]]:
    """Subsystem -> the other subsystems it imports -> where (``module:line``)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, path in modules():
        source = subsystem(module)
        for target, line in imported(module, path):
            if subsystem(target) != source:
                graph.setdefault(source, {}).setdefault(subsystem(target), []).append(f"{module}:{line}")
    return graph


def test_every_subsystem_is_declared_in_the_layer_order() -> None:
    """A new top-level module or subpackage takes its place in ``LAYERS``."""
    found = {subsystem(module) for module, _ in modules()}
    assert found == set(LAYERS), f"declare {sorted(found - set(LAYERS))}, drop {sorted(set(LAYERS) - found)}"


def test_subsystems_import_only_those_beneath_them() -> None:
    """Imports between subsystems go one way (so the graph has no cycle), lazy ones too."""
    rank = {name: index for index, name in enumerate(LAYERS)}
    upward = [
        f"{source} imports {target} ({', '.join(where)})"
        for source, targets in subsystem_imports().items()
        for target, where in targets.items()
        if rank[target] >= rank[source]
    ]
    assert not upward, "\n".join(upward)


def test_each_subpackage_docstring_says_what_it_owns_and_imports() -> None:
    """The ``__init__`` docstring of each private subpackage names every subsystem it imports."""
    graph = subsystem_imports()
    packages = sorted(p.parent.name for p in SRC.glob("_*/__init__.py"))
    assert packages, "no private subpackages"
    for package in packages:
        doc = ast.get_docstring(ast.parse((SRC / package / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.split()) > 20, f"{package}/__init__.py needs a docstring saying what it owns"
        unnamed = [target for target in graph.get(package, {}) if f"``{target}``" not in doc]
        assert not unnamed, f"{package}/__init__.py imports {unnamed} but its docstring does not say so"


def _read_alike(a: str, b: str) -> bool:
    """Equal but for underscores, or one letter added, dropped or changed."""
    if a.replace("_", "") == b.replace("_", ""):
        return True
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) == 1
    short, long = sorted((a, b), key=len)
    return len(long) - len(short) == 1 and any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def test_no_two_module_names_read_alike() -> None:
    """No two modules or packages whose names differ by a letter or an underscore
    (``_session`` / ``_sessions``, ``_hooks`` / ``hooks``), and no name used twice except by
    the engine adapters, which mirror each other (``ray/_actor.py``, ``dask/_actor.py``)."""
    places: dict[str, list[str]] = {}
    for path in SRC.rglob("*"):
        if path.name in ("__init__.py", "__main__.py", "__pycache__") or "__pycache__" in path.parts:
            continue
        if path.suffix == ".py" or path.is_dir():
            places.setdefault(path.stem, []).append(str(path.relative_to(SRC)))
    alike = [(a, b) for a, b in itertools.combinations(sorted(places), 2) if _read_alike(a, b)]
    assert not alike, alike
    twice = {
        name: where
        for name, where in places.items()
        if len([p for p in where if p.split("/")[0] not in ("ray", "dask")]) > 1
    }
    assert not twice, twice


def test_tests_mirror_the_subsystems() -> None:
    """Each subpackage has a test folder of the same name (``_session`` -> ``tests/session``)."""
    packages = {p.parent.name.lstrip("_") for p in SRC.glob("*/__init__.py")}
    assert packages <= {p.name for p in (ROOT / "tests").iterdir() if (p / "__init__.py").is_file()}


def test_no_module_is_over_450_lines() -> None:
    """One concept per module: none grows past 450 lines (most stay under 400)."""
    long = {str(path.relative_to(SRC)): n for _, path in modules() if (n := len(path.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, long
