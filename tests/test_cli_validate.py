"""`aep-bridge validate`, run as a user runs it: a real process on real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared_data import AEP_FIXTURES, load_json

GOLDEN = AEP_FIXTURES / "golden" / "golden.jsonl"


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "validate", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_golden_log_is_clean():
    result = run(str(GOLDEN))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""
    assert "ok: 64 line(s), 64 valid event(s)" in result.stderr


@pytest.fixture
def invalid_log(tmp_path: Path) -> tuple[Path, list[dict]]:
    """Every invalid case, each in its own emitter's namespace so cases cannot mask each other."""
    cases = load_json("invalid/cases.json")["cases"]  # type: ignore[index]
    path = tmp_path / "invalid.jsonl"
    with path.open("w") as out:
        for case in cases:
            for event in case.get("events") or [case["event"]]:
                out.write(json.dumps(event) + "\n")
    return path, cases


def test_a_log_of_the_invalid_cases_fails_listing_every_rule(invalid_log):
    path, cases = invalid_log
    result = run(str(path))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert all(line.startswith(f"{path}:") for line in lines)
    reported = " | ".join(lines)
    for rule in {
        "AEP-0001 §5.2",
        "AEP-0004 §2.2",
        "AEP-0002 §7.3",
        "AEP-0001 §6",
        "AEP-0002 §3",
        "AEP-0001 §5.4",
        "AEP-0001 §8.1",
        "AEP-0001 §5.1 #14",
        "AEP-0001 §5.1 #1",
        "AEP-0001 §5.1 #11",
        "AEP-0002 §5.2",
        "AEP-0002 §5.3",
        "AEP-0002 §2",
        "AEP-0002 §7.2",
        "AEP-0001 §7.4",
        "AEP-0001 §7.2",
        "AEP-0004 §3",
        "AEP-0002 §5.4",
    }:
        assert f": {rule}: " in reported, rule
    assert len(lines) >= len(cases)


def test_bad_lines_are_named_and_the_rest_of_the_file_is_still_checked(tmp_path: Path):
    golden = GOLDEN.read_text().splitlines()
    log = tmp_path / "mixed.jsonl"
    oversized = '{"aep": "0.1", "id": "' + "x" * 5000 + '"}'
    log.write_text(
        "\n".join(
            [
                golden[0],
                "this is not json",
                "[1, 2, 3]",
                json.dumps({**json.loads(golden[1]), "aep": "2.0"}),
                oversized,
                golden[1],
                golden[1].replace('"seq":1', '"seq":0'),  # a second event at a used position
            ]
        )
        + "\n"
    )
    result = run(str(log), "--max-bytes", "4096")
    assert result.returncode == 1
    out = result.stdout
    assert f"{log}:2: RFC 8259: not valid JSON" in out
    assert f"{log}:3: AEP-0001 §5: an event is a JSON object, not a JSON array" in out
    assert f"{log}:4: AEP-0003 §3.1: unsupported AEP major version '2.0'" in out
    size = len(oversized)
    assert f"{log}:5: AEP-0003 §3.2: line is {size} bytes, over the 4096-byte event limit" in out
    assert f"{log}:7: AEP-0001 §7.4" in out  # same (source, id) as line 6, different content
    assert f"{log}:6:" not in out


def test_json_report_and_stdin(invalid_log):
    path, _ = invalid_log
    result = run("--json", "-", stdin=path.read_bytes())
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["lines"] == sum(1 for _ in path.open())
    first = report["violations"][0]
    assert first == {
        "file": "<stdin>",
        "line": 1,
        "rule": "AEP-0001 §5.2",
        "message": "session-scoped run.started must carry session and seq (no session)",
    }
    clean = json.loads(run("--json", str(GOLDEN)).stdout)
    assert clean["ok"] is True
    assert clean["valid_events"] == 64
    assert clean["violations"] == []


def test_files_are_one_stream_in_the_order_given(tmp_path: Path):
    """A log rotated in two parts is one stream: a collision across the parts is found."""
    lines = GOLDEN.read_text().splitlines()
    (tmp_path / "a.jsonl").write_text("\n".join(lines[:10]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join(lines[10:]) + "\n")
    assert run(str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")).returncode == 0
    assert run(str(tmp_path / "b.jsonl"), str(tmp_path / "a.jsonl")).returncode == 1


def test_a_missing_file_is_a_usage_error():
    result = run("/nonexistent/session.jsonl")
    assert result.returncode == 2
    assert "cannot read /nonexistent/session.jsonl" in result.stderr


def test_an_agents_words_cannot_forge_a_line_of_the_report(tmp_path: Path):
    """A form field's id is the agent's: a newline in it, quoted in a violation's place,
    would print a line of its own (here one that looks like the bridge's error). Each
    violation is one line, the newline shown as `\\n`."""
    field = "f\naep-bridge: error: forged"
    common = {"aep": "0.1", "time": "2026-12-06T07:00:00.000Z", "agent": "x", "session": "s"}
    source = "aep://h/agent/x/session/s"
    events = [
        {
            **common,
            "id": "01JDEMQ5D3M0000000000ZZZZ1",
            "type": "attention.requested",
            "source": source,
            "seq": 0,
            "capture": "full",
            "data": {
                "kind": "form",
                "prompt": "p",
                "fields": [{"id": field, "type": "string", "label": "L", "required": True}],
                "respond_via": ["control"],
            },
        },
        {
            **common,
            "id": "01JDEMQ5D3M0000000000ZZZZ2",
            "type": "control.attention.respond",
            "source": "aep://h/agent/phone",
            "agent": "phone",
            "subject": "01JDEMQ5D3M0000000000ZZZZ1",
            "capture": "full",
            "data": {"answer": {"values": {}}},
        },
    ]
    path = tmp_path / "forged.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    result = run(str(path))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith(f"{path}:2: AEP-0002 §5.3: required form field")
    assert lines[0].endswith("at data.answer.values.f\\naep-bridge: error: forged")
