"""Running the hook calls of one phase: plan, start in place, workers, errors, merge, nest.

Owns the dispatcher (``_dispatcher.py``: the table of a phase's paths and the hook
timeout), what each phase calls, decided once when the hooks are frozen
(``_plan.py``), the calls started in place without a task (``_start.py``), the pooled
workers of a phase in which a hook waits (``_workers.py``) and their one-shot
wake-ups (``_wake.py``), which error a failed phase raises (``_failures.py``), merging
what the parties of a step ask for (``_merge.py``), nested fetch structures
(``_nest.py``), hooks built from hooks (``_compose.py``: ``in_thread``,
``sequential``) and freezing a hook list, refusing a plain ``def`` over an async hook
method (``_overrides.py``).

Imports: the shared ``_errors``, ``_log``, ``_validate`` and the hook protocol
``_hook_protocol``. Nothing here knows a monitored session, a coordinator or a
checkpoint: ``_session`` drives these pieces, one phase at a time.
"""
