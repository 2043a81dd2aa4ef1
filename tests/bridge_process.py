"""`aep-bridge run --config` as a child process, for tests that run the real product."""

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]

#: the line the web channel logs at the start with its one-time sign-in URL
SIGN_IN = re.compile(r"sign in at (https?://\S+/channels/web/signin\?code=\S+)")


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
    """`aep-bridge run --config` as a process, its log in a file."""

    def __init__(self, config: Path, log: Path, *, plugins: str | None = None) -> None:
        self.config = config
        self.log = log
        self.plugins = plugins
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """Entry points as installed, or only `plugins` (test modules) when given."""
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
        if self.plugins is not None:
            env["AEP_BRIDGE_PLUGINS"] = self.plugins
            env["AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return env

    def token(self) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "aep_bridge", "token", "--config", str(self.config)],
            cwd=ROOT,
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
                cwd=ROOT,
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
