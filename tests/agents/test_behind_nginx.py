"""Agents on another machine (issue 34): the bridge behind Debian's real nginx, with TLS.

Every part is real and a process of its own: `aep-bridge run` on loopback with
`listen.public_url` and `listen.trusted_proxies`; `/usr/sbin/nginx` running the very server
block docs/deploy.md shows (only its port, name and certificate paths changed), with a
self-signed certificate made here by `openssl`; `aep-bridge agent login` keeping the public
URL, the token (on standard input) and the certificate; `aep-bridge agentd` finding them
there and connecting over `wss://` through nginx; a real `aep-bridge hook claude-code` whose
permission card is answered on the web page, itself reached through nginx over https.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import ssl
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.agents.login import LOGIN_VARIABLE
from aep_bridge.agents.paths import DIR_VARIABLE
from tests.agents.live import payload
from tests.agents.real import Daemon, Real
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config

NGINX = Path("/usr/sbin/nginx")
pytestmark = pytest.mark.skipif(
    not NGINX.exists(),
    reason="Debian's nginx is not installed (apt-get install nginx; .ci/run installs it)",
)

CC = "claude-code"
WAIT = 60.0


def deploy_block() -> str:
    """The nginx configuration docs/deploy.md tells the reader to install."""
    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    found = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert found, "docs/deploy.md shows no nginx block"
    return found[1]


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for `localhost` (and 127.0.0.1), with its key."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def nginx_conf(folder: Path, port: int, bridge_port: int, cert: Path, key: Path) -> Path:
    """docs/deploy.md's server block on `port`, in a configuration nginx runs as this user."""
    block = deploy_block()
    replaced = {
        "listen 443 ssl;": f"listen 127.0.0.1:{port} ssl;",
        "listen [::]:443 ssl;": "",
        "server_name bridge.example.com;": "server_name localhost;",
        "/etc/letsencrypt/live/bridge.example.com/fullchain.pem": str(cert),
        "/etc/letsencrypt/live/bridge.example.com/privkey.pem": str(key),
        "proxy_pass http://127.0.0.1:8787;": f"proxy_pass http://127.0.0.1:{bridge_port};",
    }
    for old, new in replaced.items():
        assert old in block, f"docs/deploy.md's nginx block no longer says {old!r}"
        block = block.replace(old, new)
    temp = folder / "temp"
    temp.mkdir()
    user = "user root;" if os.geteuid() == 0 else ""  # root's workers would be nobody's
    conf = folder / "nginx.conf"
    conf.write_text(
        f"""{user}
daemon off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
{block}
}}
"""
    )
    return conf


@contextlib.contextmanager
def nginx(conf: Path, folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    check = subprocess.run(
        [str(NGINX), "-t", "-c", str(conf), "-p", str(folder), "-e", str(folder / "error.log")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr
    process = subprocess.Popen(
        [str(NGINX), "-c", str(conf), "-p", str(folder), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        process.terminate()  # SIGTERM: nginx's fast shutdown
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def up(client: httpx.AsyncClient, url: str, process: subprocess.Popen[bytes]) -> None:
    async with asyncio.timeout(WAIT):
        while True:
            assert process.poll() is None, "nginx exited"
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url)).status_code == 200:
                    return
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def behind_nginx(folder: Path) -> AsyncIterator[tuple[Real, Path]]:
    """The bridge, nginx in front of it, and a client that trusts nginx's certificate."""
    bridge_port, public_port = free_port(), free_port()
    public = f"https://localhost:{public_port}"
    config = write_config(folder, bridge_port, {"web": {"approvers": ["local"]}})
    block = json.loads(config.read_text())
    block["listen"].update(public_url=public, trusted_proxies=["127.0.0.1"])
    config.write_text(json.dumps(block))
    cert, key = certificate(folder)
    conf = nginx_conf(folder, public_port, bridge_port, cert, key)
    bridge = BridgeProcess(config, folder / "bridge.log")
    await bridge.start(f"http://127.0.0.1:{bridge_port}")
    try:
        with nginx(conf, folder) as proxy:
            trust = ssl.create_default_context(cafile=str(cert))
            async with httpx.AsyncClient(timeout=10, verify=trust) as client:
                await up(client, f"{public}/.well-known/aep", proxy)
                running = Real(folder, bridge, public, bridge.token(), client)
                await running.sign_in()
                try:
                    yield running, cert
                finally:
                    for daemon in running.daemons:
                        await daemon.stop()
    finally:
        await bridge.aclose()


async def login(running: Real, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`aep-bridge agent login URL ARGS` with the token on standard input."""
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "aep_bridge", "agent", "login", running.base, *args],
        input=running.token + "\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )


async def test_a_daemon_logged_in_to_the_public_url_is_answered_through_nginx(tmp_path: Path):
    async with behind_nginx(tmp_path) as (running, cert):
        # the web page's one-time link is at the public URL, and its cookie is Secure
        assert (await running.bridge.sign_in_url()).startswith(f"{running.base}/channels/web/")
        assert "public URL: " + running.base in running.bridge.log.read_text()

        directory = tmp_path / "agentd"
        directory.mkdir(mode=0o700)
        # the agent's machine: no config, no bridge beside it; the login where docs say
        home = tmp_path / "agent-config"
        kept = home / "aep-bridge" / "agent.json"
        env = {**running.bridge.env(), DIR_VARIABLE: os.fspath(directory)}
        env["XDG_CONFIG_HOME"] = os.fspath(home)
        for name in ("AEP_BRIDGE_URL", "AEP_BRIDGE_TOKEN", "AEP_BRIDGE_CONFIG", "SSL_CERT_FILE"):
            env.pop(name, None)
        env.pop(LOGIN_VARIABLE, None)

        untrusted = await login(running, env)  # nginx's certificate is nobody's CA
        assert untrusted.returncode == 2
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr
        assert not kept.exists()
        stored = await login(running, env, "--ca-file", os.fspath(cert))
        assert stored.returncode == 0, stored.stderr
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert running.token not in stored.stdout + stored.stderr

        daemon = Daemon(directory, env, tmp_path / "agentd.err")
        running.daemons.append(daemon)
        await daemon.start()
        socket = f"wss://localhost:{running.base.rsplit(':', 1)[1]}/socket"
        assert f"connected to the bridge at {socket}" in daemon.log.read_text()

        hook = daemon.hook(payload(CC, "PermissionRequest"))
        card = await running.card("npm test", timeout=WAIT)
        pressed = await running.press(card, "Allow")
        assert pressed["status"] == "accepted", pressed
        done = await asyncio.wait_for(hook, WAIT)
        assert done == {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {"behavior": "allow"},
            }
        }
        assert running.token not in running.bridge.log.read_text()
        assert running.token not in daemon.log.read_text()


async def test_through_nginx_a_rebound_name_is_still_refused(tmp_path: Path):
    async with behind_nginx(tmp_path) as (running, _cert):
        url = f"{running.base}/.well-known/aep"
        for name in ("rebound.example", f"rebound.example:{running.base.rsplit(':', 1)[1]}"):
            refused = await running.client.get(url, headers={"Host": name})
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "forbidden-host"
        # nginx sets X-Forwarded-Host from the client's Host: a client cannot forge it
        forged = await running.client.get(
            url, headers={"Host": "rebound.example", "X-Forwarded-Host": "localhost"}
        )
        assert forged.status_code == 403
        # a page of another origin through the proxy needs the token, as without one
        foreign = await running.client.post(
            f"{running.base}/events", headers={"Origin": "https://evil.example"}, content=b"{}"
        )
        assert foreign.status_code == 403
        assert foreign.json()["error"] == "forbidden-origin"


async def test_the_stream_through_nginx_is_not_buffered(tmp_path: Path):
    """An SSE consumer through nginx gets an event while the stream stays open (buffered,
    it would wait for kilobytes more or the end). Two things keep nginx from buffering:
    docs/deploy.md's `proxy_buffering off` and the bridge's own `X-Accel-Buffering: no`;
    either alone passes this test."""
    async with behind_nginx(tmp_path) as (running, _cert):
        bearer = {"Authorization": f"Bearer {running.token}"}
        event = make_event(
            "progress.status",
            source="aep://localhost/agent/tester",
            agent="tester",
            session="s-nginx",
            seq=0,
            data={"percent": 1},
        )
        posted = await running.client.post(
            f"{running.base}/events",
            content=event.raw,
            headers={**bearer, "AEP-Version": "0.1", "content-type": "application/json"},
        )
        assert posted.status_code == 202, posted.text
        url = f"{running.base}/stream?from=all"
        async with running.client.stream("GET", url, headers=bearer) as stream:
            assert stream.status_code == 200
            async with asyncio.timeout(WAIT):
                async for line in stream.aiter_lines():
                    if event.id in line:
                        break
