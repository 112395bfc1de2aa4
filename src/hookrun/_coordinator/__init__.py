"""The coordinator: stop requests, the first error, and the background tasks that watch them.

Owns ``Coordinator`` (``_tasks.py``: TensorFlow's ``tf.train.Coordinator``, hosting
the background tasks in a task group of its own, and the three calls through which a
monitored session opens the coordinator of each session it creates in a task of its
own, closes it, and hears of its stop requests: ``open_hosted``, ``close_hosted`` and
``watch_stops``); its stop flag and first-error slot, and waiting on them without
polling (``StopSignal``, ``_signal.py``); and the task of ``Coordinator.loop``
(``_looper.py``: TensorFlow's ``LooperThread``). The signal knows no tasks; the looper uses the coordinator's
public API only.

Imports: the shared ``_errors``, ``_log``, ``_global_step``, ``_validate``, ``_timer``
(the clock protocol of ``loop``) and ``_inside`` (a task it starts is inside no step). It knows nothing of hooks or sessions: the hook
protocol hands a coordinator to hooks, and ``_session`` creates one per session.
"""
