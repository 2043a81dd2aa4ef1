"""Capture gating beyond the fixtures: the annotation table, redacting hops, bytes kept."""

from __future__ import annotations

import json

import pytest

from aep_bridge.aep.capture import downlevel, field_levels
from aep_bridge.aep.redaction import RedactionPolicy, Redactor
from aep_bridge.aep.validation import parse_event, validate_event
from tests.shared_data import AEP_SCHEMAS

SCHEMA_FILES = sorted((AEP_SCHEMAS / "types").glob("*.schema.json"))


def _schema_annotations(path) -> dict[str, str]:
    table: dict[str, str] = {}

    def walk(node: dict, base: str) -> None:
        for name, sub in (node.get("properties") or {}).items():
            here = f"{base}.{name}" if base else name
            table[here] = sub.get("x-aep-capture", "metadata")
            walk(sub, here)
            if isinstance(sub.get("items"), dict):
                walk(sub["items"], here + "[]")

    walk(json.loads(path.read_text()), "")
    return table


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=[p.name for p in SCHEMA_FILES])
def test_field_levels_are_the_schemas_x_aep_capture(path):
    assert field_levels(path.name.removesuffix(".schema.json")) == _schema_annotations(path)


def _full_tool_call() -> dict:
    return {
        "aep": "0.1",
        "id": "T1",
        "type": "tool.requested",
        "subject": "Bash",
        "time": "2026-07-03T10:00:00Z",
        "source": "aep://h/agent/a",
        "agent": "a",
        "session": "s1",
        "seq": 1,
        "capture": "full",
        "data": {
            "tool": {"name": "Bash", "call_id": "c1"},
            "args": {"command": "deploy --password hunter2secret"},
            "args_redacted": {"command": "deploy --token=ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345"},
            "args_digest": "0123456789abcdef0123456789abcdef",
        },
    }


def test_mechanical_hop_never_mints_redacted_from_full():
    out = downlevel(validate_event(_full_tool_call()), "redacted")
    assert out.capture == "metadata"
    assert out.data == {
        "tool": {"name": "Bash", "call_id": "c1"},
        "args_digest": "0123456789abcdef0123456789abcdef",
    }


def test_redacting_hop_keeps_redacted_fields_after_the_pipeline():
    redactor = Redactor(RedactionPolicy(home="/home/op"))
    out = downlevel(validate_event(_full_tool_call()), "redacted", redactor=redactor)
    assert out.capture == "redacted"
    assert "args" not in out.data
    text = json.dumps(out.data)
    assert "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345" not in text
    assert "[REDACTED:secret]" in text
    assert out.data["tool"] == {"name": "Bash", "call_id": "c1"}


def test_redacting_hop_redacts_the_prompt_of_a_full_attention_request():
    request = {
        "aep": "0.1",
        "id": "R1",
        "type": "attention.requested",
        "subject": "Bash",
        "time": "2026-07-03T10:00:00Z",
        "source": "aep://h/agent/a",
        "agent": "a",
        "session": "s1",
        "seq": 2,
        "capture": "full",
        "data": {
            "kind": "permission",
            "prompt": "Run curl -H 'Authorization: Bearer abcdef123456789'?",
            "options": [{"id": "allow", "label": "Allow"}],
            "context": {"cwd": "/home/op/x"},
        },
    }
    out = downlevel(validate_event(request), "redacted", redactor=Redactor(RedactionPolicy()))
    assert out.capture == "redacted"
    assert "abcdef123456789" not in out.data["prompt"]
    assert out.data["prompt"].startswith("Run curl")
    assert "context" not in out.data  # full-gated


def test_an_event_within_the_ceiling_is_passed_on_as_the_same_bytes():
    line = json.dumps(_full_tool_call()).encode()
    event = parse_event(line)
    assert downlevel(event, "full") is event
    assert downlevel(event, "full").raw == line


def test_ceiling_none_leaves_the_envelope_only():
    out = downlevel(validate_event(_full_tool_call()), "none")
    assert out.capture == "none"
    assert out.data is None
    assert "data" not in out.to_dict()
    assert out.id == "T1"
    assert out.seq == 1
