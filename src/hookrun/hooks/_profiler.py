"""``ProfilerHook``: trace a step every N steps or seconds into a Chrome trace file.

The hook asks for ``RunOptions(trace=True)`` on due steps; the runtime then
records one ``TimingRecord`` per hook call and one for the session run in the
step's ``RunMetadata``. Because ``after_run`` calls run concurrently, other
hooks' ``after_run`` records of a traced step may be missing while this hook's
own ``after_run`` runs, so the file is written at the next ``before_run`` (or
when the session exits: at ``end``, or in ``on_exception`` after an error or a
cancellation), when the step is complete. Each file is written whole or not at all.

File format: ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData":
{...}}`` with one complete ("X") event per record (``ts``/``dur`` in
microseconds), one thread lane per hook and one for the run, and metadata
("M") events naming the process and lanes: it loads in Perfetto and
chrome://tracing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio

from .._hook_protocol import (
    RunMetadata,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    TimingRecord,
)
from .._timer import Clock, SecondOrStepTimer
from .._validate import check_path
from ._common import TRACE_STEP, check_timer_args, fields, logger
from ._due import DueSteps

__all__ = ["ProfilerHook", "chrome_trace"]



class ProfilerHook(SessionRunHook):
    """Writes ``timeline-<step>.json`` (Chrome trace format) every ``save_steps`` / ``save_secs``.

    Exactly one of the two (TensorFlow's messages). As in TensorFlow, the first
    run only starts the count (it is never traced): with ``save_steps=3`` and a
    counter starting at 0 the runs reaching steps 3, 6, ... are traced, with
    ``save_secs`` the first run traced is the first one ``save_secs`` after the
    first run. ``<step>`` is the global step the traced run reached. Files go to
    ``output_dir`` (default: the current directory), created if missing;
    :attr:`saved_files` lists the paths written. ``clock`` replaces
    :func:`anyio.current_time`.

    Right with steps in flight (``max_in_flight > 1``): whether a step is
    traced is decided in its ``before_run``, counting the steps still in flight
    before it (the first one's ``after_run`` starts the count), and carried in
    its run context; its ``after_run``, in step order, keeps the trace if the
    step is still due then, so the steps traced are those one step at a time
    would trace. A timeline holds its one step: its ``before_run`` phase, its
    run and its ``after_run`` phase. The other steps' runs and hook phases,
    which overlapped it, are not in it; a gap between the end of its run and
    its ``after_run`` phase is the time it waited for the steps before it.

    Args:
        save_steps: Trace one step every this many steps.
        save_secs: Trace one step every this many seconds instead (exactly one of the two).
        output_dir: Where the traces go. ``""``: the current directory.
        clock: A function of no arguments returning seconds. ``None``:
            ``anyio.current_time``.
    """

    overlapping_steps = True

    #: It keeps the state of one session: it serves one monitored session at a time.
    serves_one_session = True

    #: Ask the session to time before_run calls, so traced steps include their spans.
    traces_before_run = True

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: str | os.PathLike[str] = "",
        *,
        clock: Clock | None = None,
    ) -> None:
        check_timer_args("ProfilerHook", "save_secs", save_secs, "save_steps", save_steps)
        check_path("ProfilerHook: output_dir", output_dir)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps, clock=clock)
        self._output_dir = Path(output_dir)
        self._due = DueSteps(self._timer)
        self._primed = False  # the first run has started the count
        #: Traced steps whose after_run is done, written at the next phase or exit.
        self._pending: list[tuple[int, RunMetadata]] = []
        self.saved_files: list[Path] = []

    def __repr__(self) -> str:
        return f"ProfilerHook({self._timer!r}, output_dir={str(self._output_dir)!r})"

    async def begin(self) -> None:
        """Restart the timer; the next first run only starts the count."""
        self._due.reset()
        self._primed = False

    async def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        """Write the traced steps done, then ask for tracing if this step is due."""
        await self._write_pending()
        started = self._due.start(run_context)
        if not self._primed and not self._due.expecting(started):
            # This step's after_run will start the count, at the step it started from.
            self._due.expect(run_context, started)
            due = False
        else:
            due = self._due.due(started, started + 1)
            self._due.expect(run_context, started + 1 if due else None)
        run_context.step_state[self] = due
        return TRACE_STEP if due else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Start the count after the first run; remember a traced step's metadata (it is
        written once the step is complete) if it is still due."""
        started = run_context.global_step
        self._due.done(started)
        if not self._primed:
            # TensorFlow primes the timer with the step the first run started from.
            self._timer.update_last_triggered_step(started)
            self._primed = True
        if run_context.step_state.get(self) and self._timer.should_trigger_for_step(started + 1):
            self._timer.update_last_triggered_step(run_values.global_step)
            self._pending.append((run_values.global_step, run_values.run_metadata))

    async def end(self, session: object) -> None:
        """Write the last traced step, if any."""
        await self._write_pending()

    async def on_exception(self, session: object, exception: BaseException) -> None:
        """Write the last traced step, if any: a trace of the steps before a failure is kept."""
        await self._write_pending()

    async def _write_pending(self) -> None:
        while self._pending:
            step, metadata = self._pending.pop(0)
            await self._write(step, metadata)

    async def _write(self, step: int, metadata: RunMetadata) -> None:
        path = self._output_dir / f"timeline-{step}.json"
        logger.info("Saving timeline for %d into '%s'.", step, path, extra=fields(step, "ProfilerHook"))
        text = json.dumps(chrome_trace(metadata.timings, step=step))
        await anyio.to_thread.run_sync(_write_text, path, text)
        self.saved_files.append(path)


def chrome_trace(timings: list[TimingRecord], *, step: int) -> dict[str, object]:
    """The Chrome trace (JSON object format) of one step's timing records.

    Args:
        timings: The step's timing records (``run_metadata.timings`` of a traced run).
        step: The global step the trace is of.

    Returns:
        The trace, as a JSON object (``json.dump`` it to a ``.json`` file).
    """
    origin = min((record.start for record in timings), default=0.0)
    lanes: dict[tuple[str, str], int] = {("session", "run"): 0}
    events: list[dict[str, object]] = []
    for record in sorted(timings, key=lambda r: r.start):
        lane = ("session", "run") if record.phase == "run" else ("hook", record.name)
        tid = lanes.setdefault(lane, len(lanes))
        events.append(_complete_event(record, origin, tid))
    meta: list[dict[str, object]] = [_name_event("process_name", 0, f"hookrun step {step}")]
    meta += [_name_event("thread_name", tid, name) for (_, name), tid in lanes.items()]
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {"step": step, "tag": f"step_{step}"},
    }


def _complete_event(record: TimingRecord, origin: float, tid: int) -> dict[str, object]:
    label = "run" if record.phase == "run" else f"{record.phase}:{record.name}"
    return {
        "name": label,
        "cat": record.phase,
        "ph": "X",
        "ts": (record.start - origin) * 1e6,
        "dur": max(record.end - record.start, 0.0) * 1e6,
        "pid": 0,
        "tid": tid,
        "args": {"phase": record.phase, "hook": record.name},
    }


def _name_event(kind: str, tid: int, name: str) -> dict[str, object]:
    return {"name": kind, "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}}


def _write_text(path: Path, text: str) -> None:
    """Write atomically: a reader (or a cancelled run) never sees a half-written timeline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
