"""The promises both engines keep (tests/_engine_contract.py), on Ray."""

from __future__ import annotations

from typing import Any

import pytest
import ray

from hookrun.ray import RayActorSessionCreator, RayStepCounter, RayStepSession

from .._engine_contract import Engine, EngineContract
from . import _remote

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ray_cluster")]


@pytest.fixture
def engine() -> Engine:
    def counter(name: str, **options: Any) -> RayStepCounter:
        return RayStepCounter(name, **options)

    return Engine(
        counter=counter,
        step_session=RayStepSession,
        actor_creator=RayActorSessionCreator,
        remote=_remote,
        constructor_error=ray.exceptions.ActorDiedError,
    )


class TestRay(EngineContract):
    """Collected here: Ray's cluster, Ray's engine marker."""
