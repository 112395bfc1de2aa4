"""``python -m benchmarks``: run the benchmark suite (see ``benchmarks/run.py``)."""

import sys

from .run import main

sys.exit(main())
