"""The monitored session: its states, entering and closing, recovery, one step, iteration.

Owns ``MonitoredSession`` and ``SingularMonitoredSession`` (``_monitored.py``, which
lists the parts a session composes; their base class: ``_base.py``), the table of their
states (``_state.py``), entering and closing (``_lifecycle.py``), every hook's
``on_exception`` on an exit without ``end`` (``_exits.py``), recovering from a failed
session (``_recovering.py``) under a ``RetryPolicy`` (``_retry.py``), one step at one
lane (``_stepping.py``; ``run``'s plain plan: ``_run.py``), the callers waiting for it
(``_turns.py``) and the notes that name its culprit (``_diagnose.py``), ``iterate``
(``_iterate.py``), which session a per-session hook
serves (``_serving.py``), the checks of what the user hands it (``_checks.py``); steps
in flight with ``max_in_flight > 1``: the lanes and the turnstile that orders the hook
phases (``_lanes.py``), each lane's raw session (``_lane_sessions.py``), admitting and
running the steps (``_in_flight.py``), their ``iterate`` (``_in_flight_iterate.py``,
and how it ends: ``_in_flight_iterate_exits.py``) and ``run_step_fn``
(``_in_flight_step_fn.py``), the tasks that run the steps
``iterate`` admits (``_runners.py``) and installing them
(``_in_flight_setup.py``); and
the raw side: what a session and a session creator are (``_raw.py``), what a creator
may be (``_factories.py``), closing a raw session (``_closing.py``) and lending one
(``_borrowed.py``).

Imports: the shared ``_errors``, ``_log``, ``_global_step``, ``_validate``, ``_inside``
(which sessions the running code is inside a step of: set around every step),
``_cancelling`` (whether the running task is being cancelled), the hook
protocol ``_hook_protocol``, the ``_coordinator`` each session creates, ``_dispatch``
(the phases of hook calls) and ``_observe`` (its statistics). Never ``_checkpoint``
or the built-in hooks: those build on the session.
"""
