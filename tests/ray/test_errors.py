"""Which Ray errors hookrun.ray treats as a lost session (no cluster needed)."""

from __future__ import annotations

import pytest
import ray.exceptions as rex

from hookrun.ray import RECOVERABLE_ERRORS, is_recoverable

_REF_HEX = "ab" * 14


@pytest.mark.parametrize(
    "error",
    [
        rex.ActorDiedError(),
        rex.ActorUnavailableError("socket closed", b"1" * 16),
        rex.WorkerCrashedError(),
        rex.NodeDiedError("node gone"),  # type: ignore[no-untyped-call]
        rex.OwnerDiedError(_REF_HEX, b"", "call site"),
        rex.ObjectReconstructionFailedError(_REF_HEX, b"", "call site"),
    ],
    ids=type,
)
def test_lost_actors_workers_nodes_and_objects_are_recoverable(error: Exception) -> None:
    """A lost actor, worker, node or object is recoverable."""
    assert isinstance(error, RECOVERABLE_ERRORS)
    assert is_recoverable(error)


@pytest.mark.parametrize(
    "error",
    [
        rex.TaskCancelledError(),
        rex.GetTimeoutError(),
        rex.LocalRayletDiedError(),
        rex.ObjectFreedError(_REF_HEX, b"", "call site"),
        ValueError("user"),
    ],
    ids=type,
)
def test_cancellations_timeouts_freed_objects_and_user_errors_are_not(error: Exception) -> None:
    """Cancellation, timeouts, a dead local raylet, a freed object and user errors propagate."""
    assert not is_recoverable(error)


def test_actor_whose_constructor_failed_is_not_recoverable() -> None:
    """ActorDiedError with actor_init_failed (the constructor raised) would fail again."""
    error = rex.ActorDiedError()
    error._actor_init_failed = True
    assert error.actor_init_failed and not is_recoverable(error)
