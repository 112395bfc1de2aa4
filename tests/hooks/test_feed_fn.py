"""FeedFnHook (TF basic_session_run_hooks_test 164)."""

from __future__ import annotations

import pytest

from hookrun.hooks import FeedFnHook, StopAtStepHook

from ._support import drive


def test_feed_fn_must_be_callable() -> None:
    """A non-callable feed_fn is a TypeError at construction."""
    with pytest.raises(TypeError, match="feed_fn must be callable"):
        FeedFnHook({"x": 1})  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_feeding_placeholder(session_kind: str) -> None:
    """The callable's feeds are applied on every run."""
    counter = iter(range(100))
    hook = FeedFnHook(lambda: {"x": next(counter)})
    results = await drive(
        [hook, StopAtStepHook(num_steps=3)], lambda i: {}, kind=session_kind, fetches="x"
    )
    assert results == [0, 1, 2]


@pytest.mark.anyio
async def test_async_feed_fn_is_awaited(session_kind: str) -> None:
    """An async feed_fn is awaited and its feeds reach the session."""
    calls: list[int] = []

    async def feed() -> dict[str, int]:
        calls.append(len(calls))
        return {"x": 10 * len(calls)}

    hook = FeedFnHook(feed)
    results = await drive(
        [hook, StopAtStepHook(num_steps=2)], lambda i: {}, kind=session_kind, fetches="x"
    )
    assert results == [10, 20]


@pytest.mark.anyio
async def test_feed_fn_returning_a_non_mapping_is_a_type_error() -> None:
    """A feed_fn returning something other than a mapping fails the step with a TypeError."""
    hook = FeedFnHook(lambda: [1, 2])
    with pytest.raises(TypeError, match="feed_fn must return a mapping of feeds, got list"):
        await drive([hook], lambda i: {})
