"""``hookrun demo``: the pipeline it runs (``_pipeline.py``) and its hooks (``_demo_hooks.py``).

Imports anything beneath the public layer (sessions, checkpoints, statistics, the
built-in hooks); only the command line (``hookrun.__main__``) imports it.
"""
