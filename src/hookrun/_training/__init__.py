"""TensorFlow's training assembly: ``MonitoredTrainingSession`` and the checkpoint-aware creators.

Owns ``MonitoredTrainingSession`` (``_monitored_training.py``: a ``MonitoredSession``
with TensorFlow's default hooks and creator) and ``ChiefSessionCreator`` /
``WorkerSessionCreator`` (``_creators.py``: restore the latest valid checkpoint, or
wait for the chief).

Sits on top of the runtime: imports ``_session``, ``_checkpoint``, ``_observe``, the
built-in hooks (``hookrun.hooks``) and the shared modules. Nothing imports it but the
public layer.
"""
