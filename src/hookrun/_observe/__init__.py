"""What a monitored session shows of itself: statistics and latency histograms.

Owns the always-on statistics collector and its options (``_statistics.py``), the
frozen report it returns and its table (``_report.py``) and the fixed-size latency
histogram (``_histogram.py``). The logger and the structured fields of its records
are used by every subsystem and so are a shared piece, ``hookrun._log``.

Imports: the shared ``_errors``, ``_log`` and ``_validate``, and ``_dispatch`` (the
collector times the calls of a phase's plan). It never imports ``_session``, which
owns one collector per monitored session.
"""
