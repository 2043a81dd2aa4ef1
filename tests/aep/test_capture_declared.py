"""An event is held to the capture it declares: what shows it trusts the claim, not the data."""

from __future__ import annotations

from typing import Any

from aep_bridge.aep.capture import held_to_declared
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.validation import validate_event


def _event(type_: str, data: dict[str, Any], capture: str) -> Event:
    return validate_event(
        {
            "aep": "0.1",
            "id": "E1",
            "type": type_,
            "subject": "deploy",
            "time": "2026-07-03T10:00:00Z",
            "source": "aep://h/agent/a",
            "agent": "a",
            "session": "s1",
            "seq": 1,
            "capture": capture,
            "data": data,
        }
    )


def test_a_field_above_the_declared_level_is_dropped_and_the_level_kept():
    liar = _event(
        "tool.requested",
        {"tool": {"name": "Bash", "call_id": "c1"}, "args": {"command": "rm -rf /srv"}},
        "metadata",
    )
    held = held_to_declared(liar)
    assert held.data == {"tool": {"name": "Bash", "call_id": "c1"}}
    assert held.capture == "metadata"


def test_below_redacted_the_prompt_and_labels_are_structure_only():
    ask = _event(
        "attention.requested",
        {
            "kind": "permission",
            "prompt": "Deploy with password hunter2?",
            "options": [{"id": "allow", "label": "Yes, with hunter2"}],
        },
        "metadata",
    )
    held = held_to_declared(ask)
    assert held.data is not None
    assert "hunter2" not in str(held.data)
    assert held.data["prompt"] == "a requests permission: deploy"
    assert held.data["options"] == [{"id": "allow", "label": "allow"}]


def test_at_none_no_data_is_left():
    held = held_to_declared(_event("tool.requested", {"tool": {"name": "Bash"}}, "none"))
    assert held.data is None
    assert held.capture == "none"


def test_an_event_that_keeps_to_its_level_comes_back_as_itself():
    honest = _event("tool.requested", {"tool": {"name": "Bash"}, "args": {"x": 1}}, "full")
    assert held_to_declared(honest) is honest
