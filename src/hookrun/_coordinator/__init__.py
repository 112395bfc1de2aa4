"""The coordinator: stop requests, the first error, and the background tasks that watch them.

Owns ``Coordinator`` (``_tasks.py``: TensorFlow's ``tf.train.Coordinator`` and
``LooperThread``), and the two calls through which a monitored session opens the
coordinator of each session it creates in a task of its own and closes it
(``open_hosted``, ``close_hosted``).

Imports: the shared ``_errors``, ``_log``, ``_global_step``, ``_validate`` and ``_timer``
(the clock protocol of ``loop``). It knows nothing of hooks or sessions: the hook
protocol hands a coordinator to hooks, and ``_session`` creates one per session.
"""
