"""What a "for this session" button grants: exactly what its label says, nothing wider.

Claude Code's `permission_suggestions` are read as if anything could be in them (many
entries, huge strings, a rule for another tool, a persisted destination, control
characters): what goes back is only ever ONE suggestion the hook received, re-scoped to the
session, and the label of the option pressed names it whole (issue 30).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aep_bridge.aep.build import make_event
from aep_bridge.aep.redaction import RedactionPolicy, Redactor
from aep_bridge.agents import claude_code, codex
from aep_bridge.agents.grants import (
    MAX_GRANT_LABEL,
    claude_code_grants,
    options,
    with_options,
)
from aep_bridge.agents.mapping import Ceiling, Verdict
from aep_bridge.render import Renderer
from aep_bridge.render.helpers import MAX_LABEL
from aep_bridge_discord.look import MAX_LABEL as DISCORD_LABEL
from aep_bridge_slack.look import MAX_BUTTON_TEXT as SLACK_BUTTON_TEXT
from tests.agents.live import payload

SECRET = "s3cr3t-v4lue"
#: the fields the hooks reference lists for each entry type ("Permission update entries")
LISTED = {
    "addRules": ("type", "rules", "behavior"),
    "setMode": ("type", "mode"),
    "addDirectories": ("type", "directories"),
}


def _bash(*suggestions: Any, tool: str = "Bash") -> dict[str, Any]:
    return payload(
        "claude-code", "PermissionRequest", tool_name=tool, permission_suggestions=list(suggestions)
    )


def _rule(content: Any = "npm test:*", tool: str = "Bash", **changes: Any) -> dict[str, Any]:
    rule = {"toolName": tool} if content is None else {"toolName": tool, "ruleContent": content}
    entry = {
        "type": "addRules",
        "rules": [rule],
        "behavior": "allow",
        "destination": "localSettings",
    }
    return {**entry, **changes}


def _updates(request: dict[str, Any], option: str) -> list[dict[str, Any]] | None:
    out = claude_code.hook_output(request, Verdict(option=option))
    if out is None:
        return None
    return out["hookSpecificOutput"]["decision"].get("updatedPermissions")  # type: ignore[no-any-return]


def test_the_label_budget_is_what_a_card_shows_whole() -> None:
    assert MAX_GRANT_LABEL == MAX_LABEL


def test_the_card_shows_the_longest_label_whole_and_each_channel_button_too() -> None:
    """The renderer cuts a label past `MAX_LABEL` with "…": a grant's label never is."""
    content = "x" * (MAX_GRANT_LABEL - len("Allow Bash() for this session"))
    request = _bash(_rule(content), {"type": "addDirectories", "directories": ["/etc"]})
    data = with_options(
        {"kind": "permission", "prompt": "Run it?", "options": [{"id": "allow", "label": "Allow"}]},
        options(claude_code_grants(request), Ceiling()),
    )
    event = make_event(
        "attention.requested",
        source="aep://host/agent/claude-code/session/s1",
        agent="claude-code",
        session="s1",
        seq=1,
        epoch=1,
        subject="Bash",
        data={**data, "respond_via": ["control"]},
        capture="redacted",
        severity="notice",
    )
    renderer = Renderer(Redactor(RedactionPolicy(home="/nonexistent-home")))
    card, ids = renderer.permission_request(event, "k", ceiling="redacted")
    labels = [o.label for o in card.options]
    assert labels == [
        "Allow",
        f"Allow Bash({content}) for this session",
        "Allow and add folder /etc for this session",
    ]
    assert len(labels[1]) == MAX_GRANT_LABEL
    assert ids == ["allow", "allow_session", "allow_directories"]
    assert min(SLACK_BUTTON_TEXT, DISCORD_LABEL) >= MAX_GRANT_LABEL  # no button cuts it either


def test_a_rule_button_names_the_rule() -> None:
    request = _bash(_rule("npm test:*"))
    [grant] = claude_code_grants(request)
    assert grant.label == "Allow Bash(npm test:*) for this session"
    assert _updates(request, "allow_session") == [
        {
            "type": "addRules",
            "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}],
            "behavior": "allow",
            "destination": "session",
        }
    ]


def test_a_compound_command_gets_every_rule_of_its_one_suggestion_named() -> None:
    both = _rule(rules=[{"toolName": "Bash", "ruleContent": c} for c in ("npm test:*", "make:*")])
    [grant] = claude_code_grants(_bash(both))
    assert grant.label == "Allow Bash(npm test:*), Bash(make:*) for this session"
    whole = _rule(None, tool="WebSearch")
    [any_call] = claude_code_grants(_bash(whole, tool="WebSearch"))
    assert any_call.label == "Allow any WebSearch for this session"


ODD = {
    "a rule for another tool": _rule("rm -rf /", tool="Write"),
    "one of two rules for another tool": _rule(
        rules=[{"toolName": "Bash", "ruleContent": "ls"}, {"toolName": "Write"}]
    ),
    "a deny rule": _rule(behavior="deny"),
    "an ask rule": _rule(behavior="ask"),
    "replaceRules": _rule(type="replaceRules"),
    "removeRules": _rule(type="removeRules"),
    "removeDirectories": {"type": "removeDirectories", "directories": ["/home/user/proj"]},
    "bypassPermissions": {"type": "setMode", "mode": "bypassPermissions"},
    "auto (a classifier would answer the later prompts)": {"type": "setMode", "mode": "auto"},
    "an unknown mode": {"type": "setMode", "mode": "yolo"},
    "an unknown type": {"type": "grantEverything", "destination": "userSettings"},
    "a newline in the rule": _rule("npm test\nrm -rf ~"),
    "an escape sequence": _rule("npm test\x1b[8mhidden"),
    "a right-to-left override": _rule("npm test \u202e*:fr- mr"),
    "a zero-width space": _rule("npm\u200btest"),
    "two spaces a card would fold": _rule("npm  test"),
    "a huge rule": _rule("x" * 100_000),
    "a rule one past the label": _rule(
        "x" * (MAX_GRANT_LABEL - len("Allow Bash() for this session") + 1)
    ),
    "five rules": _rule(rules=[{"toolName": "Bash", "ruleContent": str(n)} for n in range(5)]),
    "no rules": _rule(rules=[]),
    "an empty rule": _rule(""),
    "a rule that is not text": _rule(["npm", "test"]),
    "rules that are not a list": _rule(rules={"toolName": "Bash"}),
    "a folder with a newline": {"type": "addDirectories", "directories": ["/tmp\n/etc"]},
    "a huge folder": {"type": "addDirectories", "directories": ["/" + "a" * 10_000]},
    "five folders": {"type": "addDirectories", "directories": [f"/d{n}" for n in range(5)]},
    "no folders": {"type": "addDirectories", "directories": []},
    "not an entry": "addRules Bash",
}


@pytest.mark.parametrize("entry", ODD.values(), ids=ODD.keys())
def test_a_suggestion_that_does_not_fit_is_not_offered(entry: Any) -> None:
    request = _bash(entry)
    assert claude_code_grants(request) == []
    for option in (
        "allow_session",
        "allow_directories",
        "allow_mode_bypassPermissions",
        "allow_mode_auto",
    ):
        assert claude_code.hook_output(request, Verdict(option=option)) is None


def test_the_first_fitting_suggestion_of_each_kind_is_offered_once() -> None:
    many = [
        _rule("rm -rf /", tool="Write"),
        _rule("x" * 500),
        {"type": "setMode", "mode": "bypassPermissions"},
        _rule("npm test:*"),
        _rule("npm run lint:*"),
        {"type": "addDirectories", "directories": ["/etc"]},
        {"type": "setMode", "mode": "acceptEdits"},
        {"type": "setMode", "mode": "plan"},
        *[_rule(f"cmd{n}") for n in range(200)],
    ]
    request = _bash(*many)
    grants = claude_code_grants(request)
    assert [g.label for g in grants] == [
        "Allow Bash(npm test:*) for this session",
        "Allow and switch this session to acceptEdits mode",
        "Allow and add folder /etc for this session",
    ]
    assert _updates(request, "allow_mode_plan") is None  # a later mode was never offered
    assert [u["type"] for u in _updates(request, "allow_session") or []] == ["addRules"]


def test_at_metadata_the_label_says_the_kind_of_grant_and_no_words() -> None:
    redactor = Redactor(RedactionPolicy(secret_values=(SECRET,), home="/nonexistent-home"))
    request = _bash(_rule("deploy:*"), {"type": "addDirectories", "directories": ["/srv/x"]})
    grants = claude_code_grants(request)
    assert options(grants, Ceiling(attention="metadata")) == [
        {"id": "allow_session", "label": "Allow a rule for this session"},
        {"id": "allow_directories", "label": "Allow and add a folder for this session"},
    ]
    shown = options(grants, Ceiling(attention="redacted", redactor=redactor))
    assert [o["label"] for o in shown] == [
        "Allow Bash(deploy:*) for this session",
        "Allow and add folder /srv/x for this session",
    ]


def test_at_redacted_a_rule_with_a_secret_gets_no_button() -> None:
    """A label the redaction pipeline changes would not say what pressing grants: there is
    no such button (the secret never reaches the card either way)."""
    redactor = Redactor(RedactionPolicy(secret_values=(SECRET,), home="/nonexistent-home"))
    ceiling = Ceiling(attention="redacted", redactor=redactor)
    grants = claude_code_grants(_bash(_rule(f"deploy {SECRET}:*")))
    assert len(grants) == 1  # Claude Code offered it ...
    assert options(grants, ceiling) == []  # ... and the card has Allow and Deny only
    plain = claude_code_grants(_bash(_rule("deploy:*")))
    assert options(plain, ceiling) == [
        {"id": "allow_session", "label": "Allow Bash(deploy:*) for this session"}
    ]


REWORDED = {
    # shown as the approver's own home (`~`), granting Bob's
    "another user's home": _rule("rm -rf /home/bob:*"),
    "the operator's home": _rule("rm -rf /home/alice/build:*"),
    "an e-mail address": _rule("git push a@b.co:*"),
    "a phone number": _rule("+123456789012 rm:*"),
    "a credential": _rule("env password=hunter2 sh:*"),
    "a folder in a home": {"type": "addDirectories", "directories": ["/home/bob"]},
}


@pytest.mark.parametrize("entry", REWORDED.values(), ids=REWORDED.keys())
def test_at_redacted_a_label_the_pipeline_changes_is_left_out(entry: dict[str, Any]) -> None:
    """issue 30: "Allow Bash(rm -rf ~:*) for this session" granted `/home/bob`, and
    "Allow Bash([REDACTED:pii]) for this session" named nothing; the label is exactly what
    is granted, or there is no button."""
    redactor = Redactor(RedactionPolicy(home="/home/alice", pii=True))
    grants = claude_code_grants(_bash(entry))
    assert len(grants) == 1
    assert redactor.text(grants[0].label) != grants[0].label
    assert options(grants, Ceiling(attention="redacted", redactor=redactor)) == []
    # at `full` the words are shown as they are, and at `metadata` only the kind of grant
    assert options(grants, Ceiling(attention="full", redactor=redactor)) == [
        {"id": grants[0].option, "label": grants[0].label}
    ]
    [structural] = options(grants, Ceiling(attention="metadata", redactor=redactor))
    assert "bob" not in structural["label"]


def test_the_options_go_after_allow_and_are_added_once() -> None:
    data = {"options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]}
    extra = [{"id": "allow_session", "label": "Allow Bash(ls) for this session"}]
    once = with_options(data, extra)
    assert [o["id"] for o in once["options"]] == ["allow", "allow_session", "deny"]
    assert with_options(once, extra) == once
    assert with_options(data, []) is data


def test_codex_says_it_allows_this_exact_call_and_keys_it_so() -> None:
    request = payload("codex", "PermissionRequest")
    [grant] = codex.session_grants(request)
    assert grant.label == "Allow this exact call for this session"
    assert grant.update is None  # the daemon keeps it; Codex's answer carries no rule
    key = codex.session_rule_key(request)
    assert codex.session_rule_key({**request, "cwd": "/somewhere/else"}) != key
    assert codex.session_grants(payload("codex", "PreToolUse")) == []


# -- any suggestions at all ----------------------------------------------------------------

_TEXT = st.one_of(
    st.sampled_from(["npm test:*", "/etc", "make", "Bash", "Edit", "", "a  b", "x\ny", "\u202e"]),
    st.text(max_size=80),
)
_RULES = st.lists(
    st.fixed_dictionaries(
        {"toolName": st.sampled_from(["Bash", "Edit", "Write"])},
        optional={"ruleContent": st.one_of(_TEXT, st.integers(), st.none())},
    ),
    max_size=6,
)
_ENTRY = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["addRules", "replaceRules", "removeRules"]),
            "rules": st.one_of(_RULES, _TEXT),
            "behavior": st.sampled_from(["allow", "deny", "ask", "sure"]),
        },
        optional={"destination": st.sampled_from(["session", "userSettings", "projectSettings"])},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("setMode"),
            "mode": st.one_of(_TEXT, st.sampled_from(["acceptEdits", "plan", "bypassPermissions"])),
        },
        optional={"destination": _TEXT},
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["addDirectories", "removeDirectories"]),
            "directories": st.one_of(st.lists(_TEXT, max_size=6), _TEXT),
        },
        optional={"extra": _TEXT},
    ),
    st.one_of(st.none(), _TEXT, st.integers()),
)


def _as_received(entry: dict[str, Any]) -> dict[str, Any]:
    """A suggestion as the hook received it, re-scoped: its listed fields, `session`."""
    kept = {k: entry[k] for k in LISTED[entry["type"]] if k in entry}
    rules = entry.get("rules")
    if entry["type"] == "addRules" and isinstance(rules, list):
        kept["rules"] = [  # a `ruleContent` of null is none: the whole tool ("any Bash")
            {k: r[k] for k in ("toolName", "ruleContent") if r.get(k) is not None}
            for r in rules
            if isinstance(r, dict)
        ]
    return {**kept, "destination": "session"}


@settings(max_examples=300, deadline=None)
@given(
    tool=st.sampled_from(["Bash", "Edit"]),
    suggestions=st.lists(_ENTRY, max_size=8),
)
def test_any_suggestions_give_buttons_that_return_one_of_them_and_say_so(
    tool: str, suggestions: list[Any]
) -> None:
    request = _bash(*suggestions, tool=tool)
    grants = claude_code_grants(request)
    assert len({g.option for g in grants}) == len(grants) <= 3
    received = [
        _as_received(s) for s in suggestions if isinstance(s, dict) and s.get("type") in LISTED
    ]
    for grant in grants:
        assert len(grant.label) <= MAX_GRANT_LABEL
        assert grant.label.isprintable()
        assert " ".join(grant.label.split()) == grant.label
        out = claude_code.hook_output(request, Verdict(option=grant.option))
        assert out is not None
        decision = out["hookSpecificOutput"]["decision"]
        [update] = decision["updatedPermissions"]
        assert update in received  # one suggestion it received, at session scope
        if update["type"] == "addRules":
            assert update["behavior"] == "allow"
            for rule in update["rules"]:
                assert rule["toolName"] == tool
                shown = f"{tool}({rule['ruleContent']})" if "ruleContent" in rule else f"any {tool}"
                assert shown in grant.label
        elif update["type"] == "setMode":
            assert update["mode"] != "bypassPermissions"
            assert f" to {update['mode']} mode" in grant.label
        else:
            assert update["type"] == "addDirectories"
            assert all(folder in grant.label for folder in update["directories"])
        json.dumps(out)
    for option in ("allow_session", "allow_directories", "allow_mode_acceptEdits"):
        if option not in {g.option for g in grants}:
            assert claude_code.hook_output(request, Verdict(option=option)) is None
