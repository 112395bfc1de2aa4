"""TensorFlow's training assembly: ``MonitoredTrainingSession`` and the checkpoint-aware creators.

Owns ``MonitoredTrainingSession`` (``_monitored_training.py``: a ``MonitoredSession``
with TensorFlow's default hooks and creator) and ``ChiefSessionCreator`` /
``WorkerSessionCreator`` (``_creators.py``: restore the latest valid checkpoint into
every session, or wait until the chief has one).

Imports: ``_session``, ``_checkpoint``, ``_observe``, the built-in ``hooks`` and the
shared ``_global_step``, ``_log`` and ``_validate``; it sits on top of the runtime,
and only the public layer imports it.
"""
