"""Checkpoints: the ``Checkpointer``, the file format, the index, the writer threads, the codecs.

Owns saving, listing, finding and restoring the checkpoints of one directory
(``_checkpointer.py``), one checkpoint file, its atomic write and its verification
(``_file.py``), reading a file at the cost of what it holds on disk (``_sparse.py``),
what a set of checkpoints holds and which to keep (``_index.py``), the threads that
write files (``_writer.py``), how state becomes bytes (``_codec.py``) and what goes
into a monitored session's checkpoint (``_checkpointable.py``).

Imports: the shared ``_errors``, ``_log``, ``_global_step`` and ``_validate`` only. It
knows neither hooks nor sessions: the checkpoint saver hook (``hookrun.hooks``) and
the restoring session creators (``_training``) build on it.
"""
