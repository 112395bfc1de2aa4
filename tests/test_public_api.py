"""The public names a user reaches from ``import hookrun`` alone."""

from __future__ import annotations

import ast
import html
import inspect
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

import hookrun


def _run_fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing of hookrun imported yet)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_hooks_subpackage_is_reachable_right_after_import_hookrun(backend: str) -> None:
    # The docs' decorator example, as written, in a fresh process on each backend.
    out = _run_fresh(
        f"""
        import sys
        import anyio
        import hookrun

        assert "hookrun.hooks" not in sys.modules, "import hookrun must stay light"
        seen = []

        @hookrun.hooks.on_after_run(every_n_steps=2)
        def report(run_context, run_values):
            seen.append(run_values.global_step)

        async def main():
            async def create():
                return hookrun.StepSession(lambda feeds: {{}})
            hooks = [hookrun.hooks.StopAtStepHook(num_steps=4), report]
            async with hookrun.MonitoredSession(create, hooks) as sess:
                while not sess.should_stop():
                    await sess.run()

        anyio.run(main, backend={backend!r})
        print(seen)
        """
    )
    assert out.strip() == "[1, 3]"


def test_import_hookrun_does_not_import_the_hooks_or_optional_engines() -> None:
    out = _run_fresh(
        """
        import sys
        import hookrun
        heavy = ["hookrun.hooks", "tensorboardX", "tqdm", "numpy", "ray", "dask", "trio"]
        print([name for name in heavy if name in sys.modules])
        """
    )
    assert out.strip() == "[]"


def test_when_is_exported_at_the_top_level_like_every_and_at_step() -> None:
    assert hookrun.when is hookrun.hooks.when
    assert {"when", "every", "at_step", "hooks"} <= set(hookrun.__all__)
    assert {"when", "hooks"} <= set(dir(hookrun))
    fires = hookrun.when(lambda step: step % 3 == 0)
    assert fires.should_fire(3, 0.0) and not fires.should_fire(4, 0.0)


def test_unknown_attribute_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        hookrun.nope  # noqa: B018


def test_borrowed_is_exported_at_the_top_level() -> None:
    assert "borrowed" in hookrun.__all__ and "borrowed" in dir(hookrun)
    assert hookrun.borrowed.__module__ == "hookrun"


# -- public module paths ----------------------------------------------------------------------

PACKAGES = ["hookrun", "hookrun.hooks", "hookrun.testing", "hookrun.remote"]
ENGINE_PACKAGES = ["hookrun.ray", "hookrun.dask"]

_CHECK_PATHS = """
import importlib, inspect, json, sys
seen = {}
for package in sys.argv[1:]:
    module = importlib.import_module(package)
    for name in module.__all__:
        obj = getattr(module, name)
        if isinstance(obj, type) or inspect.isfunction(obj):
            home = importlib.import_module(obj.__module__)
            seen[f"{package}.{name}"] = [obj.__module__, getattr(home, obj.__qualname__, None) is obj]
print(json.dumps(seen))
"""


def _public_paths(*packages: str) -> dict[str, list[object]]:
    import json

    done = subprocess.run(
        [sys.executable, "-c", _CHECK_PATHS, *packages], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    paths: dict[str, list[object]] = json.loads(done.stdout)
    return paths


def _check_public(paths: dict[str, list[object]]) -> None:
    assert paths
    for name, (module, found) in paths.items():
        assert not any(part.startswith("_") for part in str(module).split(".")), f"{name}: {module}"
        assert found, f"{name}: {module} does not hold it under its name (pickle would not find it)"


@pytest.mark.parametrize("first", ["hookrun", "hookrun.hooks"])
def test_every_public_class_and_function_names_the_package_it_is_imported_from(first: str) -> None:
    """Tracebacks, reprs, help() and pickle show ``hookrun.X``, never ``hookrun._module.X``,
    whichever package a program imports first."""
    _check_public(_public_paths(first, *PACKAGES))


@pytest.mark.engine
def test_the_engine_adapters_name_their_public_packages() -> None:
    pytest.importorskip("ray")
    pytest.importorskip("distributed")
    _check_public(_public_paths(*ENGINE_PACKAGES))


def test_a_traceback_names_the_public_error() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import hookrun\nraise hookrun.SessionClosedError('the session is closed')"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.stderr.splitlines()[-1] == "hookrun.SessionClosedError: the session is closed"


def test_names_of_both_packages_belong_to_hookrun_hooks_even_when_reached_from_hookrun() -> None:
    out = _run_fresh(
        """
        import hookrun
        print(hookrun.SecondOrStepTimer.__module__, hookrun.every.__module__, hookrun.Checkpointer.__module__)
        """
    )
    assert out.split() == ["hookrun.hooks", "hookrun.hooks", "hookrun"]


# -- exceptions cross process boundaries ------------------------------------------------------


def _example(error: type[BaseException]) -> BaseException:
    """An instance of ``error`` built as hookrun builds it (keyword details included)."""
    import hookrun

    examples: dict[type[BaseException], BaseException] = {
        hookrun.CorruptCheckpointError: hookrun.CorruptCheckpointError("ckpt/model-3.ckpt", "CRC mismatch"),
        hookrun.FeedConflictError: hookrun.FeedConflictError("x fed twice", parties=["a", "b"], keys=["x"]),
        hookrun.HookTimeoutError: hookrun.HookTimeoutError(
            "hook 'Slow' took too long", hook="Slow", phase="before_run", limit=1.5
        ),
    }
    return examples.get(error) or error("something went wrong")


def _public_exceptions(*packages: str) -> list[type[BaseException]]:
    import importlib

    found = []
    for package in packages:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                found.append(obj)
    return found


def _check_round_trip(errors: list[type[BaseException]]) -> None:
    import pickle

    assert errors
    for error in errors:
        original = _example(error)
        copy = pickle.loads(pickle.dumps(original))
        assert type(copy) is error and str(copy) == str(original) and copy.args == original.args, error
        assert vars(copy) == vars(original), error


def test_every_public_exception_survives_pickling() -> None:
    """Ray and Dask ship a worker's exception back to the caller pickled."""
    errors = _public_exceptions(*PACKAGES)
    assert {e.__name__ for e in errors} >= {"SessionClosedError", "CorruptCheckpointError", "NanLossDuringTrainingError"}
    _check_round_trip(errors)


@pytest.mark.engine
def test_the_engine_adapters_exceptions_survive_pickling() -> None:
    pytest.importorskip("ray")
    pytest.importorskip("distributed")
    errors = _public_exceptions(*ENGINE_PACKAGES)
    errors += [error for package in ENGINE_PACKAGES for error in _engine_recoverable(package)]
    _check_round_trip(errors)


def _engine_recoverable(package: str) -> list[type[BaseException]]:
    import importlib

    return [error for error in importlib.import_module(package).RECOVERABLE_ERRORS if error.__module__.startswith("hookrun")]


# -- the API reference as rendered --------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent


def _declared_all(package: str) -> list[str]:
    """A package's ``__all__`` read from its source (the engines need not be installed)."""
    path = ROOT / "src" / Path(*package.split(".")) / "__init__.py"
    if not path.exists():
        path = path.parent.with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            names: list[str] = ast.literal_eval(node.value)
            return names
    raise AssertionError(f"{package} has no __all__")


def _private_names() -> set[str]:
    """Every module-level private name (``_Steppable``, ``_EMPTY``) of hookrun's modules."""
    names = set()
    for path in (ROOT / "src" / "hookrun").rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets: list[str] = []
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                targets = [node.name]
            elif isinstance(node, ast.Assign):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                targets = [node.target.id]
            names |= {n for n in targets if n.startswith("_") and not n.startswith("__")}
    return names


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, set[str]]]:
    """Each rendered page of docs/reference: its text and its anchors."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    pages = {}
    for page in sorted((site / "reference").glob("*/index.html")):
        markup = page.read_text(encoding="utf-8")
        main = markup.split('<article', 1)[1].split("</article>", 1)[0]  # the page, not the navigation
        text = html.unescape(re.sub(r"<[^>]+>", "", main))
        pages[page.parent.name] = (text, set(re.findall(r'id="([^"]+)"', main)))
    return pages


def test_the_reference_renders_every_public_name(reference: dict[str, tuple[str, set[str]]]) -> None:
    anchors = set().union(*(ids for _, ids in reference.values()))
    missing = [
        f"hookrun.{name}" for name in hookrun.__all__
        if name != "hooks" and not {f"hookrun.{name}", f"hookrun.hooks.{name}"} & anchors
    ]
    for package in ("hookrun.hooks", "hookrun.testing", "hookrun.remote", "hookrun.ray", "hookrun.dask"):
        missing += [f"{package}.{name}" for name in _declared_all(package) if f"{package}.{name}" not in anchors]
    # The monitored sessions' methods (SingularMonitoredSession shares them) and properties.
    public = [name for name in dir(hookrun.MonitoredSession) if not name.startswith("_")]
    assert {"global_step", "step_counter", "raw_session"} <= set(public)
    missing += [f"hookrun.MonitoredSession.{n}" for n in public if f"hookrun.MonitoredSession.{n}" not in anchors]
    assert not missing, f"not rendered in docs/reference: {missing}"


def test_the_reference_shows_no_private_path_or_name(reference: dict[str, tuple[str, set[str]]]) -> None:
    private = _private_names()
    assert {"_Steppable", "_EMPTY", "_StopOnException", "_MonitoredSessionBase"} <= private
    for page, (text, ids) in reference.items():
        for where in (text, *ids):
            path = re.search(r"\bhookrun(?:\.\w+)*\._\w+", where)
            assert path is None, f"reference/{page}: private path {path.group(0)!r}"
        leaked = sorted(name for name in private if re.search(rf"(?<![\w.]){re.escape(name)}\b", text))
        assert not leaked, f"reference/{page} shows private names {leaked}"


def test_the_reference_formats_long_signatures(reference: dict[str, tuple[str, set[str]]]) -> None:
    """mkdocstrings formats signatures with ruff (the docs group installs it): one parameter a line."""
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]
    assert any(isinstance(req, str) and req.startswith("ruff") for req in groups["docs"])
    text, _ = reference["checkpoints"]
    signature = text[text.index("MonitoredTrainingSession(") :].split(")\n", 1)[0]
    assert signature.count("\n") > 10 and max(len(line) for line in signature.splitlines()) <= 100


# -- parameters in the reference ---------------------------------------------------------------

#: Constructors and functions whose docstrings list every parameter (an ``Args:`` section,
#: rendered as a table of name, type, meaning and default).
WITH_PARAMETERS = [
    "MonitoredSession", "SingularMonitoredSession", "MonitoredTrainingSession", "ChiefSessionCreator",
    "WorkerSessionCreator", "StepSession", "fetch", "borrowed", "LocalStepCounter", "Checkpointer",
    "hooks.CheckpointSaverHook", "hooks.StopAtStepHook", "hooks.StepCounterHook", "hooks.LoggingTensorHook",
    "hooks.NanTensorHook", "hooks.SummarySaverHook", "hooks.FinalOpsHook", "hooks.FeedFnHook", "hooks.ProfilerHook",
    "Coordinator", "in_thread", "sequential", "latest_checkpoint", "RunOptions", "SessionRunArgs",
    "StatisticsOptions", "PickleCodec", "SecondOrStepTimer", "hooks.OpenTelemetryHook", "hooks.TensorBoardWriter",
    "hooks.chrome_trace", "hooks.read_eval_metrics", "hooks.on_begin", "hooks.on_after_create_session",
    "hooks.on_before_run", "hooks.on_after_run", "hooks.on_end", "hooks.FunctionHook", "hooks.every",
    "hooks.at_step", "hooks.when", "remote.await_future", "testing.MockClock", "RetryPolicy",
    "hooks.EarlyStoppingHook", "hooks.ThresholdStoppingHook", "hooks.StopOnPredicateHook",
    "hooks.stop_if_higher_hook", "hooks.stop_if_lower_hook", "hooks.stop_if_no_increase_hook",
    "hooks.stop_if_no_decrease_hook", "hooks.ProgressBarHook", "hooks.PrometheusHook",
    "hooks.GlobalStepWaiterHook", "hooks.MetricsFileHook", "testing.drive", "testing.RecordingHook",
    "testing.ScriptedSession", "testing.ScriptedCreator", "testing.cancel_after",
]


def _documented_parameters(obj: object) -> list[str]:
    doc = inspect.getdoc(obj) or ""
    assert "\nArgs:\n" in doc, f"{obj!r} has no Args section"
    section = doc.split("\nArgs:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^    (\w+): ", section, flags=re.MULTILINE)


@pytest.mark.parametrize("name", WITH_PARAMETERS)
def test_the_docstring_lists_every_parameter_in_order(name: str) -> None:
    """Each parameter of the signature has a line of its own, in the signature's order."""
    obj: Any = hookrun
    if name.startswith(("remote.", "testing.")):
        import importlib

        obj = importlib.import_module(f"hookrun.{name.split('.')[0]}")
        name = name.split(".", 1)[1]
    for part in name.split("."):
        obj = getattr(obj, part)
    parameters = [p for p in inspect.signature(obj).parameters if p not in ("self", "args", "kwargs")]
    assert _documented_parameters(obj) == parameters


@pytest.mark.parametrize("name", ["MonitoredSession", "SingularMonitoredSession"])
def test_a_monitored_session_names_what_its_creator_may_be(name: str) -> None:
    """``session_creator`` is a ``SessionCreatorLike``: a creator object or a factory, never ``object``."""
    annotation = inspect.signature(getattr(hookrun, name)).parameters["session_creator"].annotation
    assert annotation == "SessionCreatorLike"
    assert hookrun.SessionCreatorLike == hookrun.SessionCreator | hookrun.SessionFactory
    assert inspect.signature(hookrun.MonitoredTrainingSession).parameters["session_factory"].annotation == "SessionFactory"


def test_the_reference_shows_parameter_tables_and_no_bare_object_creator(
    reference: dict[str, tuple[str, set[str]]],
) -> None:
    text, ids = reference["sessions"]
    assert "session_creator: SessionCreatorLike" in text and "session_creator: object" not in text
    assert {"hookrun.SessionCreatorLike", "hookrun.SessionFactory"} <= ids
    assert text.count("Parameters:") >= 5


@pytest.mark.engine
def test_the_engine_adapters_list_their_parameters() -> None:
    """The Ray and Dask sessions, creators and counters list every parameter too."""
    import importlib

    pytest.importorskip("ray")
    pytest.importorskip("distributed")
    for module, names in {
        "hookrun.ray": ["RayActorSessionCreator", "RayStepSession", "RayStepCounter", "init_local"],
        "hookrun.dask": ["DaskStepSession", "DaskActorSessionCreator", "DaskStepCounter"],
    }.items():
        for name in names:
            obj = getattr(importlib.import_module(module), name)
            parameters = [p for p in inspect.signature(obj).parameters if p not in ("args", "kwargs", "options")]
            assert _documented_parameters(obj) == parameters, f"{module}.{name}"
