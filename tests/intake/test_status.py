"""`GET /status` and `aep-bridge status`; clients finding the bridge through `listen.json`.

The route is checked in-process (who is refused, and how), `Bridge.status` against a whole
bridge with memory channels, and the commands against a real `aep-bridge run --port P`
whose config says another port: `ask`, `emit` and `status` find it without `--url`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from aep_bridge.aep.build import make_event, make_respond_command
from aep_bridge.aep.payloads import Answer
from aep_bridge.aep.validation import parse_event
from aep_bridge.intake.auth import AuthPolicy, host_allowed
from aep_bridge.intake.endpoint import Endpoint
from aep_bridge.intake.hub import Hub
from aep_bridge.process.listening import base_url, read_listening, write_listening
from aep_bridge.store import Store
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config
from tests.core.rig import ALICE, Rig, memory_host
from tests.shared_data import AEP_FIXTURES

from .conftest import TOKEN

REPORT = {"channels": [], "sources": [], "running_channels": 0, "pending": {"count": 0}}


def status_app(*, open_on_loopback: bool = False, hosts: tuple[str, ...] = ()) -> Any:
    policy = AuthPolicy(TOKEN, open_without_token=open_on_loopback)
    return Endpoint(Hub(), policy, status=lambda: dict(REPORT), allowed_hosts=hosts).app


async def get(app: Any, headers: dict[str, str] | None = None, path: str = "/status"):
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as client:
        return await client.get(path, headers=headers or {})


BEARER = {"Authorization": f"Bearer {TOKEN}"}

# -- the route ---------------------------------------------------------------------------------


async def test_status_needs_the_token():
    app = status_app()
    refused = await get(app)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert (await get(app, {"Authorization": "Bearer wrong"})).status_code == 403
    ok = await get(app, BEARER)
    assert ok.status_code == 200
    assert ok.json() == REPORT


async def test_status_needs_the_token_even_when_events_do_not():
    app = status_app(open_on_loopback=True)
    assert (await get(app)).status_code == 401
    assert (await get(app, BEARER)).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8787", "attacker.test."])
async def test_a_foreign_host_is_refused_even_with_the_token(host):
    refused = await get(status_app(), {**BEARER, "Host": host})
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-host"


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8787", "localhost:8787", "[::1]:8787", "10.0.0.7", "bridge.lan:8787"]
)
async def test_this_machines_names_are_admitted(host):
    admitted = await get(status_app(hosts=("bridge.lan", "10.0.0.7")), {**BEARER, "Host": host})
    assert admitted.status_code == 200


async def test_a_browser_origin_is_refused_even_with_the_token():
    for origin in ("https://evil.example", "http://127.0.0.1:8787", "null"):
        refused = await get(status_app(), {**BEARER, "Origin": origin})
        assert refused.status_code == 403
        assert refused.json()["error"] == "forbidden-origin"


async def test_status_is_get_only():
    transport = httpx.ASGITransport(app=status_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.post("/status", headers=BEARER)).status_code == 405


async def test_an_endpoint_without_a_bridge_has_no_status():
    app = Endpoint(Hub(), AuthPolicy(TOKEN)).app
    assert (await get(app, BEARER)).status_code == 404


def test_host_allowed():
    assert host_allowed(None)
    assert host_allowed("127.0.0.1:1")
    assert host_allowed("LOCALHOST")
    assert host_allowed("app.localhost:3000")
    assert host_allowed("[::1]:8787")
    assert not host_allowed("example.com")
    assert host_allowed("example.com", ["example.com"])
    assert host_allowed("box:8787", ["box"])


# -- Bridge.status -------------------------------------------------------------------------------


async def test_the_bridge_reports_channels_sources_questions_and_outboxes(tmp_path):
    channels = {
        "alpha": {"type": "memory", "approvers": ["alice"]},
        "broken": {"type": "memory", "approvers": "not-a-list"},
        "off": {"type": "telegram", "enabled": False},
    }
    async with Rig(tmp_path, channels=channels) as rig:
        rig.bridge.failed["gone"] = "ConnectionError: platform.example is unreachable"
        first, second = rig.agent("sess-1"), rig.agent("sess-2")
        first.start(label="fix the tests")
        second.start(label="ship it")
        first.ask("one?")
        first.ask("two?")
        second.ask("three?")
        await rig.settle()
        report = rig.bridge.status()
        assert report["sources"] == [{"name": "embedded", "kind": "embedded", "state": "consuming"}]
        assert report["running_channels"] == 1
        by_name = {c["name"]: c for c in report["channels"]}
        assert by_name["alpha"] == {
            "name": "alpha",
            "type": "memory",
            "state": "running",
            "outbox": {"queued": 0},
        }
        assert by_name["broken"]["state"] == "failed"
        assert by_name["broken"]["reason"].startswith("config: channels.broken.approvers")
        assert by_name["off"] == {"name": "off", "type": "telegram", "state": "disabled"}
        assert by_name["gone"]["state"] == "failed"
        assert "unreachable" in by_name["gone"]["reason"]
        pending = report["pending"]
        assert pending["count"] == 3
        counts = {s["session"]: s["count"] for s in pending["sessions"]}
        assert counts == {"sess-1": 2, "sess-2": 1}
        assert {s["name"] for s in pending["sessions"]} == {"sess-1", "sess-2"}
        assert all(s["agent"] for s in pending["sessions"])
        assert pending["oldest_age"] is not None
        assert pending["oldest_age"] >= 0
        json.dumps(report)  # JSON as it is


async def test_an_answered_question_is_no_longer_pending(tmp_path):
    async with Rig(tmp_path, host=memory_host()) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        assert rig.bridge.status()["pending"]["count"] == 1
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        await rig.settle()
        assert rig.bridge.status()["pending"] == {"count": 0, "oldest_age": None, "sessions": []}


# -- listen.json ---------------------------------------------------------------------------------


def test_listen_json_is_written_atomically_and_read_back(tmp_path):
    write_listening(tmp_path, "0.0.0.0", 8801)
    found = read_listening(tmp_path)
    assert found is not None
    assert (found.host, found.port, found.url, found.pid) == (
        "0.0.0.0",
        8801,
        "http://127.0.0.1:8801",
        os.getpid(),
    )
    assert [p.name for p in tmp_path.iterdir()] == ["listen.json"]
    assert base_url("::", 1) == "http://[::1]:1"
    assert base_url("::1", 1) == "http://[::1]:1"
    assert base_url("localhost", 1) == "http://localhost:1"
    (tmp_path / "listen.json").write_text("{not json")
    assert read_listening(tmp_path) is None


# -- a real bridge ---------------------------------------------------------------------------------


class PortBridge(BridgeProcess):
    """`aep-bridge run --config FILE --port P`: the port the config does not say."""

    def __init__(self, config: Path, log: Path, port: int) -> None:
        super().__init__(config, log)
        self.port = port

    def spawn(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "aep_bridge", "run"),
                    *("--config", str(self.config), "--port", str(self.port)),
                ],
                cwd=ROOT,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self.proc


CONSOLE = {"console": {"approvers": ["local"], "read_input": False}}


@pytest.fixture
async def bridge(tmp_path):
    """A real bridge on a free port; its config names another (where nothing listens)."""
    configured = free_port()
    port = free_port()
    config = write_config(tmp_path, configured, CONSOLE)
    process = PortBridge(config, tmp_path / "bridge.log", port)
    await process.start(f"http://127.0.0.1:{port}")
    yield process
    await process.aclose()


async def client(process: BridgeProcess, *args: str) -> tuple[int, str, str]:
    """An `aep-bridge` client command with the bridge's config and no `--url`."""
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "aep_bridge", *args, "--config", str(process.config)),
        cwd=ROOT,
        env=process.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_clients_find_the_bridge_without_url(bridge):
    state = bridge.config.parent / "state"
    found = read_listening(state)
    assert found is not None
    assert (found.host, found.port) == ("127.0.0.1", bridge.port)
    golden = AEP_FIXTURES / "golden" / "golden.jsonl"
    status, _, err = await client(bridge, "emit", str(golden))
    assert status == 0, err
    assert f"sent 64 event(s) to http://127.0.0.1:{bridge.port}/events" in err


async def test_status_shows_channels_and_the_pending_question_then_ask_gets_its_answer(bridge):
    asker = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "aep_bridge", "ask", "Deploy to staging?"),
        *("--option", "allow", "--option", "deny", "--timeout", "30"),
        *("--config", str(bridge.config)),
        cwd=ROOT,
        env={**bridge.env(), "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert asker.stderr is not None
    first = await asyncio.wait_for(asker.stderr.readline(), 30)
    assert b"waiting for an answer" in first

    async def pending() -> dict[str, Any]:
        status, out, err = await client(bridge, "status", "--json")
        assert status == 0, err
        report = json.loads(out)
        return report if report["pending"]["count"] else {}

    report: dict[str, Any] = {}
    for _ in range(100):
        if report := await pending():
            break
        await asyncio.sleep(0.1)
    assert report, "the question never showed as pending"
    assert report["running_channels"] == 1
    assert report["channels"] == [
        {"name": "console", "type": "console", "state": "running", "outbox": {"queued": 0}}
    ]
    assert report["sources"] == [{"name": "embedded", "kind": "embedded", "state": "consuming"}]
    [session] = report["pending"]["sessions"]
    assert session["agent"] == "aep-bridge-ask"
    assert session["count"] == 1
    assert report["pid"] == bridge.proc.pid
    assert {"version", "uptime"} <= set(report)

    status, out, err = await client(bridge, "status")
    assert status == 0, err
    assert out.startswith(f"bridge at http://127.0.0.1:{bridge.port}: aep-bridge ")
    assert "  console (console): running, outbox 0 queued\n" in out
    assert "  embedded: consuming\n" in out
    assert "pending questions: 1 in 1 session(s), oldest waiting " in out
    assert f"  aep-bridge-ask {session['session']}: 1 waiting, the oldest for " in out
    assert "; owner local (" in out  # whose token sent it, and its host (issue 34)

    token = bridge.token()
    async with connect(
        f"ws://127.0.0.1:{bridge.port}/socket",
        additional_headers={"Authorization": f"Bearer {token}"},
    ) as ws:
        await ws.send(
            json.dumps(
                {
                    "type": "hello",
                    "versions": ["0.1"],
                    "role": "consumer",
                    "identity": {"agent": "phone", "instance": "t"},
                    "capabilities": {},
                }
            )
        )
        await ws.recv()
        await ws.send(
            json.dumps(
                {
                    "type": "subscribe",
                    "id": "s",
                    "from": "all",
                    "filter": {"agent": "aep-bridge-ask"},
                }
            )
        )
        async with asyncio.timeout(20):
            while '"attention.requested"' not in (frame := str(await ws.recv())):
                pass
        request = parse_event(frame)
        command = make_respond_command(
            request, Answer(option="allow"), source="aep://phone/agent/phone", agent="phone"
        )
        await ws.send(command.raw.decode())
    out_b, err_b = await asyncio.wait_for(asker.communicate(), 30)
    assert asker.returncode == 0, err_b.decode()
    assert out_b.decode().strip() == "allow"
    for _ in range(100):
        status, out, _ = await client(bridge, "status", "--json")
        if json.loads(out)["pending"]["count"] == 0:
            break
        await asyncio.sleep(0.1)
    assert json.loads(out)["pending"] == {"count": 0, "oldest_age": None, "sessions": []}


async def test_an_agents_session_id_cannot_forge_a_line_of_status(bridge, tmp_path):
    """The outside review's nl.jsonl: a session id with newlines printed a fake pending
    session and a fake `store: fine` line. Every value the report prints on a line of its
    own is one line now, its newlines shown as `\\n`."""
    session = "s1\n  evil-agent s_other: 9 waiting, the oldest for 0s\nstore: fine"
    event = {
        "aep": "0.1",
        "id": "01JDEMQ5D3M0000000000ZZZZ9",
        "type": "attention.requested",
        "time": "2026-12-06T07:00:00.000Z",
        "source": "aep://localhost/agent/x/session/nl",
        "agent": "claude-code",
        "session": session,
        "seq": 0,
        "capture": "full",
        "data": {
            "kind": "permission",
            "prompt": "p",
            "options": [{"id": "a", "label": "A"}],
            "respond_via": ["control"],
        },
    }
    log = tmp_path / "nl.jsonl"
    log.write_text(json.dumps(event) + "\n")
    status, _, err = await client(bridge, "emit", str(log))
    assert status == 0, err
    out = ""
    for _ in range(100):
        status, out, err = await client(bridge, "status")
        if "pending questions: 1" in out:
            break
        await asyncio.sleep(0.1)
    assert status == 0, err
    lines = out.splitlines()
    assert not [
        line
        for line in lines
        if "evil-agent" in line and not line.startswith("  claude-code s1\\n")
    ], out
    assert [line for line in lines if line.startswith("store:")] == [lines[-1]], out
    assert (
        "  claude-code s1\\n  evil-agent s_other: 9 waiting, the oldest for 0s\\nstore: fine: "
        "1 waiting, the oldest for "
    ) in out


async def test_ask_prints_a_typed_answer_on_one_line(bridge):
    """`ask` prints the answer alone on a line (scripts read it): an answer typed with a
    newline cannot add a line, such as one that looks like the bridge's error."""
    asker = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "aep_bridge", "ask", "Why?", "--kind", "input"),
        *("--timeout", "30", "--config", str(bridge.config)),
        cwd=ROOT,
        env={**bridge.env(), "PYTHONUNBUFFERED": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    token = bridge.token()
    async with connect(
        f"ws://127.0.0.1:{bridge.port}/socket",
        additional_headers={"Authorization": f"Bearer {token}"},
    ) as ws:
        hello = {"type": "hello", "versions": ["0.1"], "role": "consumer", "capabilities": {}}
        await ws.send(json.dumps({**hello, "identity": {"agent": "phone", "instance": "t"}}))
        await ws.recv()
        subscribe = {"type": "subscribe", "id": "s", "from": "all"}
        await ws.send(json.dumps({**subscribe, "filter": {"agent": "aep-bridge-ask"}}))
        async with asyncio.timeout(20):
            while '"attention.requested"' not in (frame := str(await ws.recv())):
                pass
        command = make_respond_command(
            parse_event(frame),
            Answer(text="because\naep-bridge: error: forged"),
            source="aep://phone/agent/phone",
            agent="phone",
        )
        await ws.send(command.raw.decode())
        out_b, err_b = await asyncio.wait_for(asker.communicate(), 30)
    assert asker.returncode == 0, err_b.decode()
    assert out_b.decode() == "text: because\\naep-bridge: error: forged\n"


async def test_the_real_route_refuses_without_the_token_and_through_a_foreign_host(bridge):
    url = f"http://127.0.0.1:{bridge.port}/status"
    async with httpx.AsyncClient() as http:
        assert (await http.get(url)).status_code == 401
        bearer = {"Authorization": f"Bearer {bridge.token()}"}
        foreign = await http.get(url, headers={**bearer, "Host": "rebound.example"})
        assert foreign.status_code == 403
        browser = await http.get(url, headers={**bearer, "Origin": "https://evil.example"})
        assert browser.status_code == 403
        assert (await http.get(url, headers=bearer)).status_code == 200


async def test_a_clean_stop_removes_listen_json_and_a_killed_bridge_misleads_nobody(tmp_path):
    configured = free_port()
    port = free_port()
    config = write_config(tmp_path, configured, CONSOLE)
    process = PortBridge(config, tmp_path / "bridge.log", port)
    await process.start(f"http://127.0.0.1:{port}")
    assert read_listening(tmp_path / "state") is not None
    assert await process.aclose() == 0
    assert not (tmp_path / "state" / "listen.json").exists()

    await process.start(f"http://127.0.0.1:{port}")
    process.kill()
    assert read_listening(tmp_path / "state") is not None  # left behind by SIGKILL
    status, _, err = await client(process, "status")
    assert status == 2
    assert f"listens at http://127.0.0.1:{port}, but nothing answers there" in err
    assert f"no bridge answers at http://127.0.0.1:{configured}" in err  # the fallback


async def test_status_says_loudly_when_no_channel_runs(tmp_path):
    port = free_port()
    config = write_config(tmp_path, port, {"team": {"type": "no-such-channel"}})
    process = BridgeProcess(config, tmp_path / "bridge.log")
    await process.start(f"http://127.0.0.1:{port}")
    try:
        status, out, err = await client(process, "status")
        assert status == 1, err
        assert "no channel is running: nothing shows your agents' sessions" in out
        assert "  team (no-such-channel): FAILED: config: channels.team.type" in out
        status, out, err = await client(process, "status", "--json")
        assert status == 1
        assert json.loads(out)["running_channels"] == 0
        assert "no channel is running" in err
    finally:
        await process.aclose()


# -- the store's size ------------------------------------------------------------------------------


def _session_lines(session: str, count: int) -> list[bytes]:
    """A short session as NDJSON lines: started, `count` progress events of about 2 KB, ended."""
    source = f"aep://laptop/agent/demo/session/{session}"
    events = [make_event("session.started", source=source, agent="demo", session=session, seq=0)]
    events += [
        make_event(
            "progress.status",
            source=source,
            agent="demo",
            session=session,
            seq=i,
            data={"percent": i, "message": "x" * 2000},
        )
        for i in range(1, count + 1)
    ]
    events.append(
        make_event(
            "session.ended",
            source=source,
            agent="demo",
            session=session,
            seq=count + 1,
            data={"reason": "normal"},
        )
    )
    return [e.raw for e in events]


async def test_status_shows_the_store_size_and_the_replay_buffers_against_their_budget(tmp_path):
    """`aep-bridge status` (and its JSON) shows state.db and its WAL on disk and the replay
    buffers' bytes against `intake.max_replay_bytes`; a real bridge fed three times its
    budget through `POST /events` holds no more than the budget."""
    port = free_port()
    config = tmp_path / "bridge.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "listen": {"host": "127.0.0.1", "port": port},
                "intake": {"max_replay_bytes": 1048576},
                "channels": CONSOLE,
            }
        )
    )
    process = BridgeProcess(config, tmp_path / "bridge.log")
    await process.start(f"http://127.0.0.1:{port}")
    try:
        headers = {
            "Authorization": f"Bearer {process.token()}",
            "AEP-Version": "0.1",
            "Content-Type": "application/x-ndjson",
        }
        async with httpx.AsyncClient(timeout=60) as http:
            for k in range(30):  # 30 sessions of some 100 KB: 3 MB
                body = b"\n".join(_session_lines(f"s{k}", 50))
                posted = await http.post(
                    f"http://127.0.0.1:{port}/events", content=body, headers=headers
                )
                assert posted.status_code == 202, posted.text
        status, out, err = await client(process, "status", "--json")
        assert status == 0, err
        store = json.loads(out)["store"]
        state = tmp_path / "state"
        assert store["path"] == str(state / "state.db")
        replay = store["replay"]
        assert replay["budget"] == 1048576
        assert 0 < replay["bytes"] <= 1048576
        assert store["bytes"] - store["wal_bytes"] > replay["bytes"]  # the file holds them
        assert store["free_bytes"] >= 0
        assert 0 < replay["sessions"] < 30
        assert replay["retention"] == 3600
        status, out, err = await client(process, "status")
        assert status == 0, err
        [line] = [line for line in out.splitlines() if line.startswith("store: ")]
        assert " on disk" in line
        assert " of 1.0 MB in " in line
    finally:
        await process.aclose()


async def test_a_bridge_forgets_the_records_of_long_ended_sessions_when_it_starts(tmp_path):
    """`store.session_retention_days`: the records of a session that ended longer ago go at
    start (its thread, questions, answers, positions); an open session's stay."""
    state = tmp_path / "state"
    with Store.open(state) as store:
        for id_, name in (("sOld", "old"), ("sOpen", "open")):
            with store.transaction():
                store.add_session(id_, f"aep://laptop/agent/a/session/{name}", name, "x", "a", name)
                store.add_thread(id_, "console", name)
        store.end_session("sOld")
        long_ago = time.time() - 8 * 86400
        store.execute("UPDATE sessions SET updated = ? WHERE id = 'sOld'", (long_ago,))
    port = free_port()
    config = tmp_path / "bridge.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(state),
                "listen": {"host": "127.0.0.1", "port": port},
                "store": {"session_retention_days": 7},
                "channels": CONSOLE,
            }
        )
    )
    process = BridgeProcess(config, tmp_path / "bridge.log")
    await process.start(f"http://127.0.0.1:{port}")
    assert await process.aclose() == 0
    assert "forgot 1 session(s) that ended over 7 days ago" in process.log.read_text()
    with Store.open(state) as store:
        assert [row[0] for row in store.session_rows()] == ["sOpen"]
        assert [row[0] for row in store.thread_rows()] == ["sOpen"]
