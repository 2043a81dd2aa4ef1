"""`aep-bridge emit --demo`: the recorded session in the package, and sending it, twice over."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.aep.validation import parse_event
from aep_bridge.cli import validate
from aep_bridge.demo import RECORDED_SESSION, fresh_session, recorded
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config
from tests.official import is_valid

# the command as a user runs it (in a process of its own)
BRIDGE = [sys.executable, "-m", "aep_bridge"]
EMIT = [*BRIDGE, "emit"]
LABEL = "Fix the CSV export totals that are off by a cent"


def _events(lines: list[str] | list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


def test_the_demo_validates_as_a_log():
    with resources.as_file(resources.files("aep_bridge.demo") / "session.jsonl") as path:
        checked = subprocess.run(
            [*BRIDGE, "validate", str(path)], capture_output=True, text=True, timeout=60
        )
    assert checked.returncode == 0, checked.stdout
    assert checked.stderr.startswith("ok: 46 line(s), 46 valid event(s), 1 session(s)")


def test_every_demo_event_passes_the_official_schemas():
    events = _events(recorded().splitlines())
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert all(is_valid(e) for e in events)


def test_the_demo_is_a_whole_coding_session():
    events = _events(recorded().splitlines())
    types = [e["type"] for e in events]
    assert types[0] == "session.started"
    assert types[-2:] == ["run.finished", "session.ended"]
    started = events[0]["data"]
    assert started["label"] == LABEL
    assert started["cwd"]
    assert started["gen_ai.request.model"]
    for needed in (
        "message.user.submitted",
        "run.started",
        "progress.task.planned",
        "progress.task.completed",
        "tool.failed",
        "attention.requested",
        "attention.answered",
        "attention.resolved",
        "message.agent.replied",
    ):
        assert needed in types, needed
    requested = [e["data"] for e in events if e["type"] == "tool.requested"]
    assert len(requested) == 15
    tools = {d["tool"]["name"] for d in requested}
    assert tools == {
        "TodoWrite",
        "Grep",
        "Read",
        "Bash",
        "Write",
        "Edit",
        "MultiEdit",
        "mcp__github__create_pull_request",
    }
    assert all(d["args_redacted"]["pattern"] for d in requested if d["tool"]["name"] == "Grep")
    edit = next(d["args_redacted"] for d in requested if d["tool"]["name"] == "Edit")
    assert edit["old_string"]
    assert edit["new_string"]
    failed = next(e for e in events if e["type"] == "tool.failed")["data"]["error"]["message"]
    assert failed.splitlines()[-2] == (
        "FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01"
    )
    results = [
        e["data"].get("result_redacted", "") for e in events if e["type"] == "tool.completed"
    ]
    assert any("150 passed" in r for r in results)
    assert any(r.startswith("--- a/") and "\n+++ b/" in r and "\n@@ " in r for r in results)
    ask = next(e for e in events if e["type"] == "attention.requested")["data"]
    assert ask["kind"] == "permission"
    assert "git push" in ask["prompt"]
    assert [o["id"] for o in ask["options"]] == ["allow", "deny"]
    replies = [e["data"]["text"] for e in events if e["type"] == "message.agent.replied"]
    assert any("**" in text and "`" in text for text in replies)
    final = replies[-1]
    for markdown in ("## ", "**", "`", "](https://", "| file | change |", "\n- "):
        assert markdown in final, markdown
    assert events[-2]["data"]["cost"]["currency"] == "USD"


def test_a_fresh_session_has_new_ids_a_new_session_and_todays_times():
    now = datetime(2027, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    old = _events(recorded().splitlines())
    new = _events(fresh_session(now=now, session="s_fresh"))
    assert [e["type"] for e in new] == [e["type"] for e in old]
    assert [e["seq"] for e in new] == [e["seq"] for e in old]
    old_ids = {e["id"] for e in old}
    new_ids = [e["id"] for e in new]
    assert len(set(new_ids)) == len(new)
    assert not old_ids & set(new_ids)
    assert {e["session"] for e in new} == {"s_fresh"}
    assert {e["source"] for e in new} == {"aep://localhost/agent/claude-code/session/s_fresh"}
    assert new[-1]["time"] == "2027-01-02T03:04:05.678Z"
    times = [datetime.fromisoformat(e["time"].replace("Z", "+00:00")) for e in new]
    assert times == sorted(times)
    assert now - times[0] == timedelta(seconds=96.3)  # the gaps are kept
    for before, after in zip(old, new, strict=True):  # causes and subjects follow the ids
        for key in ("cause", "subject"):
            if before.get(key) in old_ids:
                assert after[key] == new_ids[[e["id"] for e in old].index(before[key])]
            else:
                assert after.get(key) == before.get(key)
    assert all(parse_event(line).session == "s_fresh" for line in fresh_session(session="s_fresh"))


def test_a_fresh_session_validates_as_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    log = tmp_path / "demo.jsonl"
    lines = fresh_session()
    assert RECORDED_SESSION.encode() not in b"".join(lines)
    log.write_bytes(b"\n".join(lines) + b"\n")
    assert validate([str(log)]) == 0, capsys.readouterr().out
    assert all(is_valid(json.loads(line)) for line in lines)


def test_two_fresh_sessions_share_nothing():
    first, second = _events(fresh_session()), _events(fresh_session())
    assert first[0]["session"] != second[0]["session"]
    assert not {e["id"] for e in first} & {e["id"] for e in second}


def test_emit_needs_a_file_or_demo():
    refused = subprocess.run(
        [*EMIT, "--url", "http://127.0.0.1:9", "--token", "t"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "give the FILE.jsonl to send (- for stdin), or --demo" in refused.stderr


async def test_emit_demo_twice_shows_the_session_twice_on_the_console(tmp_path: Path):
    port = free_port()
    config = write_config(
        tmp_path, port, {"console": {"approvers": ["local"], "read_input": False}}
    )
    bridge = BridgeProcess(config, tmp_path / "bridge.log")
    await bridge.start(f"http://127.0.0.1:{port}")
    try:
        for _ in range(2):
            sent = subprocess.run(
                [*EMIT, "--demo", "--config", str(config)],
                cwd=ROOT,
                env=bridge.env(),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert sent.returncode == 0, sent.stderr
            assert f"sent 46 event(s) to http://127.0.0.1:{port}/events" in sent.stderr

        def shown() -> str | None:
            log = bridge.log.read_text(errors="replace")
            return log if log.count("ended: Session ended (normal)") >= 2 else None

        log = await bridge.until("both demo sessions to end on the console", shown, 30)
    finally:
        await bridge.aclose()
    assert log.count(f"session {LABEL}") == 2, log
    for text in (
        f"[{LABEL}] User: The totals in the CSV export are off by a cent",
        "plan: Plan",
        "tool: ❌ Bash python -m pytest tests/test_totals.py -q — exit 1",
        "FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01",
        "tool: ✅ Bash python -m pytest -q — 150 passed",
        # the card's further lines indented, as the console prints every message's: the
        # folder, then the command (issue 32)
        "? claude-code asks permission: Bash\n  Folder: ~/src/invoicer\n\n"
        "  git push -u origin fix/rounding-half-up",
        "and round half-up, then make the export write the same value.",
    ):
        assert log.count(text) >= 2, f"{text!r} not shown twice:\n{log}"
    assert "Traceback" not in log
