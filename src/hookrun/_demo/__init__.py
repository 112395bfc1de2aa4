"""``hookrun demo``: the pipeline it runs (``_pipeline.py``) and its hooks (``_demo_hooks.py``).

A small pipeline of simulated remote workers under the built-in hooks, with a lost
worker, its recovery and a clean end of input.

Imports whatever a user's program would: ``_session``, ``_checkpoint``, ``_observe``,
the built-in ``hooks``, ``_coordinator``, ``_hook_protocol`` and ``_errors``. Only the
command line (``hookrun.__main__``) imports it.
"""
