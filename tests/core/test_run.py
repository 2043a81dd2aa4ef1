"""`aep-bridge run` as a process: when it says it runs, and how it stops.

The bridge runs as it does for a user (`python -m aep_bridge run --config`), its log in a
file; channels are the test-only `recording_channel` against a `FakePlatform` served in this
process, which can `freeze` so that a call stays in flight and the outbox cannot flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.process.exit_status import EXIT_CANNOT_LISTEN
from tests.bridge_process import BridgeProcess, free_port, write_config

from .recording_channel import FakePlatform, serve_platform

FLUSH_TIMEOUT = 5.0  # server.FLUSH_TIMEOUT: what a first signal gives the whole stop


class Process(BridgeProcess):
    """The bridge with the recording channel (and no installed plugin) loaded."""

    def __init__(self, config: Path, log: Path) -> None:
        super().__init__(config, log, plugins="tests.core.recording_channel")


async def wait_for_line(process: Process, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while text not in process.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{process.tail()}"
        await asyncio.sleep(0.02)


async def exit_of(process: Process, timeout: float) -> tuple[int, float]:
    """The process's exit status and how long it took to exit from now."""
    assert process.proc is not None
    started = time.monotonic()
    try:
        code = await asyncio.to_thread(process.proc.wait, timeout)
    except subprocess.TimeoutExpired:
        process.proc.kill()
        process.proc.wait()
        raise AssertionError(f"still running {timeout}s later:\n{process.tail()}") from None
    return code, time.monotonic() - started


def no_traceback(process: Process) -> None:
    text = process.log.read_text(errors="replace")
    assert "Traceback" not in text, text
    assert "CancelledError" not in text, text


@contextlib.asynccontextmanager
async def running(tmp_path: Path, channels: dict[str, Any] | None = None) -> AsyncIterator[Any]:
    port = free_port()
    process = Process(write_config(tmp_path, port, channels), tmp_path / "bridge.log")
    token = process.token()
    await process.start(f"http://127.0.0.1:{port}")
    try:
        yield process, port, token
    finally:
        process.stop()


async def test_running_is_said_only_once_the_port_is_bound(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = Process(write_config(tmp_path, port), tmp_path / "bridge.log")
        process.spawn()
        code, _ = await exit_of(process, 20)
    text = process.log.read_text(errors="replace")
    assert code == EXIT_CANNOT_LISTEN, text
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in text, text
    assert " running: " not in text
    assert "endpoint: " not in text
    assert "consuming events from" not in text
    no_traceback(process)


async def test_a_normal_start_says_running_after_the_endpoint_and_before_consuming(tmp_path):
    async with running(tmp_path) as (process, port, _):
        await wait_for_line(process, "consuming events from embedded")
        lines = [line.split(": ", 1)[1] for line in process.log.read_text().splitlines()]
        endpoint = next(i for i, line in enumerate(lines) if line.startswith("endpoint: "))
        started = next(i for i, line in enumerate(lines) if " running: " in line)
        consuming = lines.index("consuming events from embedded")
        assert endpoint < started < consuming
        assert f"http://127.0.0.1:{port}/events" in lines[endpoint]


@pytest.mark.parametrize("signals", [1, 2])
async def test_an_open_sse_client_does_not_hold_up_the_stop(tmp_path: Path, signals: int):
    async with running(tmp_path) as (process, port, token), httpx.AsyncClient() as client:
        headers = {"Authorization": f"Bearer {token}"}
        async with client.stream(
            "GET", f"http://127.0.0.1:{port}/stream", headers=headers, timeout=30
        ) as stream:
            chunks = stream.aiter_raw()
            assert (await anext(chunks)).startswith(b": aep-bridge")
            for _ in range(signals):  # the second while the first stop is under way
                process.proc.send_signal(signal.SIGINT)
                await asyncio.sleep(0.02)
            code, took = await exit_of(process, 2 * FLUSH_TIMEOUT)
            with contextlib.suppress(httpx.HTTPError):
                async for _ in chunks:  # the stream has ended: nothing more, no hang
                    pass
    assert code == 0, process.tail()
    assert took < FLUSH_TIMEOUT, f"took {took:.1f}s with an SSE client connected"
    assert "stopped" in process.tail()
    no_traceback(process)


async def test_a_second_signal_stops_at_once_while_the_outbox_cannot_flush(tmp_path: Path):
    platform = FakePlatform()
    async with serve_platform(platform) as platform_url:
        channels = {
            "rec": {"type": "recording", "platform_url": platform_url, "approvers": ["alice"]}
        }
        async with running(tmp_path, channels) as (process, port, token):
            async with TinyAgent(f"ws://127.0.0.1:{port}/socket", token) as agent:
                await agent.emit("session.started", {"label": "slow platform"})
                deadline = time.monotonic() + 10
                while not platform.of("thread"):
                    assert time.monotonic() < deadline, process.tail()
                    await asyncio.sleep(0.02)
                platform.freeze()  # from now on no call returns: the outbox cannot flush
                await agent.emit("message.agent.replied", {"text": "one"}, capture="full")
                while not platform.stalled:
                    assert time.monotonic() < deadline, process.tail()
                    await asyncio.sleep(0.02)
            process.proc.send_signal(signal.SIGINT)
            await wait_for_line(process, "stopping (up to")
            await asyncio.sleep(0.3)  # into the flush
            process.proc.send_signal(signal.SIGINT)
            code, took = await exit_of(process, 2 * FLUSH_TIMEOUT)
    assert code == 0, process.tail()
    assert took < 1.5, f"took {took:.1f}s after the second signal"
    assert "stopping now" in process.tail()
    no_traceback(process)
