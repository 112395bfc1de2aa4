"""The public names a user reaches from ``import hookrun`` alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import hookrun


def _run_fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing of hookrun imported yet)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_hooks_subpackage_is_reachable_right_after_import_hookrun(backend: str) -> None:
    # The docs' decorator example, as written, in a fresh process on each backend.
    out = _run_fresh(
        f"""
        import sys
        import anyio
        import hookrun

        assert "hookrun.hooks" not in sys.modules, "import hookrun must stay light"
        seen = []

        @hookrun.hooks.on_after_run(every_n_steps=2)
        def report(run_context, run_values):
            seen.append(run_values.global_step)

        async def main():
            async def create():
                return hookrun.StepSession(lambda feeds: {{}})
            hooks = [hookrun.hooks.StopAtStepHook(num_steps=4), report]
            async with hookrun.MonitoredSession(create, hooks) as sess:
                while not sess.should_stop():
                    await sess.run()

        anyio.run(main, backend={backend!r})
        print(seen)
        """
    )
    assert out.strip() == "[1, 3]"


def test_import_hookrun_does_not_import_the_hooks_or_optional_engines() -> None:
    out = _run_fresh(
        """
        import sys
        import hookrun
        heavy = ["hookrun.hooks", "tensorboardX", "tqdm", "numpy", "ray", "dask", "trio"]
        print([name for name in heavy if name in sys.modules])
        """
    )
    assert out.strip() == "[]"


def test_when_is_exported_at_the_top_level_like_every_and_at_step() -> None:
    assert hookrun.when is hookrun.hooks.when
    assert {"when", "every", "at_step", "hooks"} <= set(hookrun.__all__)
    assert {"when", "hooks"} <= set(dir(hookrun))
    fires = hookrun.when(lambda step: step % 3 == 0)
    assert fires.should_fire(3, 0.0) and not fires.should_fire(4, 0.0)


def test_unknown_attribute_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        hookrun.nope  # noqa: B018


def test_borrowed_is_exported_at_the_top_level() -> None:
    assert "borrowed" in hookrun.__all__ and "borrowed" in dir(hookrun)
    assert hookrun.borrowed.__module__ == "hookrun._borrowed"
