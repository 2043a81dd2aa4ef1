"""Interop: the official Python SDK and the official JSON Schemas as independent peers.

Events the SDK builds must validate and fold through our layer; every event and command our
code builds must pass the official schemas (jsonschema with its format checker).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aep_sdk import Emitter
from aep_sdk.testing import ControlStub, MemorySink, ScriptedSource

from aep_bridge.aep.build import make_command, make_event, make_respond_command, make_routed
from aep_bridge.aep.capture import downlevel
from aep_bridge.aep.errors import InvalidEvent
from aep_bridge.aep.payloads import Answer, ControlCancel
from aep_bridge.aep.redaction import Redactor
from aep_bridge.aep.stream import StreamChecker
from aep_bridge.aep.validation import parse_event, validate_event
from tests import official
from tests.shared_data import AEP_FIXTURES

GOLDEN = [
    parse_event(line) for line in (AEP_FIXTURES / "golden/golden.jsonl").read_bytes().splitlines()
]
BRIDGE = {"source": "aep://localhost/agent/aep-bridge", "agent": "aep-bridge"}


def _sdk_session_events() -> list[dict[str, Any]]:
    sink = MemorySink()
    emitter = Emitter("claude-code", "host-a", sink, capture="redacted")
    emitter.emit("agent.presence", {"state": "online"})
    session = emitter.session("s_sdk")
    started = session.emit("session.started", {"client": {"name": "claude-code"}, "cwd": "/w"})
    run = session.emit("run.started", {"trigger": "user"}, run="r1", cause=started["id"])
    session.emit("tool.requested", {"tool": {"name": "Bash", "call_id": "t1"}}, run="r1")
    request = session.emit(
        "attention.requested",
        {
            "kind": "permission",
            "prompt": "Run rm -rf build/?",
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
            "respond_via": ["control"],
        },
        run="r1",
        severity="notice",
    )
    session.emit(
        "attention.answered",
        {"answer": {"option": "allow"}, "via": "control"},
        subject=request["id"],
        cause=request["id"],
    )
    session.emit("attention.resolved", {"resolution": "answered"}, subject=request["id"])
    session.emit("tool.completed", {"tool": {"name": "Bash", "call_id": "t1"}, "duration_ms": 5})
    session.emit(
        "run.finished",
        {"duration_ms": 10, "gen_ai.usage.input_tokens": 3},
        run="r1",
        cause=run["id"],
    )
    session.emit("session.ended", {"reason": "normal"})
    return sink.events


def test_sdk_events_validate_and_fold_without_violation():
    events = _sdk_session_events()
    checker = StreamChecker()
    for wire in events:
        event = parse_event(json.dumps(wire))
        assert checker.fold(event) == []
    assert checker.summary().sessions == 1


def test_sdk_scripted_sources_and_control_stub_interoperate():
    script = ScriptedSource(agent="codex", host="h")
    a, b = script.session("s1"), script.session("s1", epoch=1)
    a.emit("run.started", {"trigger": "user"}, run="r1")
    b.emit("run.finished", {}, run="r1")
    stub = ControlStub(session="s1")
    command = stub.command("control.cancel", "s1", data={"scope": "run"})
    ack = stub.accept(command)
    checker = StreamChecker()
    for wire in [*script.events, command, ack]:
        assert checker.fold(validate_event(wire)) == []
    assert validate_event(command).is_command


def test_an_sdk_stream_with_a_seq_regression_is_caught():
    """The SDK lets a caller reuse a position; our checker must say so."""
    events = _sdk_session_events()
    events[3] = {**events[3], "seq": 1}
    checker = StreamChecker()
    found = [v for wire in events for v in checker.fold(validate_event(wire))]
    assert [v.rule for v in found] == ["AEP-0001 §7.2"]


def _request() -> Any:
    return next(
        e for e in GOLDEN if e.type == "attention.requested" and e.data["kind"] == "permission"
    )


def _form() -> Any:
    return next(e for e in GOLDEN if e.type == "attention.requested" and e.data["kind"] == "form")


def _built() -> list[Any]:
    request, form = _request(), _form()
    fields = form.data["fields"]
    values = {
        f["id"]: (
            f["choices"][0]["id"]
            if f["type"] == "select"
            else {"string": "billing", "number": 2, "boolean": True}[f["type"]]
        )
        for f in fields
    }
    return [
        make_respond_command(request, Answer(option="allow"), **BRIDGE),
        make_respond_command(request, Answer(text="use the staging registry"), **BRIDGE),
        make_respond_command(form, Answer(values=values), **BRIDGE),
        make_routed(request, to="telegram", via="aep-bridge", **BRIDGE),
        make_command("control.cancel", session="s_8f2c", data=ControlCancel(scope="run"), **BRIDGE),
        make_command("control.pause", session="s_8f2c", **BRIDGE),
        make_command("control.resume", session="s_8f2c", **BRIDGE),
        make_event("agent.presence", data={"state": "online"}, **BRIDGE),
        make_event("x.aep-bridge.session.note", session="b1", seq=0, data={"n": 1}, **BRIDGE),
    ]


@pytest.mark.parametrize("index", range(9))
def test_events_and_commands_we_build_pass_the_official_schemas(index: int):
    official.assert_valid(_built()[index].to_dict())


def test_respond_commands_follow_the_control_profile():
    request = _request()
    command = make_respond_command(request, Answer(option="allow"), **BRIDGE)
    wire = command.to_dict()
    assert wire["type"] == "control.attention.respond"
    assert wire["subject"] == wire["cause"] == request.id
    assert wire["session"] == request.session
    assert "seq" not in wire
    assert wire["capture"] == "metadata"
    text = make_respond_command(request, Answer(text="deny: wrong dir"), **BRIDGE)
    assert text.capture == "full"  # words a person typed, sent verbatim: honest capture


@pytest.mark.parametrize("ceiling", ["none", "metadata", "redacted"])
def test_every_downlevelled_golden_event_passes_the_official_schemas(ceiling: str):
    for event in GOLDEN:
        official.assert_valid(downlevel(event, ceiling).to_dict())
        official.assert_valid(downlevel(event, ceiling, redactor=Redactor()).to_dict())


def test_answering_something_that_is_not_a_request_is_refused():
    with pytest.raises(ValueError, match=r"attention\.requested"):
        make_respond_command(GOLDEN[0], Answer(option="allow"), **BRIDGE)
    with pytest.raises(InvalidEvent):
        make_event("run.started", session="s", **BRIDGE)  # no seq: refused, never emitted
