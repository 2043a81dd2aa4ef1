"""A real `aep-bridge run`, real agent daemons and real hooks, answered on its web page.

Everything is a process of its own, as a user runs it: the bridge (tests/bridge_process.py)
with its web channel, `aep-bridge agentd` per directory, and `aep-bridge hook claude-code`
per hook with a recorded payload on stdin. The cards are read and pressed through the web
page's own API, signed in with the bridge's token as the sign-in form does.
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

import httpx

from aep_bridge.agents.paths import DIR_VARIABLE
from tests.agents.live import get
from tests.bridge_process import BridgeProcess, free_port, write_config


@dataclass
class Daemon:
    """One `aep-bridge agentd` and its directory."""

    directory: Path
    env: dict[str, str]
    log: Path
    process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as err:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "aep_bridge", "agentd", env=self.env, stderr=err
            )
        await self.relay(True)

    async def relay(self, up: bool, timeout: float = 30.0) -> None:
        """Wait until the daemon says its link to the bridge is `up` (or down)."""
        async with asyncio.timeout(timeout):
            while True:
                with contextlib.suppress(OSError, ValueError, IndexError):
                    status, body = await get(self.directory, "/healthz")
                    if status == 200 and body["relay"] is up:
                        return
                await asyncio.sleep(0.05)

    def signal(self, number: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(number)

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGCONT)  # (one the test paused)
            self.process.terminate()
            await self.process.wait()

    def hook(self, body: dict[str, Any], hold: str = "30") -> asyncio.Task[Any]:
        """`aep-bridge hook claude-code` as the agent runs it: what it printed, as JSON."""

        async def run() -> Any:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "aep_bridge",
                "hook",
                "claude-code",
                "--hold",
                hold,
                env=self.env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
            )
            out, _ = await process.communicate(json.dumps(body).encode())
            return json.loads(out) if out.strip() else None

        return asyncio.create_task(run())

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()


@dataclass
class Real:
    """The bridge process, its web page, and the daemons of the test."""

    folder: Path
    bridge: BridgeProcess
    base: str
    token: str
    client: httpx.AsyncClient
    key: str = ""
    daemons: list[Daemon] = field(default_factory=list)

    async def sign_in(self) -> None:
        """The web page's sign-in form, posted with the token (a restart ends sign-ins)."""
        signed = await self.client.post(
            f"{self.base}/channels/web/signin", data={"token": self.token}
        )
        self.key = signed.headers["location"].partition("#key=")[2]

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Page-Key": self.key, "Origin": self.base}

    async def queue(self) -> list[dict[str, Any]]:
        reply = await self.client.get(f"{self.base}/channels/web/api/state", headers=self.headers)
        assert reply.status_code == 200, reply.text
        return list(reply.json()["queue"])

    async def card(self, words: str, timeout: float = 30.0) -> dict[str, Any]:
        """The open card whose question says `words`, once it is on the page."""
        async with asyncio.timeout(timeout):
            while True:
                found = [c for c in await self.queue() if words in c["description_html"]]
                if found:
                    return found[0]
                await asyncio.sleep(0.1)

    async def press(self, card: dict[str, Any], label: str) -> dict[str, Any]:
        """Press the card's button `label`, as the page does; what the page was told."""
        index = [o["label"] for o in card["options"]].index(label)
        answer = {"card_id": card["id"], "option": index, "token": card["options"][index]["token"]}
        reply = await self.client.post(
            f"{self.base}/channels/web/api/answer", json=answer, headers=self.headers
        )
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    async def daemon(self, name: str) -> Daemon:
        """A new agent daemon in its own directory, connected."""
        directory = self.folder / name
        directory.mkdir(mode=0o700)
        env = {
            **self.bridge.env(),
            DIR_VARIABLE: os.fspath(directory),
            "AEP_BRIDGE_URL": self.base,
            "AEP_BRIDGE_TOKEN": self.token,
        }
        daemon = Daemon(directory, env, self.folder / f"{name}.err")
        self.daemons.append(daemon)
        await daemon.start()
        return daemon

    async def restart_bridge(self) -> None:
        await self.bridge.aclose()
        await self.bridge.start(self.base)
        await self.sign_in()


@contextlib.asynccontextmanager
async def real(folder: Path) -> AsyncIterator[Real]:
    """`aep-bridge run` with its web channel (approver: the page's own user), signed in."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = write_config(folder, port, {"web": {"approvers": ["local"]}})
    bridge = BridgeProcess(config, folder / "bridge.log")
    await bridge.start(base)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            running = Real(folder, bridge, base, bridge.token(), client)
            await running.sign_in()
            try:
                yield running
            finally:
                for daemon in running.daemons:
                    await daemon.stop()
    finally:
        await bridge.aclose()
