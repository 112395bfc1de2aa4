"""``python -m hookrun demo``: run the example pipeline on the default embedded setup."""

from __future__ import annotations

import argparse
import logging
import sys

import anyio

from ._demo import demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hookrun")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("demo", help="run a small async pipeline with hooks and recovery")
    run.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    run.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    anyio.run(demo, args.steps, backend=args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
