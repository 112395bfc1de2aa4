"""Running the hook calls of one phase: plan, start in place, workers, errors, merge and nest.

Owns the dispatcher (``_dispatcher.py``, the table of a phase's paths), the plan each
phase calls (``_plan.py``), the calls started in place without a task (``_start.py``),
the pooled workers of a phase in which a hook waits (``_workers.py``) and their
wake-ups (``_wake.py``), which error a failed phase raises (``_failures.py``), merging
what the parties of a step ask for (``_merge.py``), nested fetch structures
(``_nest.py``), hooks built from hooks (``_compose.py``: ``in_thread``, ``sequential``)
and the check that a subclass keeps its async hook methods async (``_overrides.py``).

Imports only the shared modules beneath it: ``_errors``, ``_log``, ``_validate`` and
the hook protocol ``_hook_protocol``. Nothing here knows a monitored session.
"""
