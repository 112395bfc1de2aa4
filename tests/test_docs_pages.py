"""The documentation pages agree with each other and with the package: bounds, links, the
lifecycle picture, the stylesheet."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def one_line(text: str) -> str:
    return " ".join(text.split())


RESUME_BOUND = one_line(
    """a pipeline resumed from its latest valid checkpoint runs again (at least once more)
    every step that checkpoint does not hold: the steps admitted but not yet through
    `after_run` when it stopped, plus the steps whose checkpoint was still being
    written (one write at a time: at most `save_steps` of them), plus the steps
    through `after_run` since that save (fewer than `save_steps`). With
    `save_steps=k`, that is at most 2k - 1 steps more than were admitted but not yet
    through `after_run`; with `save_secs`, every step of the last two save periods."""
)


def test_in_flight_and_checkpoints_state_the_same_resume_bound() -> None:
    """Both pages say, word for word, which steps a resumed pipeline runs again."""
    for name in ("in-flight.md", "checkpoints.md"):
        assert RESUME_BOUND in one_line(page(name)), name
    assert "N-1 steps that were in flight" not in one_line(page("in-flight.md"))


def test_the_quick_start_shows_what_it_prints_where_the_docs_show_it() -> None:
    """Home and Getting started print, under the quick start, exactly its output."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True, text=True, timeout=60, check=True
    )
    for name in ("index.md", "getting-started.md"):
        text = page(name)
        after = text.split('--8<-- "examples/quickstart.py"\n```\n', 1)[1]
        shown = re.search(r"```text\n(.*?)```", after, flags=re.DOTALL)
        assert shown is not None and after.index("```text") < after.index("\n#"), name
        assert shown.group(1) == done.stdout, name


def test_the_concepts_page_draws_the_lifecycle_in_call_order() -> None:
    """One picture: entering, each step, recovery, leaving, with every hook method in order."""
    text = page("concepts.md")
    section = text.split("### The lifecycle at a glance", 1)[1].split("\n#", 1)[0]
    (picture,) = re.findall(r"```text\n(.*?)```", section, flags=re.DOTALL)
    stages = ["entering", "each step", "a recoverable", "leaving"]
    calls = [
        "begin()", "after_create_session(", "before_run(", "session.run(", "after_run(",
        "after_create_session(", "before_run, run, after_run", "end(session)", "on_exception(",
    ]
    at = [picture.index(f"+-- {stage} ") for stage in stages]
    assert at == sorted(at)
    position = 0
    for call in calls:
        position = picture.index(call, position) + 1
    assert max(len(line) for line in picture.splitlines()) <= 84  # no scrolling at desktop widths


def test_steps_in_flight_is_linked_from_the_readme_and_the_home_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/in-flight.md)" in readme
    assert "](in-flight.md)" in page("index.md")


def css_rules() -> dict[str, dict[str, str]]:
    """The site's own stylesheet: selector -> {property: value}."""
    css = re.sub(r"/\*.*?\*/", "", (DOCS / "stylesheets" / "extra.css").read_text(encoding="utf-8"), flags=re.DOTALL)
    rules = {}
    for selector, body in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        declarations = (part.split(":", 1) for part in body.split(";") if ":" in part)
        rules[" ".join(selector.split())] = {name.strip(): value.strip() for name, value in declarations}
    return rules


def test_the_copy_button_has_a_column_of_its_own_beside_the_code() -> None:
    """At phone widths the button covered the end of one-line blocks: the code block keeps
    a right padding outside the code's scrolling box, where the button sits."""
    rule = css_rules()[".md-typeset .highlight pre"]
    assert float(rule["padding-right"].removesuffix("rem")) >= 1.8  # the button and its margin
    assert rule["background-color"] == "var(--md-code-bg-color)"  # the column looks like the block


def test_names_in_table_cells_do_not_break_mid_word() -> None:
    rule = css_rules()[".md-typeset table:not([class]) code"]
    assert rule == {"word-break": "normal", "overflow-wrap": "normal"}
    assert "stylesheets/extra.css" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


#: Python blocks shown but not run, each with its reason.
NOT_RUN = {
    # TensorFlow's own hook, the code a port starts from: TensorFlow is no dependency.
    ("porting-tensorflow.md", "class LossLogger(tf.compat.v1.train.SessionRunHook):"),
    # A codec for PyTorch tensors: PyTorch is no dependency.
    ("checkpoints.md", "class TorchCodec:"),
    # A three-line sketch of the argument, opening the page.
    ("in-flight.md", "async with MonitoredSession(creator, hooks, max_in_flight=8) as sess:"),
    # A driver joining a cluster of several machines by their addresses (HEAD_IP, ...):
    # the engine suites start such clusters on loopback and run the same calls.
    ("distributed.md", 'ray.init(address="HEAD_IP:6379")            # or address="auto" on a node of the cluster'),
    ("distributed.md", 'client = distributed.Client("tcp://SCHEDULER_IP:8786")   # synchronous, before the event loop'),
    # One line: the environment of a process joining the loopback-only Ray of init_local.
    ("distributed.md", "env = {**os.environ, **hookrun.ray.LOOPBACK_ENV}    # for a process joining init_local's Ray"),
}


def test_every_python_block_of_the_docs_comes_from_a_tested_example_or_is_run() -> None:
    """A block is a snippet of examples/ (which the tests run), or a block of the testing
    page (run as one module by tests/testing/test_docs.py), or one of ``NOT_RUN``."""
    not_run = set()
    for path in sorted(DOCS.rglob("*.md")):
        name = str(path.relative_to(DOCS))
        for block in re.findall(r"^```python\n(.*?)^```$", path.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE):
            included = re.fullmatch(r'(--8<-- "examples/[\w/]+\.py(:[\w-]+)?"\n)+', block)
            if included or name == "testing.md":
                continue
            not_run.add((name, block.splitlines()[0]))
    assert not_run == NOT_RUN
