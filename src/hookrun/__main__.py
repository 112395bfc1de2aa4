"""The ``hookrun`` command (also ``python -m hookrun``): ``hookrun demo`` runs the demo pipeline.

Arguments are checked before anything runs; a bad one is a one-line error on
stderr (exit status 2), never a traceback. The demo prints which backend ran
and where its outputs are.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import logging
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import anyio

from . import __version__

if TYPE_CHECKING:
    from ._demo._pipeline import DemoReport

__all__ = ["main"]

MAX_STEPS = 100_000


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (plus where to find help), not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")


def _steps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of batches, got {text!r}") from None
    if not 0 <= value <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"expected 0 to {MAX_STEPS:,} batches, got {value}")
    return value


def _parser() -> tuple[_Parser, _Parser]:
    parser = _Parser(prog="hookrun", description="hookrun: an async hook runtime for asyncio and trio.")
    parser.add_argument("--version", action="version", version=f"hookrun {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    demo = commands.add_parser(
        "demo",
        help="run a small async pipeline with built-in hooks, a lost worker and its recovery",
        description=(
            "Train a tiny linear model on simulated remote workers, watched by built-in hooks "
            "(progress, step rate, logged metrics, summaries, Chrome traces). The first worker "
            "is lost part-way and re-created; the run ends cleanly when the input is exhausted."
        ),
    )
    demo.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio", help="event loop (default: asyncio)")
    demo.add_argument("--steps", type=_steps, default=30, metavar="N", help="number of batches (default: 30)")
    demo.add_argument(
        "--out", type=Path, default=None, metavar="DIR",
        help=(
            "where summaries, traces and checkpoints go: a new or empty directory; a directory "
            "that holds anything (an earlier run's outputs too) is refused, never overwritten "
            "(default: a new temporary directory)"
        ),
    )
    return parser, demo


def _out_dir(parser: _Parser, given: Path | None) -> Path:
    if given is None:
        return Path(tempfile.mkdtemp(prefix="hookrun-demo-"))
    if given.exists() and not given.is_dir():
        parser.error(f"--out {given} exists and is not a directory")
    if given.is_dir() and any(given.iterdir()):
        # A second run would overwrite an earlier run's files and start again from step 0.
        parser.error(
            f"--out {given} is not empty: the demo writes only into a new or empty directory "
            "(so an earlier run's outputs are never overwritten); give another one, or leave "
            "out --out for a new temporary one"
        )
    try:
        given.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--out {given}: cannot create it ({exc.strerror or exc})")
    return given.resolve()


@contextlib.contextmanager
def _console() -> Iterator[Callable[[str], None]]:
    """How the demo prints: around the progress bar when one is drawn, else plainly (the
    bar itself writes the log lines above it while it is shown)."""
    if importlib.util.find_spec("tqdm") is None or not sys.stderr.isatty():
        yield print
        return
    from tqdm import tqdm

    yield functools.partial(tqdm.write, file=sys.stdout)


def _traces_line(traces: Sequence[Path]) -> str:
    if not traces:
        return "none (a trace is written every 10 steps, never on the first)"
    names = [path.name for path in traces]
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]}, ..., {names[-1]}"
    count = f"{len(names)} Chrome trace{'s' if len(names) != 1 else ''}"
    return f"{traces[0].parent} ({count}: {shown}; open in https://ui.perfetto.dev)"


def _checkpoints_line(report: DemoReport) -> str:
    kept = report.checkpoints
    if not kept:
        return f"{report.checkpoint_dir} (none)"
    # Every one kept, by name: the steps saved are not evenly spaced (the timer restarts
    # when a session is re-created), so a range would misstate them.
    names = ", ".join(Path(info.path).name for info in kept)
    return f"{report.checkpoint_dir} ({len(kept)} kept: {names}; the latest holds step {kept[-1].step} and the model)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser, demo = _parser()
    args = parser.parse_args(argv)
    if args.backend == "trio" and importlib.util.find_spec("trio") is None:
        demo.error("--backend trio needs trio, which is not installed: pip install 'hookrun[trio]'")
    out_dir = _out_dir(demo, args.out)
    # The hooks log through the standard logging module: without this nothing they log shows.
    logging.basicConfig(level=logging.INFO, format="%(levelname)-7s %(name)s: %(message)s")

    from ._demo._pipeline import (  # imported here: `hookrun --help` stays quick
        run_demo,
        statistics_summary,
    )

    print(f"hookrun {__version__} demo: {args.steps} steps on the {args.backend} backend; outputs in {out_dir}", flush=True)
    try:
        with _console() as say:
            report = anyio.run(functools.partial(run_demo, args.steps, out_dir, say=say), backend=args.backend)
    except KeyboardInterrupt:
        print("interrupted: every session and file was closed", file=sys.stderr)
        return 130
    recoveries = report.recoveries
    recovered = {0: "no recovery", 1: "one recovery"}.get(recoveries, f"{recoveries} recoveries")
    sessions = f"{report.sessions} session{'s' if report.sessions != 1 else ''} created"
    print(f"the input ended after {report.steps} steps: the pipeline ended cleanly ({sessions}, {recovered})")
    model = report.model
    print(f"  model:     y = {model.w:.3f} x + {model.b:.3f} (the data follow y = 3 x + 1)")
    print(f"  summaries: {report.summaries} ({report.summary_format})")
    if report.summary_format.startswith("TensorBoard"):
        print(f"             view them with: tensorboard --logdir {report.summaries}")
    print(f"  traces:    {_traces_line(report.traces)}")
    print(f"  checkpoints: {_checkpoints_line(report)}")
    print(f"  backend:   {report.backend}")
    if report.statistics is not None:
        print()
        print(statistics_summary(report.statistics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
