"""FinalOpsHook (TF basic_session_run_hooks_test 159-162)."""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from typing import Any

import pytest

from hookrun import OutOfRangeError
from hookrun.hooks import FinalOpsHook, StopAtStepHook

from ._support import drive, make_session


@pytest.mark.anyio
async def test_final_ops_is_scalar(session_kind: str) -> None:
    """A single key's value is stored after end (None before)."""
    hook = FinalOpsHook("total")
    assert hook.final_ops_values is None
    await drive([hook, StopAtStepHook(num_steps=2)], lambda i: {"total": 42}, kind=session_kind)
    assert hook.final_ops_values == 42


@pytest.mark.anyio
async def test_final_ops_is_a_structure(session_kind: str) -> None:
    """A nested structure comes back packed like final_ops."""
    hook = FinalOpsHook({"sum": "total", "both": ["a", "b"]})
    await drive(
        [hook, StopAtStepHook(num_steps=1)],
        lambda i: {"total": 3, "a": 1, "b": [2, 2]},
        kind=session_kind,
    )
    assert hook.final_ops_values == {"sum": 3, "both": [1, [2, 2]]}


@pytest.mark.anyio
async def test_final_ops_with_dictionary(session_kind: str) -> None:
    """The hook's own feed dict is used for the final fetch."""
    hook = FinalOpsHook("x", final_ops_feed_dict={"x": 7})
    await drive([hook, StopAtStepHook(num_steps=1)], lambda i: {}, kind=session_kind)
    assert hook.final_ops_values == 7


@pytest.mark.anyio
async def test_final_ops_triggers_out_of_range_error(caplog: pytest.LogCaptureFixture) -> None:
    """An OutOfRangeError in end is re-raised with a warning about an input dependency."""

    class Exhausted:
        async def run(self, fetches: Any, feed_dict: Mapping[Hashable, Any], *rest: Any) -> Any:
            raise OutOfRangeError("input exhausted")

    hook = FinalOpsHook("value")
    with caplog.at_level(logging.WARNING, logger="hookrun"), pytest.raises(OutOfRangeError):
        await hook.end(Exhausted())
    assert "dependency back to some input source" in caplog.text
    assert hook.final_ops_values is None


@pytest.mark.anyio
async def test_none_final_ops_fetch_nothing() -> None:
    """final_ops=None does nothing at end."""
    hook = FinalOpsHook(None)
    await hook.end(make_session("sync", lambda i: {}))
    assert hook.final_ops_values is None


def test_feed_dict_must_be_a_mapping() -> None:
    """A feed dict that is not a mapping is a TypeError at construction."""
    with pytest.raises(TypeError, match="final_ops_feed_dict must be a mapping"):
        FinalOpsHook("x", final_ops_feed_dict=[("x", 1)])  # type: ignore[arg-type]
