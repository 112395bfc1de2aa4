"""What a monitored session lets you see of itself: statistics and latency histograms.

Owns the always-on statistics collector and its options (``_statistics.py``), the
frozen record it returns and its table (``_record.py``) and the fixed-size latency
histogram (``_histogram.py``). The logger and the structured fields of its records
are shared by every subsystem and live beside the errors, in ``hookrun._log``.

Imports the shared modules (``_errors``, ``_log``, ``_validate``) and ``_dispatch``
(the collector times the calls of a phase's plan); never a session.
"""
