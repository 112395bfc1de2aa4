"""The monitored session: its states, entering and closing, recovery, stepping, iteration.

Owns ``MonitoredSession`` and ``SingularMonitoredSession`` (``_monitored.py``), the
table of their states (``_state.py``), entering and closing (``_lifecycle.py``), every
hook's ``on_exception`` on an exit without ``end`` (``_exits.py``), creating and
recovering the raw session (``_recovering.py``) under a ``RetryPolicy`` (``_retry.py``),
one step (``_stepping.py``) and the notes that name its culprit (``_diagnose.py``),
``iterate`` (``_iterate.py``), which session a per-session hook serves
(``_serving.py``); and the raw side: what a session and a session creator are
(``_raw.py``), what a creator may be (``_factories.py``), closing a raw session
(``_closing.py``) and lending one (``_borrowed.py``).

Imports the shared modules (``_errors``, ``_log``, ``_global_step``, ``_validate``, ``_hook_protocol``),
``_coordinator``, ``_dispatch`` and ``_observe``; never ``_checkpoint`` or the built-in
hooks.
"""
