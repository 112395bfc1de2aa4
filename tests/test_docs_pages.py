"""The documentation pages agree with each other and with the package: bounds, links, the
lifecycle picture, the stylesheet."""

from __future__ import annotations

import re
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
    `save_steps=k`, that is at most 2k − 1 steps more than were admitted but not yet
    through `after_run`; with `save_secs`, every step of the last two save periods."""
)


def test_in_flight_and_checkpoints_state_the_same_resume_bound() -> None:
    """Both pages say, word for word, which steps a resumed pipeline runs again."""
    for name in ("in-flight.md", "checkpoints.md"):
        assert RESUME_BOUND in one_line(page(name)), name
    assert "N-1 steps that were in flight" not in one_line(page("in-flight.md"))
