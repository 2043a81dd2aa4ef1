"""`aep-bridge token create|list|revoke` against the real bridge process (issue 34, item 2):
a token made with the bridge stopped or running works at once, `revoke` closes its open
WebSocket and SSE connections with the bridge running and it never works again, and no token
reaches the log.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from aep_bridge.commands.tinyagent import AgentError, TinyAgent
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config


def cli(bridge: BridgeProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "token", *args, "--config", str(bridge.config)],
        cwd=ROOT,
        env=bridge.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_create_connect_revoke_closes_the_connections_of_a_running_bridge(tmp_path: Path):
    port = free_port()
    bridge = BridgeProcess(write_config(tmp_path, port), tmp_path / "bridge.log")
    made = cli(bridge, "create", "ada")  # the bridge stopped: written to its store
    assert made.returncode == 0, made.stderr
    ada_token = made.stdout.strip()
    assert "shown this once" in made.stderr
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        made = cli(bridge, "create", "rita", "--role", "reader")  # and running
        assert made.returncode == 0, made.stderr
        rita_token = made.stdout.strip()
        listed = cli(bridge, "list").stdout
        assert "ada\tagent" in listed
        assert "rita\treader" in listed
        assert "live" in listed
        assert ada_token not in listed

        ada = TinyAgent(f"ws://127.0.0.1:{port}/socket", ada_token, session="s-ada")
        async with ada, httpx.AsyncClient(timeout=30) as client:
            await ada.emit("session.started", {})
            async with client.stream(
                "GET", f"{base}/stream", headers={"Authorization": f"Bearer {rita_token}"}
            ) as stream:
                assert stream.status_code == 200
                lines = stream.aiter_lines()
                assert await anext(lines) == ": aep-bridge"

                revoked = cli(bridge, "revoke", "ada")
                assert revoked.returncode == 0, revoked.stderr
                assert "closed 1 open connection(s)" in revoked.stdout
                with pytest.raises(AgentError) as closed:
                    await asyncio.wait_for(ada.next_command(), 10)
                assert closed.value.code == "closed"

                revoked = cli(bridge, "revoke", "rita")
                assert "closed 1 open connection(s)" in revoked.stdout, revoked.stderr

                async def rest() -> list[str]:
                    return [line async for line in lines]

                await asyncio.wait_for(rest(), 10)  # the stream ended
        with pytest.raises(AgentError) as refused:  # and the token never works again
            async with TinyAgent(f"ws://127.0.0.1:{port}/socket", ada_token, session="s-ada"):
                pass
        assert "403" in str(refused.value)
        async with httpx.AsyncClient() as client:
            gone = await client.get(
                f"{base}/stream?live=0", headers={"Authorization": f"Bearer {rita_token}"}
            )
            assert gone.status_code == 403
        again = cli(bridge, "revoke", "ada")
        assert again.returncode == 1
        assert "no live token named 'ada'" in again.stderr
    finally:
        await bridge.aclose()
    log = bridge.log.read_text()
    assert "WebSocket connection opened by ada (agent)" in log
    assert "SSE stream opened by rita (reader)" in log
    assert "token ada revoked: 1 connection(s) closed" in log
    assert ada_token not in log
    assert rita_token not in log
    assert ada_token not in (tmp_path / "state" / "state.db").read_bytes().decode("latin-1")


def test_a_name_that_breaks_the_rule_is_refused_with_the_rule(tmp_path: Path):
    bridge = BridgeProcess(write_config(tmp_path, free_port()), tmp_path / "bridge.log")
    bad = cli(bridge, "create", "Ada Lovelace")
    assert bad.returncode == 2
    assert "lower-case letters, digits" in bad.stderr
    assert bad.stdout == ""
    assert cli(bridge, "create", "local").returncode == 2
    assert cli(bridge, "revoke", "nobody").returncode == 1


def test_creating_and_revoking_a_token_is_on_the_audit_trail(tmp_path: Path):
    """Who made or revoked which token, and when, is on the trail (`aep-bridge audit`); a
    refused create (a live name) adds nothing, and the token itself is never recorded."""
    import getpass
    import json

    bridge = BridgeProcess(write_config(tmp_path, free_port()), tmp_path / "bridge.log")
    made = cli(bridge, "create", "ada", "--role", "reader")
    assert made.returncode == 0
    assert cli(bridge, "create", "ada").returncode == 1
    assert cli(bridge, "revoke", "ada").returncode == 0
    export = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "audit", "--config", str(bridge.config)],
        cwd=ROOT,
        env=bridge.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert export.returncode == 0, export.stderr
    assert made.stdout.strip() not in export.stdout
    records = [json.loads(line) for line in export.stdout.splitlines()]
    assert [(r["kind"], r["data"]["token"], r["data"]["role"]) for r in records] == [
        ("token.created", "ada", "reader"),
        ("token.revoked", "ada", None),
    ]
    assert {r["principal"] for r in records} == {"local"}
    assert {r["actor"]["id"] for r in records} == {getpass.getuser()}
