"""The Codex hook mapping: the official Annex A pins, the capture ceiling, the decision JSON.

Every hook entry of the conformance fixture `mappings/codex.json` (and its fallback) must map to
exactly the pinned `{type, data, subject}` at the default ceiling; every emission must make a
valid event under our validation and the official schemas; words the human must not see (a
secret in a command, any command at a `metadata` ceiling) never reach the event.
"""

from __future__ import annotations

from typing import Any

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.aep.redaction import digest
from aep_bridge.aep.registry import CAPTURE_RANK
from aep_bridge.agents.codex import (
    AGENT,
    DEFAULT_DENY_MESSAGE,
    MAPPED,
    hook_output,
    identity,
    map_hook,
    session_rule_key,
)
from aep_bridge.agents.mapping import ALLOW, ALLOW_SESSION, DENY, Ceiling, Emission, Verdict
from tests.official import assert_valid
from tests.shared_data import load_json

FIXTURE: dict[str, Any] = load_json("mappings/codex.json")  # type: ignore[assignment]
CASES = {**FIXTURE["hooks"], "fallback": FIXTURE["fallback"]}
FULL = Ceiling(events="full", attention="full")
METADATA = Ceiling(events="metadata", attention="metadata")
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # 36 characters after the prefix


def _input(name: str) -> dict[str, Any]:
    return dict(CASES[name]["input"])


def _event(emission: Emission, payload: dict[str, Any]) -> dict[str, Any]:
    """The emission in a full envelope, validated by make_event and the official schemas."""
    session, run = identity(payload)
    event = make_event(
        emission.type,
        source="urn:aep-bridge:test",
        agent=AGENT,
        session=session or "s_test",
        seq=1,
        epoch=1,
        run=emission.run or run,
        subject=emission.subject,
        severity=emission.severity,
        capture=emission.capture,
        data=emission.data,
    )
    wire = event.to_dict()
    assert_valid(wire)
    return wire


@pytest.mark.conformance("mappings")
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_pinned_hook_maps_exactly_as_the_fixture_says(name: str) -> None:
    expected = CASES[name]["expected"]
    emissions = map_hook(_input(name))
    if expected is None:
        assert emissions == []
        return
    assert len(emissions) == 1
    got = emissions[0]
    assert got.type == expected["type"]
    assert got.data == expected["data"]
    assert got.subject == expected.get("subject")


@pytest.mark.parametrize(
    "ceiling", [Ceiling(), METADATA, FULL], ids=["default", "metadata", "full"]
)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_emission_makes_a_valid_event(name: str, ceiling: Ceiling) -> None:
    payload = _input(name)
    for emission in map_hook(payload, ceiling):
        wire = _event(emission, payload)
        assert CAPTURE_RANK[wire["capture"]] <= CAPTURE_RANK[ceiling.of(emission.type)]


def test_the_fixture_covers_the_ten_hooks_and_the_mapping_records_its_version() -> None:
    assert set(FIXTURE["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "PreToolUse",
        "PostToolUse",
        "PermissionRequest",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
    }
    assert "codex" in MAPPED.lower()
    assert "2026" in MAPPED


def test_identity_is_the_thread_and_the_turn() -> None:
    assert FIXTURE["identity"]["session_from"] == "session_id"
    assert FIXTURE["identity"]["run_from"] == "turn_id"
    assert identity(_input("PreToolUse")) == ("s_fix_1", "t_fix_1")
    assert identity(_input("SessionStart")) == ("s_fix_1", None)
    assert identity("not a payload") == (None, None)
    (emission,) = map_hook(_input("PreToolUse"))
    assert emission.run == "t_fix_1"
    (emission,) = map_hook(_input("SessionStart"))
    assert emission.run is None


def test_at_full_the_words_appear_and_the_digests_do_not_change() -> None:
    (started,) = map_hook(_input("SessionStart"), FULL)
    assert started.data["cwd"] == "/home/user/proj"
    (run,) = map_hook(_input("UserPromptSubmit"), FULL)
    assert run.data["prompt"] == "Fix the failing test"

    pre = _input("PreToolUse")
    (requested,) = map_hook(pre, FULL)
    assert requested.data["args"] == {"command": "ls -la"}
    assert requested.data["args_digest"] == CASES["PreToolUse"]["expected"]["data"]["args_digest"]
    assert requested.data["args_digest"] == digest(pre["tool_input"])
    assert requested.capture == "full"

    post = _input("PostToolUse")
    (completed,) = map_hook(post, FULL)
    assert completed.data["result"] == {"output": "total 0", "exit_code": 0}
    assert (
        completed.data["result_digest"] == CASES["PostToolUse"]["expected"]["data"]["result_digest"]
    )

    (request,) = map_hook(_input("PermissionRequest"), FULL)
    assert request.data["prompt"] == CASES["PermissionRequest"]["expected"]["data"]["prompt"]
    assert request.data["context"]["tool_input"]["command"] == "rm -rf build"


def test_at_redacted_the_args_pass_the_redaction_pipeline() -> None:
    payload = _input("PreToolUse")
    payload["tool_input"] = {"command": f"git push https://x:{TOKEN}@github.com/o/r"}
    ceiling = Ceiling(events="redacted")
    (requested,) = map_hook(payload, ceiling)
    assert "args" not in requested.data
    assert "git push" in requested.data["args_redacted"]["command"]
    assert TOKEN not in str(requested.data)
    assert requested.data["args_digest"] == digest(payload["tool_input"])  # over the original
    _event(requested, payload)


def test_a_secret_in_a_permission_command_never_reaches_the_redacted_prompt() -> None:
    payload = _input("PermissionRequest")
    payload["tool_input"] = {"command": f"export GITHUB_TOKEN={TOKEN} && gh release create v1"}
    (request,) = map_hook(payload)  # attention.* at `redacted` by default
    assert request.capture == "redacted"
    assert TOKEN not in str(request.data)
    assert request.data["prompt"].startswith("Permission requested: shell — export GITHUB_TOKEN=")
    assert "gh release create v1" in request.data["prompt"]
    assert "context" not in request.data
    _event(request, payload)


def test_at_a_metadata_ceiling_the_permission_prompt_is_structural() -> None:
    payload = _input("PermissionRequest")
    (request,) = map_hook(payload, METADATA)
    assert request.capture == "metadata"
    assert request.data["prompt"] == "codex requests permission: shell"
    assert "rm -rf" not in str(request.data)
    assert "clean build dir" not in str(request.data)
    assert request.data["options"] == [
        {"id": ALLOW, "label": "Allow"},
        {"id": DENY, "label": "Deny"},
    ]
    assert request.data["respond_via"] == ["control"]
    assert request.severity == "notice"
    assert request.subject == "shell"
    _event(request, payload)


@pytest.mark.parametrize(
    ("tool_input", "prompt"),
    [
        ({"command": "make clean"}, "Permission requested: shell — make clean"),
        (
            {"description": "network-access example.com"},
            "Permission requested: shell (network-access example.com)",
        ),
        ({}, "Permission requested: shell"),
        ("not an object", "Permission requested: shell"),
    ],
)
def test_the_permission_prompt_handles_missing_parts(tool_input: Any, prompt: str) -> None:
    payload = _input("PermissionRequest")
    payload["tool_input"] = tool_input
    (request,) = map_hook(payload)
    assert request.data["prompt"] == prompt
    _event(request, payload)


def test_hook_output_shapes() -> None:
    payload = _input("PermissionRequest")
    allow = {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "allow"},
        }
    }
    assert hook_output(payload, None) is None
    assert hook_output(payload, Verdict(option=ALLOW)) == allow
    # Codex has no session-scoped rule in its hook output: a plain allow (the daemon keeps it).
    assert hook_output(payload, Verdict(option=ALLOW_SESSION)) == allow
    assert hook_output(payload, Verdict(option=DENY, text="use make clean instead")) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "use make clean instead"},
        }
    }
    denied = hook_output(payload, Verdict(option=DENY))
    assert denied is not None
    assert denied["hookSpecificOutput"]["decision"] == {
        "behavior": "deny",
        "message": DEFAULT_DENY_MESSAGE,
    }
    # Only a PermissionRequest takes a decision; an unknown option leaves Codex to ask itself.
    assert hook_output(_input("PreToolUse"), Verdict(option=ALLOW)) is None
    assert hook_output(payload, Verdict(option="maybe")) is None
    assert hook_output("junk", Verdict(option=ALLOW)) is None


def test_the_session_rule_covers_the_same_tool_with_the_same_input() -> None:
    payload = _input("PermissionRequest")
    key = session_rule_key(payload)
    assert key is not None
    assert key.startswith("shell:")
    assert session_rule_key(dict(payload)) == key
    other = {**payload, "tool_input": {"command": "rm -rf /"}}
    assert session_rule_key(other) != key
    assert session_rule_key(_input("PreToolUse")) is None
    assert session_rule_key("junk") is None


@pytest.mark.parametrize(
    "payload",
    [
        None,
        "PreToolUse",
        ["PreToolUse"],
        {},
        {"session_id": "s"},
        {"hook_event_name": None},
        {"hook_event_name": 7},
        {"hook_event_name": ""},
    ],
)
def test_payloads_that_are_not_hooks_map_to_nothing(payload: Any) -> None:
    assert map_hook(payload) == []
    assert hook_output(payload, Verdict(option=ALLOW)) is None
    assert session_rule_key(payload) is None


@pytest.mark.parametrize(
    "ceiling", [Ceiling(), METADATA, FULL], ids=["default", "metadata", "full"]
)
@pytest.mark.parametrize("name", sorted(FIXTURE["hooks"]))
def test_malformed_fields_never_raise_and_still_make_valid_events(
    name: str, ceiling: Ceiling
) -> None:
    payload = {
        "hook_event_name": name,
        "session_id": 5,
        "turn_id": ["t"],
        "tool_name": {"x": 1},
        "tool_use_id": 3,
        "tool_input": "rm -rf build",
        "tool_response": [1, 2, 3],
        "source": 1,
        "model": None,
        "cwd": 9,
        "prompt": {"not": "text"},
        "agent_id": 0,
        "agent_type": [],
        "trigger": 1.5,
        "last_assistant_message": 2,
    }
    for emission in map_hook(payload, ceiling):
        assert emission.run is None
        _event(emission, payload)


def test_a_tool_response_that_is_not_an_object_is_shown_as_text_at_full() -> None:
    payload = {**_input("PostToolUse"), "tool_response": ["a", "b"]}
    (completed,) = map_hook(payload, FULL)
    assert completed.data["result"] == '["a", "b"]'
    assert completed.data["result_digest"] == digest(["a", "b"])
    _event(completed, payload)


def test_an_unknown_hook_takes_the_vendor_fallback_with_nothing_in_it() -> None:
    payload = {"hook_event_name": "StopFailure", "session_id": "s", "error": "secret words"}
    (emission,) = map_hook(payload, FULL)
    assert emission.type == "x.codex.session.stop_failure"
    assert emission.data == {}
    _event(emission, payload)
