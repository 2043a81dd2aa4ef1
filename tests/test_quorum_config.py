"""The two-person rule's config (issue 34): a bad count or rule names its key and the fix,
and a rule applies to the requests a person would expect, failing closed on what the
capture ceiling withholds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.aep.validation import parse_event
from aep_bridge.config.config import ConfigError, read_config
from aep_bridge.loop.quorum import QuorumPolicy


def write(tmp_path: Path, config: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_bad_counts_and_rules_name_the_key_and_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"routes\[0\]\.approvals: must be from 1 to 10, not 0"):
        read_config(write(tmp_path, {"routes": [{"channels": ["a"], "approvals": 0}]}))
    with pytest.raises(
        ConfigError, match=r"attention\.require_approvals\[0\].*\"tool\", \"command\" or both"
    ):
        read_config(write(tmp_path, {"attention": {"require_approvals": [{"approvals": 2}]}}))
    with pytest.raises(ConfigError, match=r"attention\.require_approvals\[0\]\.approvals"):
        read_config(write(tmp_path, {"attention": {"require_approvals": [{"tool": "Bash"}]}}))
    route = {"match": {"type": "session.started"}, "channels": ["a"], "approvals": 2}
    with pytest.raises(ConfigError, match=r"routes\[0\].*names type: drop those keys"):
        read_config(write(tmp_path, {"routes": [route]}))
    ok = {"match": {"agent": "codex"}, "channels": ["a"], "approvals": 2}
    assert read_config(write(tmp_path, {"routes": [ok]})).routes[0].approvals == 2


def _request(context: dict[str, Any] | None, agent: str = "claude-code") -> Any:
    data: dict[str, Any] = {
        "kind": "permission",
        "prompt": "Run it?",
        "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
    }
    if context is not None:
        data["context"] = context
    return parse_event(
        json.dumps(
            {
                "aep": "0.1",
                "id": "01J0000000000000000000000A",
                "type": "attention.requested",
                "source": "aep://host/claude-code",
                "agent": agent,
                "session": "s1",
                "seq": 3,
                "time": "2026-01-01T00:00:00Z",
                "capture": "full",
                "data": data,
            }
        ).encode()
    )


def test_the_highest_count_that_applies_wins_and_what_is_withheld_counts_as_a_match(tmp_path):
    config = read_config(
        write(
            tmp_path,
            {
                "routes": [{"match": {"agent": "codex"}, "channels": ["a"], "approvals": 2}],
                "attention": {
                    "require_approvals": [
                        {"tool": "Bash", "command": "git push --force*", "approvals": 3},
                        {"command": "terraform apply*", "approvals": 2},
                    ]
                },
            },
        )
    )
    needed = QuorumPolicy(config.routes, config.attention.require_approvals).needed

    def bash(command: str) -> dict[str, Any]:
        return {"tool_name": "Bash", "tool_input": {"command": command}}

    assert needed(_request(bash("git  push --force origin main"))) == 3  # spaces as one
    assert needed(_request(bash("git push origin main"))) == 1
    assert needed(_request(bash("terraform apply -auto-approve"))) == 2
    assert needed(_request(bash("make test"), agent="codex")) == 2  # the route's
    assert needed(_request(bash("git push --force"), agent="codex")) == 3  # the highest
    # an edit has no command: the command rules are not about it
    assert needed(_request({"tool_name": "Edit", "tool_input": {"file_path": "a.py"}})) == 1
    # the capture ceiling kept the command back: it may be a force push (fail closed)
    assert needed(_request({"tool_name": "Bash"})) == 3
    assert needed(_request(None)) == 3
