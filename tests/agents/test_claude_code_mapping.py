"""Claude Code hooks -> AEP events, and held hooks' answers -> Claude Code's decision JSON.

Payload shapes are recorded in tests/agents/payloads/claude_code/ (one file per hook, with
`Hook-variant.json` for a second shape of the same hook), field names and example values as
the Claude Code hooks reference (code.claude.com/docs/en/hooks, Claude Code 2.1.240, the
version the module docstring names) gives them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.aep.redaction import RedactionPolicy, Redactor, digest
from aep_bridge.agents.claude_code import (
    AGENT,
    MAPPED,
    hook_output,
    identity,
    map_hook,
    session_grants,
)
from aep_bridge.agents.mapping import Ceiling, Emission, Verdict
from tests import permission_card
from tests.official import assert_valid
from tests.shared_data import AEP_FIXTURES

PAYLOADS = Path(__file__).parent / "payloads" / "claude_code"
PINS = json.loads((AEP_FIXTURES / "mappings" / "claude-code.json").read_text())
SECRET = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
METADATA = Ceiling(events="metadata", attention="metadata")
REDACTED = Ceiling(events="redacted", attention="redacted")


def payload(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    data.update(changes)
    return data


def wire(emission: Emission) -> dict[str, Any]:
    """The emission as the daemon would send it, checked by our builder and the schemas."""
    out = permission_card.as_sent(emission).to_dict()
    assert_valid(out)
    return out


def only(name: str, ceiling: Ceiling | None = None, **changes: Any) -> Emission:
    emissions = map_hook(payload(name, **changes), *([ceiling] if ceiling else []))
    assert len(emissions) == 1, emissions
    wire(emissions[0])
    return emissions[0]


def test_the_mapped_version_is_recorded() -> None:
    assert AGENT == "claude-code"
    assert "hooks" in MAPPED
    assert "2026" in MAPPED
    assert "2.1.240" in MAPPED  # the Claude Code version whose hooks reference was checked


@pytest.mark.parametrize("path", sorted(PAYLOADS.glob("*.json")), ids=lambda p: p.stem)
@pytest.mark.parametrize("ceiling", [Ceiling(), METADATA, REDACTED], ids=["default", "md", "red"])
def test_every_recorded_payload_maps_to_valid_events(path: Path, ceiling: Ceiling) -> None:
    for emission in map_hook(json.loads(path.read_text()), ceiling):
        wire(emission)


def test_identity_is_the_session_and_no_run() -> None:
    assert identity(payload("Stop")) == ("9f2c7a1e-3b4d-4c5e-8f60-1a2b3c4d5e6f", None)
    assert identity({"session_id": 7}) == (None, None)
    assert identity(None) == (None, None)


def test_session_start() -> None:
    e = only("SessionStart")
    assert (e.type, e.capture) == ("session.started", "metadata")
    expected = {"client": {"name": "claude-code"}, "trigger": "startup"}
    assert e.data == {**expected, "gen_ai.request.model": "claude-sonnet-4-5"}  # cwd gated out
    assert "cwd" in only("SessionStart", REDACTED).data  # words travel from `redacted` up
    assert only("SessionStart", source="fork").data["trigger"] == "fork"  # 2.1.214+


def test_user_prompt_starts_a_run_and_its_words_stay_home() -> None:
    e = only("UserPromptSubmit")
    assert (e.type, e.data) == ("run.started", {"trigger": "user"})
    words = only("UserPromptSubmit", REDACTED, prompt=f"deploy with {SECRET}")
    assert words.data["prompt"] == "deploy with [REDACTED:secret]"


def test_pre_tool_use_carries_the_digest_of_the_original_arguments() -> None:
    e = only("PreToolUse")
    tool_input = payload("PreToolUse")["tool_input"]
    assert e.type == "tool.requested"
    assert e.subject == "Bash"
    assert e.data == {
        "tool": {"name": "Bash", "call_id": "toolu_01ABCDEF"},
        "args_digest": digest(tool_input),
    }
    leaky = {"command": f"curl -H 'Authorization: Bearer {SECRET}' x"}
    red = only("PreToolUse", REDACTED, tool_input=leaky)
    assert SECRET not in json.dumps(red.data)
    assert red.data["args_digest"] == digest(leaky)  # §9.3: taken before redaction
    assert "args" not in red.data
    assert "args_redacted" in red.data


def test_post_tool_use_and_its_failure() -> None:
    done = only("PostToolUse")
    response = payload("PostToolUse")["tool_response"]
    assert (done.type, done.subject) == ("tool.completed", "Bash")
    assert done.data == {
        "tool": {"name": "Bash", "call_id": "toolu_01ABCDEF"},
        "result_digest": digest(response),
    }
    failed = only("PostToolUseFailure")
    assert failed.type == "tool.failed"
    assert failed.data == {
        "tool": {"name": "Bash", "call_id": "toolu_01ABCDEF"},
        "error": {"type": "tool_error"},  # the message is words: gated out at metadata
    }
    interrupted = only("PostToolUseFailure", REDACTED, is_interrupt=True)
    assert interrupted.data["error"]["type"] == "interrupted"
    assert interrupted.data["error"]["message"].startswith("Exit code 1")


def test_permission_denied_is_a_policy_denial() -> None:
    e = only("PermissionDenied")
    assert e.type == "tool.denied"
    assert e.data == {"tool": {"name": "Bash", "call_id": "toolu_01XYZ"}, "by": "policy"}


#: Annex A's options; the daemon adds the "for this session" ones (tests/agents/test_hook_loop.py)
OPTIONS = [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]


def test_permission_request_is_a_permission_card() -> None:
    e = only("PermissionRequest")
    assert (e.type, e.subject, e.severity, e.capture) == (
        "attention.requested",
        "Bash",
        "notice",
        "redacted",
    )
    assert e.data == {
        "kind": "permission",
        "prompt": "Permission requested: Bash — npm test (Run the test suite)",
        "options": OPTIONS,
        "respond_via": ["control"],
    }


def test_permission_card_words_are_redacted_or_synthesized() -> None:
    leaky = {"command": f"git push https://x:{SECRET}@github.com/o/r"}
    red = only("PermissionRequest", tool_input=leaky)
    assert SECRET not in red.data["prompt"]
    assert red.data["prompt"].startswith("Permission")
    md = only("PermissionRequest", METADATA, tool_input=leaky)
    assert md.capture == "metadata"
    assert md.data == {
        "kind": "permission",
        "prompt": "claude-code requests permission: Bash",
        "options": OPTIONS,
        "respond_via": ["control"],
    }


def test_permission_prompt_for_a_file_tool_names_the_file() -> None:
    e = only("PermissionRequest", tool_name="Write", tool_input={"file_path": "/srv/app.py"})
    assert e.data["prompt"] == "Permission requested: Write — /srv/app.py"


@pytest.mark.conformance("mappings")
def test_ask_user_question_is_one_form_not_a_permission() -> None:
    e = only("PermissionRequest-AskUserQuestion")
    assert (e.type, e.subject, e.capture) == ("attention.requested", "AskUserQuestion", "redacted")
    assert e.data == PINS["ask_user_question"]["expected_data"]
    md = only("PermissionRequest-AskUserQuestion", METADATA)
    assert md.data == PINS["ask_user_question"]["expected_data_metadata"]


def test_ask_user_question_tool_events_stay_tool_events() -> None:
    asked = only("PreToolUse", tool_name="AskUserQuestion", tool_input={"questions": []})
    assert asked.type == "tool.requested"
    assert asked.subject == "AskUserQuestion"


@pytest.mark.conformance("mappings")
def test_elicitation_is_a_form_for_the_mcp_server() -> None:
    e = only("Elicitation")
    assert (e.type, e.subject, e.capture) == ("attention.requested", "deploy-server", "redacted")
    assert e.data == PINS["elicitation"]["expected_data"]
    md = only("Elicitation", METADATA)
    assert md.data == PINS["elicitation"]["expected_data_metadata"]


def test_url_elicitation_is_an_out_of_band_auth_card() -> None:
    e = only("Elicitation-url")
    assert e.data == {"kind": "auth", "prompt": "Sign in to continue", "respond_via": ["oob"]}
    md = only("Elicitation-url", METADATA)
    assert md.data["prompt"] == "claude-code requests auth: deploy-server"


def test_elicitation_result_and_pre_compact_emit_nothing() -> None:
    assert map_hook(payload("ElicitationResult")) == []
    assert map_hook(payload("PreCompact")) == []


@pytest.mark.parametrize(
    "kind",
    [
        "permission_prompt",
        "elicitation_dialog",
        "elicitation_url_dialog",
        "elicitation_complete",
        "elicitation_response",
    ],
)
def test_notifications_echoing_a_mapped_hook_emit_nothing(kind: str) -> None:
    """One card per question: PermissionRequest / Elicitation / ElicitationResult say it."""
    assert map_hook(payload("Notification", notification_type=kind)) == []


def test_a_usage_limit_waiting_for_enter_is_a_heads_up() -> None:
    waiting = only("Notification", notification_type="quota_auto_resume_stale")
    assert waiting.type == "attention.requested"
    assert waiting.data == {
        "kind": "input",
        "prompt": "claude-code is waiting for your input",
        "respond_via": ["oob"],
    }


def test_a_background_session_needing_input_is_only_a_status() -> None:
    """`agent_needs_input` is about another (background) session: no card on this one."""
    e = only("Notification", notification_type="agent_needs_input")
    assert (e.type, e.data) == ("progress.status", {"phase": "agent_needs_input"})


def test_notifications_split_by_type() -> None:
    idle = only("Notification")
    assert idle.type == "attention.requested"
    assert idle.data == {
        "kind": "input",
        "prompt": "claude-code is waiting for your input",
        "respond_via": ["oob"],
    }
    assert only("Notification", METADATA).data == idle.data  # structural at any ceiling
    assert map_hook(payload("Notification-permission_prompt")) == []
    assert map_hook(payload("Notification", notification_type="elicitation_dialog")) == []
    status = only("Notification-auth_success")
    assert (status.type, status.data) == ("progress.status", {"phase": "auth_success"})
    worded = only("Notification-auth_success", REDACTED)
    assert worded.data == {"phase": "auth_success", "message": "Authentication successful"}


def test_stop_and_stop_failure_end_the_run() -> None:
    assert (only("Stop").type, only("Stop").data) == ("run.finished", {})
    failed = only("StopFailure")
    assert failed.type == "run.failed"
    assert failed.severity == "error"
    assert failed.data == {"reason": "rate_limit", "error": {"type": "rate_limit"}}
    worded = only("StopFailure", REDACTED)
    assert worded.data["error"] == {"type": "rate_limit", "message": "429 Too Many Requests"}
    # the hooks reference names the error `error` (`unknown` among its values), nothing else
    guessed = only(
        "StopFailure", REDACTED, error=None, error_details=None, error_type="x", error_message="y"
    )
    assert guessed.data == {"reason": "unknown", "error": {"type": "unknown"}}


def test_subagents_are_delegations_on_their_agent_id() -> None:
    started = only("SubagentStart")
    assert (started.type, started.subject) == ("delegation.subagent.started", "agent-a1b2c3")
    assert started.data == {"agent_type": "Explore"}
    stopped = only("SubagentStop")
    assert (stopped.type, stopped.subject) == ("delegation.subagent.stopped", "agent-a1b2c3")


def test_post_compact_is_the_one_compaction_event() -> None:
    e = only("PostCompact")
    assert (e.type, e.data) == ("session.compacted", {"trigger": "auto"})


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("clear", {"reason": "normal"}),
        ("logout", {"reason": "normal"}),
        ("prompt_input_exit", {"reason": "normal"}),
        ("other", {"reason": "normal"}),
        ("resume", {"reason": "normal"}),
        ("bypass_permissions_disabled", {"reason": "killed"}),
        ("something_new", {}),
    ],
)
def test_session_end_reasons(reason: str, expected: dict[str, str]) -> None:
    e = only("SessionEnd", reason=reason)
    assert (e.type, e.data) == ("session.ended", expected)


def test_unknown_hooks_fall_back_to_the_vendor_namespace() -> None:
    e = only("Stop", hook_event_name="WorktreeCreate", worktree_name="secret-branch")
    assert (e.type, e.data) == ("x.claude-code.session.worktree_create", {})


GARBAGE: list[Any] = [None, 3, "x", [], {}, {"hook_event_name": 5}, {"hook_event_name": ""}]
FIELDS = {
    "tool_name": [None, 5, ""],
    "tool_input": [None, "x", [1], {"command": 5, "description": []}],
    "tool_response": [None, 5, [1]],
    "notification_type": [None, 5, []],
    "message": [None, 5],
    "requested_schema": [None, "x", {"properties": {"a": {"type": "array"}}}],
    "reason": [None, 5, {}],
    "error": [None, 5],
    "source": [None, 5],
    "agent_id": [None, 5],
    "mode": [None, "url", 5],
}


def _malformed() -> list[Any]:
    cases = list(GARBAGE)
    for path in sorted(PAYLOADS.glob("*.json")):
        base = json.loads(path.read_text())
        for key, values in FIELDS.items():
            cases += [{**base, key: value} for value in values]
        cases.append({"hook_event_name": base["hook_event_name"]})
    return cases


def test_malformed_payloads_never_raise() -> None:
    verdicts = [
        Verdict(option="allow"),
        Verdict(option="allow_session"),
        Verdict(option="deny", text="no"),
        Verdict(text="do it differently"),
        Verdict(values={"1": "1", "2": ["1"]}),
        Verdict(values={}),
    ]
    for case in _malformed():
        for ceiling in (Ceiling(), METADATA, REDACTED):
            for emission in map_hook(case, ceiling):
                wire(emission)
        for verdict in verdicts:
            out = hook_output(case, verdict)
            assert out is None or json.loads(json.dumps(out)) == out


def _decision(out: dict[str, Any] | None) -> dict[str, Any]:
    assert out is not None
    assert out["hookSpecificOutput"]["hookEventName"] == "PermissionRequest"
    decision: dict[str, Any] = out["hookSpecificOutput"]["decision"]
    return decision


def test_no_verdict_lets_claude_code_ask_itself() -> None:
    assert hook_output(payload("PermissionRequest"), None) is None
    assert hook_output(payload("Elicitation"), None) is None
    assert hook_output(payload("PermissionRequest"), Verdict()) is None
    assert hook_output(payload("PreToolUse"), Verdict(option="allow")) is None


def test_allow_and_deny_decisions() -> None:
    request = payload("PermissionRequest")
    assert _decision(hook_output(request, Verdict(option="allow"))) == {"behavior": "allow"}
    denied = _decision(hook_output(request, Verdict(option="deny")))
    assert denied["behavior"] == "deny"
    assert denied["message"]
    guided = _decision(hook_output(request, Verdict(option="deny", text="use pnpm instead")))
    assert guided == {"behavior": "deny", "message": "use pnpm instead"}
    text_only = _decision(hook_output(request, Verdict(text="run only the unit tests")))
    assert text_only == {"behavior": "deny", "message": "run only the unit tests"}


BASH_RULE = {
    "type": "addRules",
    "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
    "behavior": "allow",
    "destination": "session",
}


def test_allow_for_the_session_returns_the_one_rule_its_label_names() -> None:
    request = payload("PermissionRequest")
    [grant] = session_grants(request)
    assert (grant.option, grant.label) == ("allow_session", "Allow Bash(npm test) for this session")
    decision = _decision(hook_output(request, Verdict(option="allow_session")))
    assert decision == {"behavior": "allow", "updatedPermissions": [BASH_RULE]}


def test_an_edit_outside_the_project_never_gets_a_mode_or_a_folder_from_allow_session() -> None:
    """Issue 30: "Allow for this session" on an Edit of /etc/hosts came back with
    `addDirectories ["/etc"]` and `setMode acceptEdits`, neither of which it said."""
    edit = payload("PermissionRequest-Edit-etc")
    assert hook_output(edit, Verdict(option="allow_session")) is None  # not offered: no rule
    assert [(g.option, g.label) for g in session_grants(edit)] == [
        ("allow_mode_acceptEdits", "Allow and switch this session to acceptEdits mode"),
        ("allow_directories", "Allow and add folder /etc for this session"),
    ]
    mode = _decision(hook_output(edit, Verdict(option="allow_mode_acceptEdits")))
    assert mode["updatedPermissions"] == [
        {"type": "setMode", "mode": "acceptEdits", "destination": "session"}
    ]
    folder = _decision(hook_output(edit, Verdict(option="allow_directories")))
    assert folder["updatedPermissions"] == [
        {"type": "addDirectories", "directories": ["/etc"], "destination": "session"}
    ]
    assert _decision(hook_output(edit, Verdict(option="allow"))) == {"behavior": "allow"}


def test_a_suggestion_to_persist_is_returned_for_this_session_only() -> None:
    request = payload("PermissionRequest")
    request["permission_suggestions"][0]["destination"] = "userSettings"
    request["permission_suggestions"][0]["note"] = "anything else in the entry stays home"
    decision = _decision(hook_output(request, Verdict(option="allow_session")))
    assert decision["updatedPermissions"] == [BASH_RULE]


def test_without_a_suggestion_there_is_no_rule_to_give() -> None:
    """The bridge never makes a rule up: `Bash(rm -rf build/*)` would be a wildcard, and a
    tool's whole name every call of it."""
    for request in (
        payload("PermissionRequest", permission_suggestions=None),
        payload("PermissionRequest", tool_name="Write", tool_input={"file_path": "a.py"}),
        payload("PermissionRequest", permission_suggestions=[{"type": "grantEverything"}]),
    ):
        if request["tool_name"] == "Write":
            del request["permission_suggestions"]
        assert session_grants(request) == []
        assert hook_output(request, Verdict(option="allow_session")) is None


def test_answered_questions_go_back_as_updated_input() -> None:
    asked = payload("PermissionRequest-AskUserQuestion")
    decision = _decision(hook_output(asked, Verdict(values={"1": "1", "2": ["2", "ap-south"]})))
    assert decision == {
        "behavior": "allow",
        "updatedInput": {
            "questions": asked["tool_input"]["questions"],
            "answers": {
                "Which database should the new service use?": "PostgreSQL",
                "Which regions should we roll out to?": "eu-west, ap-south",
            },
        },
    }
    refused = _decision(hook_output(asked, Verdict(option="deny")))
    assert refused["behavior"] == "deny"


def test_a_text_answer_to_a_single_question_is_its_answer() -> None:
    one = payload("PermissionRequest-AskUserQuestion")
    one["tool_input"] = {"questions": one["tool_input"]["questions"][:1]}
    decision = _decision(hook_output(one, Verdict(text="MySQL")))
    assert decision["updatedInput"]["answers"] == {
        "Which database should the new service use?": "MySQL"
    }


def test_elicitation_answers_go_back_as_content() -> None:
    values = {"environment": "staging", "replicas": 2.0, "confirm": True}
    out = hook_output(payload("Elicitation"), Verdict(values=values))
    assert out == {
        "hookSpecificOutput": {
            "hookEventName": "Elicitation",
            "action": "accept",
            "content": {"environment": "staging", "replicas": 2, "confirm": True},
        }
    }
    declined = hook_output(payload("Elicitation"), Verdict(option="deny"))
    assert declined == {"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "decline"}}


def test_the_redactor_of_the_ceiling_is_the_one_used() -> None:
    ceiling = Ceiling(redactor=Redactor(RedactionPolicy(secret_values=("hunter2-pass",))))
    e = map_hook(
        payload("PermissionRequest", tool_input={"command": "login hunter2-pass"}), ceiling
    )
    assert "hunter2-pass" not in e[0].data["prompt"]
