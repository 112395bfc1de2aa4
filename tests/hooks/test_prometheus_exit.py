"""PrometheusHook's server stops on every exit (error, failing hook, cancellation, a
sibling's failing begin), and a port it cannot serve is an error naming it."""

from __future__ import annotations

import errno
import socket
import threading
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hookrun import MonitoredSession
from hookrun.testing import FaultyHook, ScriptedCreator

pytest.importorskip("prometheus_client")

from hookrun.hooks import PrometheusHook

pytestmark = pytest.mark.anyio

LIMIT = 20.0
EXITS = ["error in the block", "failing hook", "cancellation", "failing begin of a sibling", "sibling's begin failing at once"]


class Boom(Exception):
    """The error the tests raise."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def serving_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if "serve_forever" in thread.name]


class WaitsForServer:
    """A sibling whose begin fails once the Prometheus server listens."""

    def __init__(self, hook: PrometheusHook) -> None:
        self.hook = hook

    async def begin(self) -> None:
        while self.hook.port is None:
            await anyio.lowlevel.checkpoint()
        raise Boom("sibling begin")


@asynccontextmanager
async def exiting(how: str, hook: PrometheusHook) -> AsyncIterator[None]:
    """Run a session with ``hook`` that exits the way ``how`` says; the body scrapes it."""
    hooks: list[object] = [hook]
    if how == "failing hook":
        hooks.append(FaultyHook("after_run", Boom("after_run")))
    if how == "failing begin of a sibling":
        hooks.append(WaitsForServer(hook))
    if how == "sibling's begin failing at once":  # may cancel the begin waiting for its thread
        hooks.append(FaultyHook("begin", Boom("sibling begin")))
    with anyio.CancelScope() as outer:
        async with MonitoredSession(ScriptedCreator({"x": 1}), hooks) as sess:
            yield
            if how == "error in the block":
                raise Boom("in the block")
            if how == "cancellation":
                outer.cancel()
                await anyio.sleep_forever()
            await sess.run("x")
    assert outer.cancelled_caught == (how == "cancellation")


async def check_stopped(port: int) -> None:
    """Nothing listens on ``port`` any more, no server thread runs, and the port serves again."""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    assert serving_threads() == []
    again = PrometheusHook(port=port)
    async with MonitoredSession(ScriptedCreator({"x": 1}), [again]):
        assert "hookrun_steps_total" in await anyio.to_thread.run_sync(scrape, port)
    assert serving_threads() == []


@pytest.mark.parametrize("how", EXITS)
async def test_the_server_stops_on_every_exit(how: str) -> None:
    """Whatever the exit, /metrics is no longer served and the port can be bound again."""
    port = free_port()
    hook = PrometheusHook(port=port)
    scraped: list[str] = []
    with anyio.fail_after(LIMIT):
        if how == "cancellation":
            async with exiting(how, hook):
                scraped.append(await anyio.to_thread.run_sync(scrape, port))
        else:
            with pytest.raises(Boom):
                async with exiting(how, hook):
                    scraped.append(await anyio.to_thread.run_sync(scrape, port))
        assert hook.port is None
        await check_stopped(port)
    if "begin" not in how:  # the body never runs then
        assert "hookrun_steps_total" in scraped[0]


async def test_a_taken_port_names_the_hook_the_address_and_the_port() -> None:
    """A port another socket listens on: an OSError naming the hook, address and port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with anyio.fail_after(LIMIT), pytest.raises(OSError, match=f"PrometheusHook could not serve /metrics on 127.0.0.1:{port}") as raised:
            async with MonitoredSession(ScriptedCreator(), [PrometheusHook(port=port)]):
                pytest.fail("the body must not run")
    assert raised.value.errno == errno.EADDRINUSE
    assert "another server listens there" in str(raised.value)
    assert serving_threads() == []


def test_close_is_idempotent_and_leaves_nothing() -> None:
    """close() twice, or without a server, does nothing more."""
    hook: Any = PrometheusHook()
    hook.close()
    hook.close()
    assert hook.port is None
