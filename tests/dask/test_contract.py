"""The promises both engines keep (tests/_engine_contract.py), on Dask."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import distributed
import pytest

from hookrun.dask import DaskActorSessionCreator, DaskStepCounter, DaskStepSession

from .._engine_contract import Engine, EngineContract
from . import _remote

pytestmark = pytest.mark.anyio


@pytest.fixture
def engine(dask_client: distributed.Client) -> Engine:
    def counter(name: str, **options: Any) -> DaskStepCounter:
        return DaskStepCounter(dask_client, name, **options)

    def step_session(fn: Callable[..., Any]) -> DaskStepSession:
        return DaskStepSession(fn, client=dask_client)

    def actor_creator(cls: type, *args: Any, **kwargs: Any) -> DaskActorSessionCreator:
        return DaskActorSessionCreator(cls, *args, client=dask_client, **kwargs)

    return Engine(
        counter=counter,
        step_session=step_session,
        actor_creator=actor_creator,
        remote=_remote,
        constructor_error=RuntimeError,
    )


class TestDask(EngineContract):
    """Collected here: Dask's cluster, Dask's engine marker."""
