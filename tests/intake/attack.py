"""Clients that attack the endpoint the way a hostile or broken peer would: a WebSocket and
an SSE consumer that subscribe and never read, a flood of large events, idle TCP
connections. Raw sockets, so nothing in between reads on the attacker's behalf; shared by
tests/intake/test_endpoint_limits.py and bench/attacks.py."""

from __future__ import annotations

import base64
import json
import os
import resource
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from aep_bridge.aep.build import make_event
from tests.bridge_process import ROOT, BridgeProcess

BRIDGE = {"source": "aep://attack/agent/flood", "agent": "flood"}


def rss_mb(pid: int) -> float:
    """The resident set of process `pid`, in MB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _stalled(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    # fills at once (a flood is megabytes); much smaller (4 KB, under one loopback segment),
    # what the kernel already holds for the consumer trickles out at some 40 KB/s once it
    # does read (raising it then does not help), and reading the last 4 MB of a dropped SSE
    # stream to its end took some 100 s
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
    return sock


def _read_head(sock: socket.socket) -> bytes:
    """The response head, read a byte at a time so that nothing after it is taken."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            raise ConnectionError(f"closed during the response head: {head!r}")
        head += byte
    return head


def ws_frame(text: str) -> bytes:
    """A masked client text frame."""
    data = text.encode()
    mask = os.urandom(4)
    head = bytearray([0x81])
    if len(data) < 126:
        head.append(0x80 | len(data))
    elif len(data) < 1 << 16:
        head += bytes([0x80 | 126]) + len(data).to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + len(data).to_bytes(8, "big")
    return bytes(head) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def stalled_websocket(port: int, token: str) -> socket.socket:
    """A WebSocket consumer subscribed to everything, which reads nothing after the
    handshake."""
    sock = _stalled(port)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /socket HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = _read_head(sock)
    assert head.startswith(b"HTTP/1.1 101"), head
    sock.sendall(ws_frame(json.dumps({"type": "hello", "versions": ["0.1"], "role": "consumer"})))
    sock.sendall(ws_frame(json.dumps({"type": "subscribe", "id": "all"})))
    return sock


def stalled_sse(port: int, token: str) -> socket.socket:
    """An SSE consumer of everything, which reads nothing after the response head."""
    sock = _stalled(port)
    sock.sendall(
        (
            f"GET /stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = _read_head(sock)
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def read_to_end(sock: socket.socket, timeout: float) -> bytes:
    """Everything the peer sends until it closes the connection; TimeoutError when it
    is still open after `timeout` seconds of silence."""
    sock.settimeout(timeout)
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except ConnectionResetError:
            break
        except OSError as exc:
            if isinstance(exc, TimeoutError | socket.timeout):
                raise TimeoutError("the bridge kept the connection open") from None
            raise
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def batch(start: int, count: int, size: int, session: str = "flood") -> bytes:
    """`count` events of about `size` bytes each, as an NDJSON body, seqs from `start`."""
    pad = "x" * size
    return b"\n".join(
        make_event(
            "x.aep-bridge.session.note",
            session=session,
            seq=seq,
            data={"n": seq, "pad": pad},
            **BRIDGE,
        ).to_json()
        for seq in range(start, start + count)
    )


async def flood(base: str, token: str, total: int, size: int, per_post: int = 100) -> None:
    """POST `total` events of about `size` bytes each, `per_post` to a request."""
    headers = {
        "Authorization": f"Bearer {token}",
        "AEP-Version": "0.1",
        "Content-Type": "application/x-ndjson",
    }
    async with httpx.AsyncClient(timeout=60) as client:
        for start in range(0, total, per_post):
            body = batch(start, min(per_post, total - start), size)
            response = await client.post(f"{base}/events", content=body, headers=headers)
            assert response.status_code == 202, response.text


def config(
    folder: Path, port: int, intake: dict[str, object] | None = None, **listen: object
) -> Path:
    """A config with no channel, on loopback `port`, `listen` and `intake` keys added."""
    path = folder / "bridge.json"
    path.write_text(
        json.dumps(
            {
                "state_dir": str(folder / "state"),
                "listen": {"host": "127.0.0.1", "port": port, **listen},
                "intake": intake or {},
                "channels": {},
            }
        )
    )
    return path


class LimitedBridge(BridgeProcess):
    """The bridge with its open-file limit lowered to `nofile` (None: as inherited)."""

    def __init__(self, config: Path, log: Path, nofile: int | None = None) -> None:
        super().__init__(config, log)
        self.nofile = nofile

    def spawn(self) -> subprocess.Popen[bytes]:
        nofile = self.nofile

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "aep_bridge", "run", "--config", str(self.config)],
                cwd=ROOT,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=limit,
            )
        return self.proc
