"""hookrun's benchmark suite: ``python -m benchmarks --help``; see ``docs/benchmarks.md``."""
