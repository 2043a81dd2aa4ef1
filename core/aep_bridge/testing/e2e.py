"""The end-to-end harness: `aep-bridge run` as a process, your channel configured against your
fake platform, and an agent on the bridge's WebSocket.

    @contextlib.asynccontextmanager
    async def running(tmp_path):
        async with MyFakePlatform() as fake:
            block = {"server": fake.url(), "token": TOKEN, "approvers": ["u1"]}
            async with end_to_end(
                MyRun, fake, tmp_path, {"mine": block}, plugins="my_plugin", secrets=[TOKEN]
            ) as run:
                yield run

    async def test_a_press_answers_the_agent(tmp_path):
        async with running(tmp_path) as run, run.agent() as agent:
            request, card = await run.start_and_ask(agent)
            fake.press(card, "Allow", user="u1")  # what a person does on the platform
            command = await agent.next_command()
            assert command.subject == request.id

`MyRun` is an `EndToEnd` that knows where your platform shows a session's card
(`find_card`). At the end the bridge is stopped and its log is checked for every secret.
`BridgeProcess`, `free_port`, `write_config` and `stored` are the parts, for a test that needs
more (a restart, a second bridge, the store read beside it).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx

from ..aep.envelope import Event
from ..commands.tinyagent import TinyAgent

__all__ = [
    "PERMISSION_ASK",
    "SIGN_IN",
    "BridgeProcess",
    "EndToEnd",
    "end_to_end",
    "free_port",
    "stored",
    "write_config",
]

#: the line the web channel logs at the start with its one-time sign-in URL
SIGN_IN = re.compile(r"sign in at (https?://\S+/channels/web/signin\?code=\S+)")

#: an agent's permission prompt with two options, answered over the control channel
PERMISSION_ASK: dict[str, Any] = {
    "kind": "permission",
    "prompt": "Run `rm -rf build/`?",
    "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
    "respond_via": ["control"],
}

#: the lowest port `free_port` hands out: above the well-known services, below the kernel's
#: ephemeral ports
FIRST_PORT = 10_000
#: the ports `free_port` gave this process lately: none is given twice while a bridge may
#: still be starting on it
_given: collections.deque[int] = collections.deque(maxlen=256)


def _ephemeral_low() -> int:
    """The first port the kernel picks by itself (`bind(("", 0))`, outgoing connections)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port() -> int:
    """A loopback port nothing listens on now (for the bridge to bind).

    The port is closed again until the bridge binds it, so it comes from where nothing else
    of the suite takes one meanwhile: below the kernel's ephemeral ports (which every
    `bind(0)` of an in-process fake server and every outgoing connection draw from), and
    under pytest-xdist from this worker's own share of them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... (unset: one process)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    span = (_ephemeral_low() - FIRST_PORT) // max(workers, 1)
    if span < 500:  # an unusual ephemeral range: let the kernel pick, as before
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    first = FIRST_PORT + index * span
    for _ in range(500):
        port = random.randrange(first, first + span)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken, or a closed connection's TIME_WAIT: another one
                continue
        _given.append(port)
        return port
    raise AssertionError(f"no free port in {first}-{first + span - 1}")


def write_config(
    folder: Path,
    port: int,
    channels: dict[str, Any] | None = None,
    *,
    name: str = "bridge.json",
    store: dict[str, Any] | None = None,
) -> Path:
    """A config for `aep-bridge run` on loopback `port`, its state in `folder/state`, and
    `store` as its `store` block if given."""
    config = folder / name
    block: dict[str, Any] = {
        "state_dir": str(folder / "state"),
        "listen": {"host": "127.0.0.1", "port": port},
        "channels": channels or {},
    }
    if store is not None:
        block["store"] = store
    config.write_text(json.dumps(block))
    return config


def stored(folder: Path, sql: str, *parameters: object) -> list[tuple[Any, ...]]:
    """Rows of the store of a bridge whose state is in `folder/state`, read beside it (WAL:
    what it has committed) and without writing anything."""
    conn = sqlite3.connect(folder / "state" / "state.db", isolation_level=None)
    try:
        return list(conn.execute(sql, parameters))
    finally:
        conn.close()


class BridgeProcess:
    """`aep-bridge run --config` as a process, its log in a file.

    `plugins` (module names, comma-separated) loads only those plugins, as
    `AEP_BRIDGE_PLUGINS` does, instead of the installed entry points; `root` is the folder
    the process runs in and puts first on its `PYTHONPATH` (your checkout; default: here).
    """

    def __init__(
        self, config: Path, log: Path, *, plugins: str | None = None, root: Path | None = None
    ) -> None:
        self.config = config
        self.log = log
        self.plugins = plugins
        self.root = root or Path.cwd()
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """Entry points as installed, or only `plugins` (test modules) when given."""
        path = os.pathsep.join(p for p in (str(self.root), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
        if self.plugins is not None:
            env["AEP_BRIDGE_PLUGINS"] = self.plugins
            env["AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return env

    def token(self) -> str:
        """The agents' token of this bridge (`aep-bridge token`)."""
        out = subprocess.run(
            [sys.executable, "-m", "aep_bridge", "token", "--config", str(self.config)],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the process, its output appended to the log; not waiting for it to listen."""
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "aep_bridge", "run", "--config", str(self.config)],
                cwd=self.root,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self.proc

    async def start(self, base: str) -> None:
        """Start the process and return once it answers discovery at `base`."""
        self.spawn()
        assert self.proc is not None
        async with httpx.AsyncClient() as client:

            async def up() -> bool:
                with contextlib.suppress(httpx.HTTPError):
                    return (await client.get(f"{base}/.well-known/aep")).status_code == 200
                return False

            deadline = time.monotonic() + 20
            while not await up():
                assert self.proc.poll() is None, f"the bridge exited:\n{self.tail()}"
                assert time.monotonic() < deadline, f"the bridge did not come up:\n{self.tail()}"
                await asyncio.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        """Stop the process as Ctrl-C does (killed after 15 s); its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    async def until(
        self, what: str, check: Callable[[], Any], timeout: float, *, every: float = 0.02
    ) -> Any:
        """Poll `check` until it returns something truthy, and return that; fail at once if
        the bridge died meanwhile, and after `timeout` seconds, with the log's tail."""
        deadline = time.monotonic() + timeout
        while not (found := check()):
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the bridge died waiting for {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")
            await asyncio.sleep(every)
        return found

    async def sign_in_url(self, timeout: float = 20) -> str:
        """The one-time web sign-in URL the bridge logs at its start (its web channel on)."""
        found = await self.until(
            "the sign-in line", lambda: SIGN_IN.search(self.log.read_text()), timeout
        )
        return str(found[1])

    async def aclose(self) -> int:
        """`stop` without blocking this event loop (a fake platform served in it must keep
        answering while the bridge flushes)."""
        return await asyncio.to_thread(self.stop)

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


F = TypeVar("F")


@dataclass
class EndToEnd(Generic[F]):
    """A running bridge with its fake platform, and agents for it.

    Subclass it to say where your platform shows a session's card (`find_card`) and to add
    what your tests read and do there (threads, presses); `host`, `agent_name` and `wait`
    are what its agents say and how long a wait may take.
    """

    fake: F
    bridge: BridgeProcess
    base: str  # the bridge's http://127.0.0.1:PORT
    url: str  # the agents' WebSocket
    token: str
    host: str = "e2e"
    agent_name: str = "claude-code"
    #: the bridge waits this long for an agent's ack before it says the answer did not arrive
    wait: float = 20.0

    def agent(self, session: str = "s1", seq: int = 0) -> TinyAgent:
        """An agent for `session` (`async with` connects it); `seq` continues a stream."""
        agent = TinyAgent(
            self.url, self.token, agent=self.agent_name, session=session, host=self.host
        )
        agent._seq = seq  # a reconnect continues the session's stream
        return agent

    async def until(self, what: str, check: Callable[[], Any], timeout: float | None = None) -> Any:
        """What `check` returns once truthy (see `BridgeProcess.until`)."""
        return await self.bridge.until(what, check, self.wait if timeout is None else timeout)

    async def find_card(self, label: str) -> Any:
        """Wait for the card of the session labelled `label` on the platform; return it."""
        raise NotImplementedError("an EndToEnd subclass says where its platform shows a card")

    async def start_and_ask(
        self, agent: TinyAgent, *, label: str = "fix the flaky test", **ask: Any
    ) -> tuple[Event, Any]:
        """Start a session labelled `label`, ask `PERMISSION_ASK` (changed by `ask`) in it,
        and wait for its card: the request and the card."""
        await agent.emit("session.started", {"label": label, "cwd": "/srv/app"}, capture="redacted")
        request = await agent.emit(
            "attention.requested", {**PERMISSION_ASK, **ask}, capture="full", severity="notice"
        )
        return request, await self.find_card(label)


R = TypeVar("R", bound=EndToEnd[Any])


@contextlib.asynccontextmanager
async def end_to_end(
    run: Callable[..., R],
    fake: Any,
    folder: Path,
    channels: dict[str, Any],
    *,
    store: dict[str, Any] | None = None,
    plugins: str | None = None,
    secrets: Iterable[str] = (),
    root: Path | None = None,
    settings: Mapping[str, Any] | None = None,
) -> AsyncIterator[R]:
    """`aep-bridge run` with `channels` (configured against `fake`), its state and log in
    `folder`, as `run(fake, bridge, base, url, token)` (your `EndToEnd`); `settings` are more
    top-level blocks of its config (`attention`, say). At the end the bridge is stopped and
    none of `secrets` may be in its log."""
    port = free_port()
    config = write_config(folder, port, channels, store=store)
    if settings:
        config.write_text(json.dumps({**json.loads(config.read_text()), **settings}))
    bridge = BridgeProcess(config, folder / "bridge.log", plugins=plugins, root=root)
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        yield run(fake, bridge, base, f"ws://127.0.0.1:{port}/socket", bridge.token())
    finally:
        await bridge.aclose()
    log = (folder / "bridge.log").read_text()
    for secret in secrets:
        assert secret not in log, "a secret is in the bridge's log"  # never logged
