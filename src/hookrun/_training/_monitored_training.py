"""``MonitoredTrainingSession``: a ``MonitoredSession`` assembled the way TensorFlow's
``MonitoredTrainingSession`` assembles it.

Pure assembly on the public ``MonitoredSession`` API: it resolves TensorFlow's
defaults (a checkpoint every 600 s and summaries every 100 steps unless told
otherwise), builds the default hooks in TensorFlow's order (chief-only hooks,
step counter, summary saver, checkpoint saver, then the user's hooks), and the
creator: on the chief a restoring ``ChiefSessionCreator`` (which the session binds
to its hooks and step counter), elsewhere a ``WorkerSessionCreator`` that waits
for the chief.
"""

from __future__ import annotations

import enum
import importlib.util
import os
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, Literal

from .._checkpoint._checkpointer import Checkpointer
from .._global_step import StepCounter
from .._observe._statistics import StatisticsOptions
from .._session._monitored import MonitoredSession
from .._session._raw import SessionFactory
from .._session._retry import RetryPolicy
from .._validate import check_flag, check_int, check_number, check_path
from ._creators import ChiefSessionCreator, WorkerSessionCreator

__all__ = ["USE_DEFAULT", "MonitoredTrainingSession"]


class _Default(enum.Enum):
    USE_DEFAULT = "USE_DEFAULT"

    def __repr__(self) -> str:
        return "USE_DEFAULT"


#: "Not given": the argument takes TensorFlow's default, which depends on its partner.
USE_DEFAULT = _Default.USE_DEFAULT

Seconds = float | None | Literal[_Default.USE_DEFAULT]
Steps = int | None | Literal[_Default.USE_DEFAULT]


def resolve_pair(kind: str, secs: Seconds, steps: Steps, default_secs: float | None, default_steps: int | None) -> tuple[float | None, int | None]:
    """TensorFlow's resolution of a secs/steps pair; both given is a ``ValueError``."""
    if secs is USE_DEFAULT and steps is USE_DEFAULT:
        return default_secs, default_steps
    resolved_secs = None if secs is USE_DEFAULT else secs
    resolved_steps = None if steps is USE_DEFAULT else steps
    if resolved_secs is not None and resolved_steps is not None:
        raise ValueError(
            f"MonitoredTrainingSession: give save_{kind}_secs or save_{kind}_steps, not both "
            f"(got save_{kind}_secs={resolved_secs!r} and save_{kind}_steps={resolved_steps!r})"
        )
    check_number(f"MonitoredTrainingSession: save_{kind}_secs", resolved_secs, minimum=None, optional=True)
    check_int(f"MonitoredTrainingSession: save_{kind}_steps", resolved_steps, minimum=None, optional=True)
    # A value of 0 or less disables that saver, as in TensorFlow.
    if resolved_secs is not None and resolved_secs <= 0:
        resolved_secs = None
    if resolved_steps is not None and resolved_steps <= 0:
        resolved_steps = None
    return resolved_secs, resolved_steps


class MonitoredTrainingSession(MonitoredSession):
    """A :class:`MonitoredSession` with TensorFlow's default training hooks and creators.

    ``session_factory`` (sync or async, no arguments) makes the raw session.
    On the chief (``is_chief=True``) the hooks are, in call order:
    ``chief_only_hooks``; a ``StepCounterHook`` every ``log_step_count_steps``
    steps (when there is a summary directory or ``summary_writer``); a
    ``SummarySaverHook`` of ``summary_scalars`` every ``save_summaries_steps``
    steps or ``save_summaries_secs`` seconds; a ``CheckpointSaverHook`` into
    ``checkpoint_dir`` every ``save_checkpoint_secs`` seconds or
    ``save_checkpoint_steps`` steps; then ``hooks``. Unless given, checkpoints
    come every 600 s and summaries every 100 steps; both of a pair given is a
    ``ValueError``; 0 disables. ``summary_dir`` defaults to ``checkpoint_dir``
    (TensorBoard files need ``hookrun[tensorboard]``; without it, a defaulted
    summary directory only logs). Every session — at start and on each
    recovery — is restored from the latest valid checkpoint in
    ``checkpoint_dir``: the step counter, the session's state and every
    checkpointable hook (and ``checkpointables``).

    On another worker only ``hooks`` run, and sessions are created once the
    chief is ready (``ready``, or the first valid checkpoint), waiting at most
    ``max_wait_secs``.

    Args:
        session_factory: Makes each raw session: a function of no arguments, ``async def``
            or plain.
        is_chief: Whether this process saves checkpoints and summaries and restores
            sessions; another worker waits for the chief and runs ``hooks`` only.
        checkpoint_dir: Where checkpoints are saved and restored from. ``None``: no
            checkpoints.
        hooks: Your hooks, called after the default ones, on every worker.
        chief_only_hooks: Hooks run on the chief only, called first.
        save_checkpoint_secs: Seconds between checkpoints (600 unless either is given); 0 or
            ``None``: none by time.
        save_checkpoint_steps: Steps between checkpoints instead; giving both is a
            ``ValueError``.
        save_summaries_steps: Steps between summaries of ``summary_scalars`` (100 unless
            either is given).
        save_summaries_secs: Seconds between summaries instead; giving both is a
            ``ValueError``.
        log_step_count_steps: Steps between ``global_step/sec`` lines (a
            ``StepCounterHook``); ``None`` or 0: none.
        summary_dir: Where summaries go. ``None``: ``checkpoint_dir``.
        stop_grace_period_secs: Seconds the coordinator's background tasks get to finish
            when the session closes.
        max_wait_secs: On a worker, seconds to wait for the chief before a ``TimeoutError``.
        summary_scalars: The fetch keys written as summaries: a mapping tag → key, or keys
            that are their own tags.
        summary_writer: A ``SummaryWriter`` to write summaries with, instead of TensorBoard
            files in ``summary_dir``.
        checkpointer: A ``Checkpointer`` to save and restore with, instead of one over
            ``checkpoint_dir``.
        checkpointables: More ``Checkpointable`` objects (not hooks) saved and restored with
            every checkpoint.
        ready: On a worker, when the chief is ready: an awaitable, or a callable returning
            an awaitable or a truth value. ``None``: the chief's first checkpoint.
        step_counter: The global step counter. ``None``: a new ``LocalStepCounter``.
        retry: How recovery waits and when it gives up. ``None``: ``RetryPolicy()``, which
            retries for ever.
        recoverable: Exception types that mean a lost session too, besides ``AbortedError``
            and ``UnavailableError``.
        retry_on: Errors of the session's run retried on the same session, following
            ``retry`` (no new session; the hooks see the step once).
        hook_timeout: Seconds a call of an async hook method may take before
            ``HookTimeoutError``. ``None``: no limit.
        statistics: ``True`` keeps the session's statistics, ``False`` keeps none, a
            ``StatisticsOptions`` says how.
        max_in_flight: How many steps may run at once, each on a lane of its own.
    """

    def __init__(
        self,
        session_factory: SessionFactory,
        *,
        is_chief: bool = True,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        hooks: Iterable[object] = (),
        chief_only_hooks: Iterable[object] = (),
        save_checkpoint_secs: Seconds = USE_DEFAULT,
        save_checkpoint_steps: Steps = USE_DEFAULT,
        save_summaries_steps: Steps = USE_DEFAULT,
        save_summaries_secs: Seconds = USE_DEFAULT,
        log_step_count_steps: int | None = 100,
        summary_dir: str | os.PathLike[str] | None = None,
        stop_grace_period_secs: float = 120,
        max_wait_secs: float = 7200,
        summary_scalars: Mapping[str, Hashable] | Iterable[str] = (),
        summary_writer: Any = None,
        checkpointer: Checkpointer | None = None,
        checkpointables: Iterable[object] = (),
        ready: Awaitable[object] | Callable[[], object] | None = None,
        step_counter: StepCounter | None = None,
        retry: RetryPolicy | None = None,
        recoverable: Iterable[type[BaseException]] = (),
        retry_on: Iterable[type[BaseException]] = (),
        hook_timeout: float | None = None,
        statistics: bool | StatisticsOptions = True,
        max_in_flight: int = 1,
    ) -> None:
        _check_arguments(is_chief, checkpoint_dir, summary_dir, log_step_count_steps, stop_grace_period_secs, max_wait_secs)
        ckpt_secs, ckpt_steps = resolve_pair("checkpoint", save_checkpoint_secs, save_checkpoint_steps, 600.0, None)
        sum_secs, sum_steps = resolve_pair("summaries", save_summaries_secs, save_summaries_steps, None, 100)
        if checkpointer is not None and checkpoint_dir is None:
            checkpoint_dir = checkpointer.directory
        if checkpoint_dir is not None and checkpointer is None and is_chief:
            checkpointer = Checkpointer(checkpoint_dir)
        self.is_chief = bool(is_chief)
        self.checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        self.checkpointer = checkpointer
        user_hooks = list(hooks)
        extra = list(checkpointables)
        if not self.is_chief:
            self.session_creator: ChiefSessionCreator | WorkerSessionCreator = WorkerSessionCreator(
                session_factory, ready, max_wait_secs, checkpoint_dir=checkpoint_dir,
                checkpoint_basename=checkpointer.basename if checkpointer is not None else "ckpt",
            )
            all_hooks = user_hooks
        else:
            chief_hooks = list(chief_only_hooks)
            all_hooks = [
                *chief_hooks,
                *_summary_hooks(summary_dir, checkpoint_dir, summary_writer, log_step_count_steps,
                                sum_secs, sum_steps, summary_scalars),
                *_checkpoint_hooks(checkpointer, ckpt_secs, ckpt_steps, extra),
                *user_hooks,
            ]
            # The session binds the creator to its hooks and step counter; the extra
            # checkpointables are not hooks, so the creator is told about them.
            self.session_creator = ChiefSessionCreator(session_factory, checkpointer=checkpointer, checkpointables=extra)
        super().__init__(
            self.session_creator,
            all_hooks,
            stop_grace_period=stop_grace_period_secs,
            retry=retry,
            recoverable=recoverable,
            retry_on=retry_on,
            step_counter=step_counter,
            hook_timeout=hook_timeout,
            statistics=statistics,
            max_in_flight=max_in_flight,
        )

    async def __aenter__(self) -> MonitoredTrainingSession:
        await super().__aenter__()
        return self


def _check_arguments(
    is_chief: object, checkpoint_dir: object, summary_dir: object, log_step_count_steps: object,
    stop_grace_period_secs: object, max_wait_secs: object,
) -> None:
    """The arguments passed on to other constructors, checked under the names given here."""
    owner = "MonitoredTrainingSession"
    check_flag(f"{owner}: is_chief", is_chief)
    check_path(f"{owner}: checkpoint_dir", checkpoint_dir, optional=True)
    check_path(f"{owner}: summary_dir", summary_dir, optional=True)
    check_int(f"{owner}: log_step_count_steps", log_step_count_steps, minimum=None, optional=True)
    check_number(f"{owner}: stop_grace_period_secs", stop_grace_period_secs, unit="seconds")
    check_number(f"{owner}: max_wait_secs", max_wait_secs, strict=True, unit="seconds")


def _summary_hooks(
    summary_dir: str | os.PathLike[str] | None,
    checkpoint_dir: str | os.PathLike[str] | None,
    writer: Any,
    log_step_count_steps: int | None,
    secs: float | None,
    steps: int | None,
    scalars: Mapping[str, Hashable] | Iterable[str],
) -> list[object]:
    from ..hooks import StepCounterHook, SummarySaverHook

    output_dir = summary_dir
    if output_dir is None and checkpoint_dir is not None and writer is None:
        # A summary directory defaulted from the checkpoint directory writes TensorBoard
        # files only when tensorboardX is installed; otherwise the step counter just logs.
        output_dir = checkpoint_dir if importlib.util.find_spec("tensorboardX") is not None else None
        if output_dir is None:
            return [StepCounterHook(every_n_steps=log_step_count_steps)] if _enabled(log_step_count_steps) else []
    if output_dir is None and writer is None:
        return []
    made: list[object] = []
    if _enabled(log_step_count_steps):
        made.append(StepCounterHook(every_n_steps=log_step_count_steps, output_dir=output_dir, summary_writer=writer))
    if (secs is not None or steps is not None) and scalars:
        made.append(SummarySaverHook(save_steps=steps, save_secs=secs, output_dir=output_dir,
                                     summary_writer=writer, scalars=scalars))
    return made


def _enabled(value: int | None) -> bool:
    return value is not None and value > 0


def _checkpoint_hooks(
    checkpointer: Checkpointer | None, secs: float | None, steps: int | None, extra: list[object]
) -> list[object]:
    """The saver: the session binds it to its hooks; ``extra`` are the checkpointables that are not hooks."""
    if checkpointer is None or (secs is None and steps is None):
        return []
    from ..hooks import CheckpointSaverHook

    return [CheckpointSaverHook(save_secs=secs, save_steps=steps, checkpointer=checkpointer, checkpointables=extra)]
