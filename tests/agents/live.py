"""A real bridge, a real agent daemon and real hook processes, for the agent tests.

The bridge is the real core with memory channels (tests/core/rig.py) behind the real AEP
endpoint on a loopback port; `aep-bridge agentd` runs as its own process, and each hook is
`aep-bridge hook AGENT` run as a subprocess with a recorded payload on stdin, as the agent
runs it. Nothing of ours is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from aep_bridge.agents.paths import DIR_VARIABLE, socket_path
from aep_bridge.contract.types import ChannelUser
from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.testing import MemoryChannel
from tests.core.rig import Rig
from tests.intake.conftest import TOKEN, Served, serve

PAYLOADS = Path(__file__).parent / "payloads"
ALICE = ChannelUser(id="alice", name="Alice")
MALLORY = ChannelUser(id="mallory", name="Mallory")


def payload(agent: str, name: str, **changes: Any) -> dict[str, Any]:
    """A recorded hook payload of `agent`, with `changes` (files: payloads/AGENT/NAME.json)."""
    data = json.loads((PAYLOADS / agent.replace("-", "_") / f"{name}.json").read_text())
    data.update(changes)
    return data


@dataclass
class HookRun:
    """What a hook process did: its status and what it printed."""

    status: int
    stdout: str
    stderr: str

    @property
    def output(self) -> Any:
        return json.loads(self.stdout) if self.stdout.strip() else None


async def get(directory: Path, path: str) -> tuple[int, Any]:
    """GET `path` from the daemon over its socket."""
    reader, writer = await asyncio.open_unix_connection(os.fspath(socket_path(directory)))
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: agentd\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


@dataclass
class Live:
    rig: Rig
    served: Served
    directory: Path
    daemon: asyncio.subprocess.Process | None = None

    @property
    def channel(self) -> MemoryChannel:
        return self.rig.channel("phone")

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env[DIR_VARIABLE] = os.fspath(self.directory)
        env["AEP_BRIDGE_URL"] = self.served.http
        env["AEP_BRIDGE_TOKEN"] = TOKEN
        env.update(extra)
        return env

    async def start_daemon(self, *options: str, wait: bool = True, **env: str) -> None:
        self.daemon = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "aep_bridge",
            "agentd",
            *options,
            env=self.env(**env),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=open(self.directory.parent / "agentd.err", "ab"),  # noqa: SIM115
        )
        if wait:
            await self.wait_relay(True)

    async def wait_relay(self, up: bool, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(OSError, ValueError, IndexError):
                    status, body = await get(self.directory, "/healthz")
                    if status == 200 and body == {"ok": True, "relay": up}:
                        return
                await asyncio.sleep(0.05)

    async def stop_daemon(self) -> None:
        if self.daemon is not None and self.daemon.returncode is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.daemon.wait(), 10)
            except TimeoutError:
                self.daemon.kill()
                await self.daemon.wait()
        self.daemon = None

    async def kill_daemon(self) -> None:
        """SIGKILL the daemon, as a crash or the OOM killer does: it cleans nothing up."""
        assert self.daemon is not None
        self.daemon.kill()
        await self.daemon.wait()
        self.daemon = None

    def hook(self, agent: str, body: Any, *options: str, **env: str) -> asyncio.Task[HookRun]:
        """Run `aep-bridge hook AGENT` with `body` on stdin, as the agent does."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()

        async def run() -> HookRun:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "aep_bridge",
                "hook",
                agent,
                *options,
                env=self.env(**env),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await process.communicate(data)
            assert process.returncode is not None
            return HookRun(process.returncode, out.decode(), err.decode())

        return asyncio.create_task(run())

    async def card(self, count: int = 1, timeout: float = 15.0) -> str:
        """The id of the `count`-th card on the phone, once it is there."""
        async with asyncio.timeout(timeout):
            while len(self.channel.cards) < count:
                await asyncio.sleep(0.02)
        return list(self.channel.cards)[count - 1]

    def card_text(self, card: str) -> str:
        """What the card's message says now (its question, then its outcome once closed)."""
        message = self.channel.cards[card][2]
        return next(m.text for m in self.channel.messages if m.id == message)

    def buttons(self, card: str) -> list[tuple[str, str]]:
        """The buttons the card's message still shows (none once it is closed)."""
        message = self.channel.cards[card][2]
        return next(m.buttons for m in self.channel.messages if m.id == message)

    async def closed(self, card: str, timeout: float = 15.0) -> str:
        """The card's text once it shows an outcome that closed it (its buttons gone)."""
        async with asyncio.timeout(timeout):
            while self.buttons(card):
                await asyncio.sleep(0.02)
        return self.card_text(card)

    def labels(self, card: str) -> list[str]:
        """The buttons of a card, as the person sees them."""
        return [o.label for o in self.channel.cards[card][1].options]

    async def press(self, card: str, label: str, user: ChannelUser = ALICE) -> Any:
        """Press the button labelled `label` on a card, as `user`."""
        return await self.channel.press(f"{card}:{self.labels(card).index(label)}", user)

    def events(self, agent: str) -> list[dict[str, Any]]:
        """Every event the daemon logged for `agent`, in order."""
        logs = sorted((self.directory / "logs" / agent).glob("*.jsonl"))
        return [json.loads(line) for log in logs for line in log.read_text().splitlines()]


@dataclass
class AwayStub:
    """The bridge's `GET /away?session=ID` (issue 33, interface 2) as a test sets it, in front
    of the real endpoint: which sessions are away, the hold it names, and what was asked."""

    away: set[str] = field(default_factory=set)
    hold_seconds: int = 1800
    #: answer this status instead (404: a bridge from before away mode)
    status: int = 200
    #: (session asked about, Authorization header) for each question
    asked: list[tuple[str | None, str | None]] = field(default_factory=list)

    def wrap(self, app: Any) -> Any:
        async def route(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["path"] != "/away":
                await app(scope, receive, send)
                return
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization")
            query = parse_qs(scope.get("query_string", b"").decode())
            session = query.get("session", [None])[0]
            self.asked.append((session, None if auth is None else auth.decode()))
            status, body = self.status, {"error": "no such route"}
            if auth != f"Bearer {TOKEN}".encode():
                status, body = 401, {"error": "a bearer token is required"}
            elif status == 200:
                body = {"away": session in self.away, "hold_seconds": self.hold_seconds}
            data = json.dumps(body).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": data})

        return route


@contextlib.asynccontextmanager
async def live(
    tmp_path: Path, *, daemon: bool = True, away: AwayStub | None = None
) -> AsyncIterator[Live]:
    channels = {"phone": {"type": "memory", "approvers": ["alice"], "allow_instructions": True}}
    async with contextlib.AsyncExitStack() as stack:
        rig = await stack.enter_async_context(Rig(tmp_path / "bridge", channels=channels))
        wrap = None if away is None else away.wrap
        served = await stack.enter_async_context(serve(rig.hub, AuthPolicy(TOKEN), wrap=wrap))
        directory = tmp_path / "agentd"
        directory.mkdir(mode=0o700)
        running = Live(rig, served, directory)
        try:
            if daemon:
                await running.start_daemon()
            yield running
        finally:
            await running.stop_daemon()
            # a daemon a hook started on demand
            pid = directory / "agentd.pid"
            if pid.exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid.read_text()), signal.SIGTERM)
