"""A plain ``def`` overriding an ``async def`` hook method is refused when the hooks are frozen."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import anyio
import pytest

import hookrun
from hookrun import MonitoredSession, SessionRunHook, SingularMonitoredSession, StepSession
from hookrun._dispatch._overrides import check_overrides
from hookrun.hooks import LoggingTensorHook, StepCounterHook, StopAtStepHook, read_eval_metrics


async def _create() -> StepSession:
    return StepSession(lambda feeds: {})


class TfStyleCounter(StepCounterHook):
    """A TensorFlow-style port: plain begin calling the (async) base."""

    def begin(self) -> None:  # type: ignore[override]
        super().begin()  # type: ignore[unused-coroutine]


@pytest.mark.anyio
@pytest.mark.parametrize("session_type", [MonitoredSession, SingularMonitoredSession])
async def test_plain_override_of_an_async_base_method_is_a_type_error(
    session_type: type[Any],
) -> None:
    hook = TfStyleCounter(every_n_steps=1)
    with pytest.raises(TypeError) as caught:
        session_type(_create, [StopAtStepHook(num_steps=1), hook])
    message = str(caught.value)
    assert "hooks[1] (TfStyleCounter)" in message
    assert "TfStyleCounter.begin is a plain 'def'" in message
    assert "'async def' StepCounterHook.begin" in message
    assert "Write 'async def begin(...)' and 'await super().begin(...)'" in message


@pytest.mark.anyio
async def test_the_async_override_runs_the_bases_work(tmp_path: Path) -> None:
    """Written as the message says, the base opens its writer and the rate is recorded."""

    class Ported(StepCounterHook):
        opened = False

        async def begin(self) -> None:
            await super().begin()
            self.opened = True

    hook = Ported(every_n_steps=1, output_dir=tmp_path)
    with anyio.fail_after(10):
        async with MonitoredSession(_create, [hook, StopAtStepHook(num_steps=3)]) as sess:
            while not sess.should_stop():
                await sess.run()
    assert hook.opened
    assert set(read_eval_metrics(tmp_path)) == {2, 3}


def test_plain_overrides_of_plain_methods_and_of_the_no_ops_are_fine() -> None:
    class Plain(SessionRunHook):
        def begin(self) -> None:
            pass

    class PlainOnPlain(LoggingTensorHook):
        def before_run(self, run_context: Any) -> Any:
            return super().before_run(run_context)

    class AsyncOnPlain(Plain):
        async def begin(self) -> None:  # type: ignore[override]
            pass

    for index, hook in enumerate([Plain(), PlainOnPlain(["x"], every_n_iter=1), AsyncOnPlain()]):
        check_overrides(hook, index)


def test_the_culprit_is_found_anywhere_up_the_chain_and_in_duck_typed_hooks() -> None:
    class AsyncBase:  # duck-typed: no SessionRunHook
        async def end(self, session: Any) -> None:
            pass

    class PlainMiddle(AsyncBase):
        def end(self, session: Any) -> None:  # type: ignore[override]
            pass

    class Leaf(PlainMiddle):
        pass

    with pytest.raises(TypeError, match=r"hooks\[3\] \(Leaf\): .*PlainMiddle.end is a plain 'def' "
                       r"overriding the 'async def' .*AsyncBase.end"):
        check_overrides(Leaf(), 3)


def test_members_of_composite_hooks_are_checked() -> None:
    tf_style = TfStyleCounter(every_n_steps=1)
    with pytest.raises(TypeError, match=r"hooks\[0\] member 1 \(TfStyleCounter\)"):
        MonitoredSession(_create, [hookrun.sequential(StopAtStepHook(num_steps=1), tf_style)])


def test_static_and_class_methods_count_by_their_function() -> None:
    class Base(SessionRunHook):
        @staticmethod
        async def begin() -> None:
            pass

    class Child(Base):
        @staticmethod
        def begin() -> None:  # type: ignore[override]
            pass

    with pytest.raises(TypeError, match=r"Child\.begin is a plain 'def'"):
        check_overrides(Child(), 0)


def _builtin_hook_classes() -> list[type]:
    names = hookrun.hooks.__all__
    classes = [getattr(hookrun.hooks, name) for name in names]
    found = [c for c in classes if isinstance(c, type) and issubclass(c, SessionRunHook)]
    # The function hooks' concrete classes live behind the decorators.
    for make in (hookrun.hooks.on_begin, hookrun.hooks.on_after_create_session, hookrun.hooks.on_end,
                 hookrun.hooks.on_before_run, hookrun.hooks.on_after_run):
        found.append(type(make(lambda *args: None)))
    found.append(type(hookrun.hooks.on_after_run(fetches="x")(lambda *args: None)))
    return found


@pytest.mark.parametrize("method", ["begin", "after_create_session", "end", "on_exception"])
def test_every_builtin_hook_implements_lifecycle_methods_as_async_def(method: str) -> None:
    """What subclasses should expect: begin, after_create_session, end and on_exception are 'async def'."""
    for cls in _builtin_hook_classes():
        implementation = getattr(cls, method)
        if implementation is getattr(SessionRunHook, method):
            continue
        assert inspect.iscoroutinefunction(implementation), f"{cls.__name__}.{method} is plain"


def test_the_hook_inside_in_thread_is_checked() -> None:
    class Base(SessionRunHook):
        async def begin(self) -> None:
            pass

    class Blocking(Base):
        def begin(self) -> None:  # type: ignore[override]
            pass

    with pytest.raises(TypeError, match=r"hooks\[0\] member 0 \(Blocking\): .*Blocking\.begin is a plain"):
        MonitoredSession(_create, [hookrun.in_thread(Blocking())])


def test_the_documented_async_run_methods_of_the_builtin_hooks() -> None:
    """docs/hooks.md lists which before_run / after_run are async; this keeps it true."""
    found = set()
    for cls in _builtin_hook_classes():
        for method in ("before_run", "after_run"):
            implementation = getattr(cls, method)
            if implementation is not getattr(SessionRunHook, method) and inspect.iscoroutinefunction(
                implementation
            ):
                found.add(f"{cls.__name__}.{method}")
    assert found == {
        "CheckpointSaverHook.after_run",
        "FeedFnHook.before_run",
        "GlobalStepWaiterHook.before_run",
        "MetricsFileHook.after_run",
        "ProfilerHook.before_run",
        "StopOnPredicateHook.after_run",
        "_BeforeRunHook.before_run",
        "_AfterRunHook.after_run",
        "_FetchingAfterRunHook.after_run",
    }
