"""Rendering AEP events for channels: the mapping, capture and redaction, cards, plugins.

The property tests build one `full` event of every type with every string field filled
(from the payload models themselves, so a field added later is covered) and check what a
channel could see at each ceiling: no secret at any ceiling, no free text at `metadata`, and
nothing from the payload at all at `none`.
"""

from __future__ import annotations

import json
import re
import types
import typing
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from aep_bridge.aep.capture import field_levels
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.payloads import PAYLOAD_MODELS, RESERVED_MODELS
from aep_bridge.aep.redaction import RedactionPolicy, Redactor
from aep_bridge.aep.registry import FOREIGN_EMITTER_PATTERN
from aep_bridge.aep.validation import parse_event, validate_event
from aep_bridge.contract.types import OUTGOING_KINDS, OutgoingMessage, PermissionRequest
from aep_bridge.render import RENDERED_TYPES, Rendered, Renderer, aep_form_values
from tests.shared_data import AEP_FIXTURES

CEILINGS = ("none", "metadata", "redacted", "full")
VERBOSITIES = ("quiet", "normal", "verbose")
GOLDEN = [
    parse_event(line)
    for line in (AEP_FIXTURES / "golden/golden.jsonl").read_text().splitlines()
    if line.strip()
]
ALL_TYPES = sorted({**PAYLOAD_MODELS, **RESERVED_MODELS})


def _redactor() -> Redactor:
    return Redactor(RedactionPolicy(home="/nonexistent-home"))


def _renderer(**kwargs: Any) -> Renderer:
    return Renderer(_redactor(), **kwargs)


_seq = iter(range(1, 10**9))


def ev(type_: str, data: dict[str, Any] | None = None, **attrs: Any) -> Event:
    """A valid event of `type_`, scoped as its type requires."""
    wire: dict[str, Any] = {
        "aep": "0.1",
        "id": attrs.pop("id", f"E{next(_seq)}"),
        "type": type_,
        "time": "2026-07-03T10:00:00Z",
        "source": "aep://host/agent/claude-code/session/s1",
        "agent": "claude-code",
    }
    if not type_.startswith("agent."):
        wire["session"] = "s1"
        if not FOREIGN_EMITTER_PATTERN.fullmatch(type_):
            wire["seq"] = next(_seq)
    if data is not None:
        wire["data"] = data
    for key, value in attrs.items():
        if value is None:
            wire.pop(key, None)
        else:
            wire[key] = value
    return validate_event(wire)


def _strings(rendered: Rendered) -> list[str]:
    """Everything of a rendering a person or a platform could see."""
    out: list[str] = []
    for message in rendered.messages:
        out += [message.text, message.key or "", json.dumps(message.metadata)]
        if message.attachment is not None:
            out.append(message.attachment.model_dump_json())
    if rendered.notification is not None:
        out.append(rendered.notification.summary)
    out.append(rendered.rename or "")
    return out


def _card_strings(request: PermissionRequest) -> list[str]:
    out = [request.title, request.description]
    out += [o.label for o in request.options] + [o.id for o in request.options]
    for f in request.fields:
        out += [f.id, f.label] + [c.label for c in f.choices] + [c.id for c in f.choices]
    return out


def _shapes(rendered: Rendered) -> list[tuple[str, str | None, bool]]:
    """Each message's type, key (an event id in it as `*`) and whether it rings."""
    return [
        (m.type, None if m.key is None else re.sub(r":E\d+$", ":*", m.key), m.notify)
        for m in rendered.messages
    ]


# -- golden events ---------------------------------------------------------------------------


@pytest.mark.parametrize("verbosity", VERBOSITIES)
@pytest.mark.parametrize("ceiling", CEILINGS)
def test_every_golden_event_renders_at_every_ceiling_and_verbosity(ceiling, verbosity):
    renderer = _renderer()
    kinds: set[str] = set()
    for event in GOLDEN:
        rendered = renderer.render(event, ceiling=ceiling, verbosity=verbosity)
        for message in rendered.messages:
            assert message.type in OUTGOING_KINDS
            assert message.text.strip(), f"{event.type} rendered an empty {message.type}"
            kinds.add(message.type)
        if event.type == "session.started":
            assert rendered.rename
        if event.type == "attention.requested":
            request, ids = renderer.permission_request(event, "c1", ceiling=ceiling)
            assert request.title.startswith("claude-code ")
            assert len(ids) == len(request.options)
    # the golden stream has errors and session ends, which every verbosity shows
    assert {"error", "session_end"} <= kinds


def test_golden_stream_at_normal_and_redacted_reads_as_expected():
    renderer = _renderer()
    lines = []
    for event in GOLDEN[:24]:
        for m in renderer.render(event, ceiling="redacted", verbosity="normal").messages:
            lines.append(f"{m.type}|{m.key}|{m.text}")
    # a stretch of tool calls is one message, edited in place (its key names the event that
    # opened it); a run's footer is a bubble only when there is no reply to put it under
    assert lines[:4] == [
        "system_message|session:01JX9YB0AAAA0000000000GOLD|Session started\n\n"
        "claude-code 2.1.0 · claude-sonnet-5 · subagent of s_root",
        "tool_update|activity:01JX9YB2Z1QK0000000000GOLD|⏳ Bash",
        "tool_update|activity:01JX9YB2Z1QK0000000000GOLD|✅ Bash",
        "system_message|end:01JX9YBARF000000000000GOLD|"
        "Finished in 1m 09s · 9,214 tokens in, 3,480 out",
    ]
    assert not any("Run started" in line for line in lines)  # no prompt to show: verbose only
    assert (
        "tool_update|activity:01JX9YBJDNY00000000000GOLD|🚫 Bash — denied: by policy: deny "
        "Bash(rm:*)\n❌ Write — io_error: ENOSPC: no space left on device, write "
        "'build/output.log'"
    ) in lines
    assert (
        "session_end|end:01JX9YBWSND00000000000GOLD|Session ended (normal) after 1m 59s, 3 runs."
    ) in lines


# -- the mapping, family by family -----------------------------------------------------------

Case = tuple[str, Event, str, str, list[tuple[str, str | None, bool]], str | None]

REQ = {"kind": "permission", "prompt": "Run rm?", "options": [{"id": "allow", "label": "Allow"}]}

FAMILIES: list[Case] = [
    # (id, event, ceiling, verbosity, [(type, key, notify)], notification type)
    (
        "session.started",
        ev("session.started", {"label": "Fix it"}, capture="redacted"),
        "redacted",
        "quiet",
        [("system_message", "session:*", False)],
        None,
    ),
    (
        "session.ended",
        ev("session.ended", {"reason": "normal"}),
        "redacted",
        "quiet",
        [("session_end", "end:*", False)],
        None,
    ),
    (
        "session.ended error",
        ev("session.ended", {"reason": "error"}),
        "redacted",
        "quiet",
        [("session_end", "end:*", False)],
        "error",
    ),
    (
        "session.compacted",
        ev("session.compacted", {"trigger": "auto"}),
        "redacted",
        "normal",
        [("system_message", None, False)],
        None,
    ),
    (
        "run.started",
        ev("run.started", {"trigger": "user"}, run="r1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "run.finished with summary",
        ev("run.finished", {"summary": "All done."}, run="r1", capture="redacted"),
        "redacted",
        "quiet",
        [("text", "reply:*", False)],
        "completed",
    ),
    (
        "run.finished with usage, verbose",
        ev("run.finished", {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}),
        "redacted",
        "verbose",
        [("system_message", "end:*", False)],
        "completed",
    ),
    (
        "run.failed",
        ev("run.failed", {"reason": "error"}, run="r1"),
        "redacted",
        "quiet",
        [("error", None, False)],
        "error",
    ),
    (
        "run.failed budget",
        ev("run.failed", {"reason": "budget_exceeded"}, run="r1"),
        "redacted",
        "quiet",
        [("error", None, False)],
        "budget_warning",
    ),
    (
        "run.cancelled",
        ev("run.cancelled", {"by": "user"}, run="r1"),
        "redacted",
        "normal",
        [("system_message", None, False)],
        None,
    ),
    (
        "run.step.started",
        ev("run.step.started", {"initial_num_steps": 2}, run="r1", step="s2"),
        "redacted",
        "verbose",
        [("system_message", "step:r1:s2", False)],
        None,
    ),
    (
        "run.step.finished",
        ev("run.step.finished", {"status": "success"}, run="r1", step="s2"),
        "redacted",
        "verbose",
        [("system_message", "step:r1:s2", False)],
        None,
    ),
    (
        "tool.requested",
        ev("tool.requested", {"tool": {"name": "Bash", "call_id": "c9"}}),
        "redacted",
        "normal",
        [("tool_update", "activity:*", False)],
        None,
    ),
    (
        "tool.requested without call id",
        ev("tool.requested", {"tool": {"name": "Bash"}}, subject="Bash"),
        "redacted",
        "normal",
        [("tool_update", "activity:*", False)],
        None,
    ),
    (
        "tool.completed",
        ev("tool.completed", {"tool": {"name": "Bash", "call_id": "c9"}, "duration_ms": 5}),
        "redacted",
        "normal",
        [("tool_update", "activity:*", False)],
        None,
    ),
    (
        "tool.completed with usage, verbose",
        ev(
            "tool.completed",
            {"tool": {"name": "Bash", "call_id": "c9"}, "gen_ai.usage.input_tokens": 3},
        ),
        "redacted",
        "verbose",
        [("tool_update", "activity:*", False), ("usage", None, False)],
        None,
    ),
    (
        "tool.failed",
        ev("tool.failed", {"tool": {"name": "Bash", "call_id": "c9"}, "error": {"type": "x"}}),
        "redacted",
        "normal",
        [("tool_update", "activity:*", False)],
        None,
    ),
    (
        "tool.denied",
        ev("tool.denied", {"tool": {"name": "Bash", "call_id": "c9"}, "by": "policy"}),
        "redacted",
        "normal",
        [("tool_update", "activity:*", False)],
        None,
    ),
    (
        "attention.requested permission",
        ev("attention.requested", REQ, subject="Bash", capture="redacted", severity="notice"),
        "redacted",
        "verbose",
        [],
        "permission",
    ),
    (
        "attention.requested input",
        ev("attention.requested", {"kind": "input", "prompt": "Which branch?"}),
        "redacted",
        "verbose",
        [],
        "input_required",
    ),
    (
        "attention.answered",
        ev("attention.answered", {"answer": {"option": "allow"}}, subject="R1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "attention.resolved",
        ev("attention.resolved", {"resolution": "answered"}, subject="R1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "attention.timeout",
        ev("attention.timeout", {"after_ms": 3000}, subject="R1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "attention.routed",
        ev("attention.routed", {"to": "slack"}, subject="R1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "progress.status",
        ev("progress.status", {"phase": "scan", "percent": 10}),
        "redacted",
        "verbose",
        [("system_message", "status:s1", False)],
        None,
    ),
    (
        "progress.task.planned",
        ev("progress.task.planned", {"task": {"id": "t1"}}),
        "redacted",
        "normal",
        [("plan", "plan:s1", False)],
        None,
    ),
    (
        "progress.task.completed",
        ev("progress.task.completed", {"task": {"id": "t1"}}),
        "redacted",
        "normal",
        [("plan", "plan:s1", False)],
        None,
    ),
    (
        "progress.artifact.produced",
        ev("progress.artifact.produced", {"artifact": {"id": "a1", "bytes": 2048}}),
        "redacted",
        "normal",
        [("attachment", None, False)],
        None,
    ),
    (
        "delegation.subagent.started",
        ev("delegation.subagent.started", {"child": {"session": "kid"}, "agent_type": "Explore"}),
        "redacted",
        "normal",
        [("system_message", "subagent:kid", False)],
        None,
    ),
    (
        "delegation.subagent.stopped",
        ev("delegation.subagent.stopped", {"child": {"session": "kid"}, "status": "ok"}),
        "redacted",
        "normal",
        [("system_message", "subagent:kid", False)],
        None,
    ),
    (
        "agent.presence offline",
        ev("agent.presence", {"state": "offline"}),
        "redacted",
        "normal",
        [("system_message", None, False)],
        "error",
    ),
    (
        "agent.presence online",
        ev("agent.presence", {"state": "online"}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "agent.idle",
        ev("agent.idle", {"since_ms": 5}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "agent.health failing",
        ev("agent.health", {"status": "failing"}),
        "redacted",
        "normal",
        [("system_message", None, False)],
        "error",
    ),
    (
        "agent.health ok",
        ev("agent.health", {"status": "ok"}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "agent.heartbeat",
        ev("agent.heartbeat", {"tick": 1}),
        "redacted",
        "verbose",
        [],
        None,
    ),
    (
        "error.raised fatal",
        ev("error.raised", {"code": "boom", "fatal": True}),
        "redacted",
        "quiet",
        [("error", None, True)],
        "error",
    ),
    (
        "error.raised not fatal",
        ev("error.raised", {"code": "slow", "fatal": False}),
        "redacted",
        "quiet",
        [("error", None, False)],
        None,
    ),
    (
        "error.raised severity error",
        ev("error.raised", {"code": "bad"}, severity="error"),
        "redacted",
        "quiet",
        [("error", None, True)],
        None,
    ),
    (
        "state.snapshot",
        ev("state.snapshot", {"key": "plan", "rev": 1}),
        "redacted",
        "verbose",
        [("system_message", "state:plan", False)],
        None,
    ),
    (
        "state.delta",
        ev("state.delta", {"key": "plan", "rev": 2}),
        "redacted",
        "verbose",
        [("system_message", "state:plan", False)],
        None,
    ),
    (
        "resource.retrieval.requested",
        ev("resource.retrieval.requested", {"corpus": "docs"}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "resource.retrieval.returned",
        ev("resource.retrieval.returned", {"count": 2}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "resource.retrieval.reranked",
        ev("resource.retrieval.reranked", {"count": 2}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "resource.citation.recorded",
        ev("resource.citation.recorded", {"count": 1}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "assessment.evaluation.recorded",
        ev("assessment.evaluation.recorded", {"gen_ai.evaluation.name": "rel"}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "assessment.feedback.received",
        ev("assessment.feedback.received", {"rating": 1}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "assessment.guardrail.recorded",
        ev("assessment.guardrail.recorded", {"guardrail": {"verdict": "blocked"}}),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "message.agent.replied",
        ev("message.agent.replied", {"message_id": "m1", "text": "Done."}, capture="redacted"),
        "redacted",
        "normal",
        [("text", "reply:*", False)],
        None,
    ),
    (
        "message.agent.replied reasoning",
        ev("message.agent.replied", {"message_id": "m1", "role": "reasoning", "text": "hm"}),
        "full",
        "verbose",
        [("thought", None, False)],
        None,
    ),
    (
        "message.user.submitted",
        ev("message.user.submitted", {"message_id": "m0", "text": "Fix it"}, capture="redacted"),
        "redacted",
        "normal",
        [("text", None, False)],
        None,
    ),
    (
        "control.attention.respond",
        ev("control.attention.respond", {"answer": {"option": "allow"}}, subject="R1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "control.cancel",
        ev("control.cancel", {"scope": "run"}, agent="mission-control"),
        "redacted",
        "normal",
        [("system_message", None, False)],
        None,
    ),
    (
        "control.pause",
        ev("control.pause", {}),
        "redacted",
        "normal",
        [("system_message", None, False)],
        None,
    ),
    (
        "control.resume",
        ev("control.resume", {}),
        "redacted",
        "normal",
        [("system_message", None, False)],
        None,
    ),
    (
        "control.accepted",
        ev("control.accepted", cause="C1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
    (
        "control.rejected",
        ev("control.rejected", {"reason": "busy"}, cause="C1"),
        "redacted",
        "verbose",
        [("system_message", None, False)],
        None,
    ),
]


@pytest.mark.parametrize(
    ("event", "ceiling", "verbosity", "shapes", "notification"),
    [case[1:] for case in FAMILIES],
    ids=[case[0] for case in FAMILIES],
)
def test_mapping(event, ceiling, verbosity, shapes, notification):
    rendered = _renderer().render(event, ceiling=ceiling, verbosity=verbosity)
    assert _shapes(rendered) == shapes
    assert (rendered.notification.type if rendered.notification else None) == notification
    if rendered.notification is not None:
        assert rendered.notification.session_id == ""  # the core fills it
        assert rendered.notification.summary


def test_every_registered_type_has_a_mapping_and_a_family_case():
    """A type added to the registry must get a rendering and a row above."""
    assert set(ALL_TYPES) == set(RENDERED_TYPES)
    covered = {case[1].type for case in FAMILIES}
    assert set(ALL_TYPES) - covered == set()


def test_session_started_renames_the_thread():
    event = ev("session.started", {"label": "Fix the flaky test"}, capture="redacted")
    rendered = _renderer().render(event, ceiling="redacted", verbosity="quiet")
    assert rendered.rename == "Fix the flaky test"
    assert rendered.messages[0].text.startswith("Session started: Fix the flaky test")
    other = _renderer().render(ev("run.started", {}), ceiling="redacted", verbosity="quiet")
    assert other.rename is None


# -- verbosity -------------------------------------------------------------------------------

VISIBILITY: list[tuple[str, Event, tuple[bool, bool, bool]]] = [
    # (id, event, shown at (quiet, normal, verbose))
    ("session start", ev("session.started", {}), (True, True, True)),
    ("session end", ev("session.ended", {}), (True, True, True)),
    ("run error", ev("run.failed", {"reason": "error"}), (True, True, True)),
    ("error", ev("error.raised", {"code": "x"}), (True, True, True)),
    (  # at quiet, a reply waits for the run to say it was the last (test_conversation.py)
        "final answer",
        ev("message.agent.replied", {"message_id": "m", "text": "ok"}, capture="redacted"),
        (False, True, True),
    ),
    (
        "run summary",
        ev("run.finished", {"summary": "ok"}, capture="redacted"),
        (True, True, True),
    ),
    ("run finished, no summary", ev("run.finished", {}), (True, True, True)),  # its cost
    ("run start", ev("run.started", {}), (False, False, True)),  # no prompt to show
    (
        "run start with a prompt",
        ev("run.started", {"prompt": "go"}, capture="redacted"),
        (False, True, True),
    ),
    ("tool card", ev("tool.requested", {"tool": {"name": "Bash"}}), (False, True, True)),
    ("plan", ev("progress.task.planned", {"task": {"id": "t"}}), (False, True, True)),
    ("delegation", ev("delegation.subagent.started", {}), (False, True, True)),
    (
        "user message",
        ev("message.user.submitted", {"message_id": "m"}),
        (False, True, True),
    ),
    (
        "thought",
        ev("message.agent.replied", {"message_id": "m", "role": "thinking"}),
        (False, False, True),
    ),
    ("progress", ev("progress.status", {}), (False, False, True)),
    ("state", ev("state.snapshot", {}), (False, False, True)),
    ("resource", ev("resource.retrieval.returned", {}), (False, False, True)),
    ("assessment", ev("assessment.feedback.received", {}), (False, False, True)),
    ("command ack", ev("control.accepted", cause="C"), (False, False, True)),
    (
        "debug tool card",
        ev("tool.requested", {"tool": {"name": "B"}}, severity="debug"),
        (False, False, True),
    ),
    ("debug error", ev("error.raised", {"fatal": True}, severity="debug"), (False, False, True)),
    ("vendor", ev("x.acme.tool.thing"), (False, False, True)),
]


@pytest.mark.parametrize(
    ("event", "shown"), [v[1:] for v in VISIBILITY], ids=[v[0] for v in VISIBILITY]
)
def test_verbosity_filters_as_documented(event, shown):
    renderer = _renderer()
    seen = tuple(
        bool(renderer.render(event, ceiling="redacted", verbosity=v).messages) for v in VERBOSITIES
    )
    assert seen == shown


def test_notifications_show_at_quiet_but_not_for_debug_events():
    renderer = _renderer()
    failing = ev("agent.health", {"status": "failing"})
    assert renderer.render(failing, ceiling="redacted", verbosity="quiet").notification
    hushed = ev("agent.health", {"status": "failing"}, severity="debug")
    assert renderer.render(hushed, ceiling="redacted", verbosity="normal").notification is None
    assert renderer.render(hushed, ceiling="redacted", verbosity="verbose").notification


def test_the_run_summary_carries_its_footer_at_every_verbosity():
    """How long, how many tokens and what it cost: under the run's last words, at quiet too
    (quiet shows the cost), and never as a message of its own."""
    data = {
        "summary": "Fixed the test.",
        "duration_ms": 65000,
        "gen_ai.usage.input_tokens": 1204,
        "gen_ai.usage.output_tokens": 320,
        "cost": {"currency": "USD", "total": 0.0213},
    }
    event = ev("run.finished", data, capture="redacted")
    footer = "Finished in 1m 05s · 1,204 tokens in, 320 out · $0.0213"
    for verbosity in VERBOSITIES:
        shown = _renderer().render(event, ceiling="redacted", verbosity=verbosity).messages
        assert [m.text for m in shown] == [f"Fixed the test.\n\n{footer}"], verbosity


def test_unknown_verbosity_is_refused():
    with pytest.raises(ValueError, match="verbosity"):
        _renderer().render(ev("run.started", {}), ceiling="redacted", verbosity="loud")  # type: ignore[arg-type]


# -- tool cards ------------------------------------------------------------------------------


def test_a_tool_call_is_one_line_of_the_activity_its_update_replaces():
    renderer = _renderer()
    requested = ev(
        "tool.requested",
        {"tool": {"name": "Bash", "call_id": "t1"}, "args": {"command": "make test"}},
        capture="full",
    )
    completed = ev(
        "tool.completed",
        {"tool": {"name": "Bash", "call_id": "t1"}, "duration_ms": 1200, "result": "ok\nmore"},
        capture="full",
        cause=requested.id,
    )
    first = renderer.render(requested, ceiling="full", verbosity="normal").messages
    second = renderer.render(completed, ceiling="full", verbosity="normal").messages
    key = f"activity:{requested.id}"
    assert [(m.type, m.key, m.text) for m in first] == [("tool_update", key, "⏳ Bash make test")]
    assert [(m.type, m.key, m.text) for m in second] == [
        ("tool_update", key, "✅ Bash make test — more")
    ]
    assert first[0].metadata["tools"] == [
        {"tool": "Bash", "call_id": "t1", "status": "running", "duration_ms": None}
    ]
    assert second[0].metadata["tools"][0]["status"] == "success"
    again = _renderer()
    again.render(requested, ceiling="full", verbosity="verbose")
    verbose = again.render(completed, ceiling="full", verbosity="verbose").messages
    # verbose adds the time it took and the output's last lines, still no raw JSON
    assert verbose[0].text == "✅ Bash make test — more · 1.2 s\n\noutput\nok\nmore"


def test_the_calls_of_one_stretch_share_an_activity_and_a_reply_starts_another():
    renderer = _renderer()

    def keys(event: Event) -> list[str | None]:
        return [
            m.key for m in renderer.render(event, ceiling="metadata", verbosity="normal").messages
        ]

    [a] = keys(ev("tool.requested", {"tool": {"name": "Bash", "call_id": "a"}}))
    [b] = keys(ev("tool.requested", {"tool": {"name": "Bash", "call_id": "b"}}))
    assert a == b
    assert a is not None
    assert a.startswith("activity:")
    keys(ev("message.agent.replied", {"message_id": "m", "text": "Now the fix."}))
    [c] = keys(ev("tool.requested", {"tool": {"name": "Read", "call_id": "c"}}))
    assert c != a  # below the reply, in the order things happened
    # a call of the first stretch that finishes late still updates its own line, up there
    [late] = keys(ev("tool.completed", {"tool": {"name": "Bash", "call_id": "a"}}))
    assert late == a


def test_at_ceiling_none_tool_calls_pair_on_the_envelope_cause():
    renderer = _renderer()
    first = ev("tool.requested", {"tool": {"name": "Bash", "call_id": "t1"}}, subject="Bash")
    other = ev("tool.requested", {"tool": {"name": "Bash", "call_id": "t2"}}, subject="Bash")
    done = ev(
        "tool.failed", {"tool": {"name": "Bash"}, "error": {}}, subject="Bash", cause=first.id
    )
    shown = [
        renderer.render(e, ceiling="none", verbosity="normal").messages[0]
        for e in (first, other, done)
    ]
    # the failure is the first call's: its line fails, the other still runs
    assert shown[2].text.splitlines()[0].startswith("❌")
    assert shown[2].text.splitlines()[-1].startswith("⏳")
    assert "t1" not in "".join(m.key or "" for m in shown)


@pytest.mark.parametrize(
    ("terminal", "text"),
    [
        (
            ev(
                "tool.failed",
                {
                    "tool": {"name": "Write", "call_id": "w"},
                    "error": {"message": "disk full"},
                    "duration_ms": 20,
                },
                capture="redacted",
            ),
            "❌ Write — disk full",
        ),
        (
            ev("tool.denied", {"tool": {"name": "Write", "call_id": "w"}, "by": "user_setting"}),
            "🚫 Write — denied: by user_setting",
        ),
        (
            ev("tool.completed", {"tool": {"name": "Write", "call_id": "w"}, "status": "partial"}),
            "⚠️ Write — partial",
        ),
    ],
)
def test_tool_terminals_say_how_the_call_ended(terminal, text):
    [message] = _renderer().render(terminal, ceiling="redacted", verbosity="normal").messages
    assert (message.type, message.text) == ("tool_update", text)


# -- plans -----------------------------------------------------------------------------------


def test_the_plan_card_accumulates_tasks_per_session():
    renderer = _renderer()

    def show(event: Event) -> OutgoingMessage:
        [message] = renderer.render(event, ceiling="redacted", verbosity="normal").messages
        return message

    show(
        ev("progress.task.planned", {"task": {"id": "1", "title": "reproduce"}}, capture="redacted")
    )
    show(ev("progress.task.planned", {"task": {"id": "2", "title": "fix"}}, capture="redacted"))
    card = show(ev("progress.task.completed", {"task": {"id": "1"}, "status": "completed"}))
    assert card.key == "plan:s1"
    assert card.text == "Plan\n✅ reproduce\n⬜ fix"
    assert card.metadata == {
        "entries": [
            {"content": "reproduce", "status": "completed"},
            {"content": "fix", "status": "pending"},
        ]
    }
    elsewhere = show(
        ev(
            "progress.task.planned",
            {"task": {"id": "9", "title": "x"}},
            session="s2",
            capture="redacted",
        )
    )
    assert (elsewhere.key, elsewhere.text) == ("plan:s2", "Plan\n⬜ x")


def test_rendering_an_event_again_for_another_channel_changes_nothing():
    renderer = _renderer()
    planned = ev("progress.task.planned", {"task": {"id": "1", "title": "a"}}, capture="redacted")
    done = ev("progress.task.completed", {"task": {"id": "1"}})
    for event in (planned, done):
        first = renderer.render(event, ceiling="redacted", verbosity="normal")
        again = renderer.render(event, ceiling="redacted", verbosity="normal")
        assert first == again
    assert first.messages[0].text == "Plan\n✅ a"


def test_the_plan_is_kept_per_ceiling_and_forgotten_when_the_session_ends():
    renderer = _renderer()
    planned = ev(
        "progress.task.planned", {"task": {"id": "1", "title": "secret plan"}}, capture="redacted"
    )
    meta = renderer.render(planned, ceiling="metadata", verbosity="normal").messages[0]
    red = renderer.render(planned, ceiling="redacted", verbosity="normal").messages[0]
    assert (meta.text, red.text) == ("Plan\n⬜ 1", "Plan\n⬜ secret plan")
    renderer.render(ev("session.ended", {}), ceiling="redacted", verbosity="normal")
    later = ev("progress.task.planned", {"task": {"id": "2", "title": "next"}}, capture="redacted")
    assert renderer.render(later, ceiling="redacted", verbosity="normal").messages[0].text == (
        "Plan\n⬜ next"
    )


# -- capture and redaction -------------------------------------------------------------------

AWS = "AKIAIOSFODNN7EXAMPLE"
BEARER_TOKEN = "abc123.DEF-456_ghi~789"
EMAIL = "jo.bloggs@example.com"
HOME_USER = "/home/alice"
SHAPES = {
    "aws key": (f"use {AWS} now", AWS),
    "bearer token": (f"Authorization: Bearer {BEARER_TOKEN}", BEARER_TOKEN),
    "email": (f"mail {EMAIL} today", EMAIL),
    "home path": (f"{HOME_USER}/projects/app", HOME_USER),
}


def _leaf_value(annotation: Any) -> Any:
    """A plausible non-string value for a field type."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _leaf_value(args[0])
    if origin in (typing.Union, types.UnionType):
        return _leaf_value(args[0])
    if annotation is bool:
        return True
    if annotation is int:
        return 3
    if annotation is float:
        return 0.5
    return None


def _fill(annotation: Any, path: str, text: Any) -> Any:
    """A value for `annotation` with every string `text(path)` (a list's items at `path[]`)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is str:
        return text(path)
    if origin is typing.Literal:
        return args[0]
    if origin is typing.Annotated:
        return _fill(args[0], path, text)
    if origin in (typing.Union, types.UnionType):
        choice = str if str in args else args[0]
        return _fill(choice, path, text)
    if origin is list:
        return [_fill(args[0], path + "[]", text)]
    if origin is dict:
        return {"command": text(path), "note": text(path), text(path): "value"}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _fill_model(annotation, path, text)
    return _leaf_value(annotation)


def _fill_model(model: type[BaseModel], prefix: str, text: Any) -> dict[str, Any]:
    out = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}.{key}" if prefix else key
        if key == "expires_at":
            out[key] = "2030-01-01T00:00:00Z"
        elif key == "respond_via":
            out[key] = ["control"]
        else:
            out[key] = _fill(info.annotation, path, text)
    return out


def _full_event(type_: str, text: Any, envelope: str, agent: str = "claude-code") -> Event:
    model = PAYLOAD_MODELS.get(type_) or RESERVED_MODELS[type_]
    data = _fill_model(model, "", text)
    extra: dict[str, Any] = {"subject": envelope, "capture": "full", "agent": agent}
    if not type_.startswith("agent."):
        extra |= {"run": envelope, "step": envelope}
    return ev(type_, data, **extra)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("type_", ALL_TYPES)
def test_a_secret_in_any_string_field_never_reaches_a_channel(type_, shape):
    planted, needle = SHAPES[shape]
    event = _full_event(type_, lambda path: planted, planted, agent=planted)
    renderer = _renderer()
    for ceiling in CEILINGS:
        seen: list[str] = []
        for verbosity in VERBOSITIES:
            seen += _strings(renderer.render(event, ceiling=ceiling, verbosity=verbosity))
        seen.append(renderer.thread_name(event, ceiling=ceiling))
        if type_ == "attention.requested":
            request, _ = renderer.permission_request(event, "card", ceiling=ceiling)
            seen += _card_strings(request)
        leaked = [s for s in seen if needle in s]
        assert not leaked, f"{needle!r} reached a channel at {ceiling}: {leaked[:3]}"


def test_the_secret_test_would_see_a_leak():
    """The property above is not vacuous: without redaction the planted text shows."""

    class Leaky(Redactor):
        def text(self, text: str) -> str:
            return text

        def value(self, value: Any) -> Any:
            return value

    planted, needle = SHAPES["aws key"]
    event = ev("session.started", {"label": planted}, capture="full")
    rendered = Renderer(Leaky()).render(event, ceiling="full", verbosity="quiet")
    assert any(needle in s for s in _strings(rendered))
    rendered = _renderer().render(event, ceiling="full", verbosity="quiet")
    assert not any(needle in s for s in _strings(rendered))


def _marked(type_: str) -> tuple[Event, set[str], set[str]]:
    """A full event whose free-text fields say `FREE<n>` and other strings `meta<n>`."""
    table = field_levels(type_) or {}
    free: set[str] = set()
    meta: set[str] = set()
    counter = iter(range(10**6))
    star = {"prompt", "options[].label", "fields[].label", "fields[].choices[].label"}

    def text(path: str) -> str:
        parts = path.split(".")
        prefixes = [".".join(parts[: i + 1]) for i in range(len(parts))]
        gated = any(table.get(p, "metadata") != "metadata" or p in star for p in prefixes)
        gated = gated or path.startswith("answer.values")
        word = f"FREE{next(counter)}x" if gated else f"meta{next(counter)}x"
        (free if gated else meta).add(word)
        return word

    return _full_event(type_, text, "env"), free, meta


@pytest.mark.parametrize("type_", ALL_TYPES)
def test_at_metadata_no_free_text_and_at_none_nothing_from_the_payload(type_):
    event, free, meta = _marked(type_)
    renderer = _renderer()
    for ceiling, banned in (("metadata", free), ("none", free | meta)):
        seen: list[str] = []
        for verbosity in VERBOSITIES:
            seen += _strings(renderer.render(event, ceiling=ceiling, verbosity=verbosity))
        seen.append(renderer.thread_name(event, ceiling=ceiling))
        if type_ == "attention.requested":
            seen += _card_strings(renderer.permission_request(event, "card", ceiling=ceiling)[0])
        text = "\n".join(seen)
        shown = sorted(w for w in banned if w in text)
        assert not shown, f"{type_} at {ceiling} shows {shown}"


#: Types whose free text a `redacted` channel does see (so the test above can fail).
SHOWS_FREE_TEXT = [
    "session.started",
    "run.started",
    "run.finished",
    "run.cancelled",
    "tool.requested",
    "tool.failed",
    "run.step.started",
    "progress.status",
    "progress.task.planned",
    "progress.artifact.produced",
    "agent.health",
    "error.raised",
    "state.snapshot",
    "resource.retrieval.requested",
    "assessment.feedback.received",
    "assessment.guardrail.recorded",
    "message.agent.replied",
    "message.user.submitted",
    "control.cancel",
    "control.rejected",
    "attention.answered",
]


@pytest.mark.parametrize("type_", SHOWS_FREE_TEXT)
def test_at_redacted_free_text_is_shown(type_):
    event, free, _ = _marked(type_)
    renderer = _renderer()
    text = "\n".join(_strings(renderer.render(event, ceiling="redacted", verbosity="verbose")))
    assert any(word in text for word in free)


def test_an_event_is_held_to_its_own_declared_capture():
    """Free text in an event that claims `metadata` is not shown even at a `full` ceiling."""
    liar = ev("session.started", {"label": "Secret project", "cwd": "/srv/x"}, capture="metadata")
    renderer = _renderer()
    rendered = renderer.render(liar, ceiling="full", verbosity="verbose")
    assert "Secret project" not in "".join(_strings(rendered))
    assert rendered.rename == "claude-code s1"


def test_the_redacting_hop_keeps_redacted_text_of_a_full_event():
    event = ev("run.started", {"prompt": f"deploy with {AWS}"}, capture="full")
    [message] = _renderer().render(event, ceiling="redacted", verbosity="normal").messages
    assert message.text == "Run started: deploy with [REDACTED:secret]"


# -- permission cards ------------------------------------------------------------------------


def _request(data: dict[str, Any], capture: str = "redacted", **attrs: Any) -> Event:
    return ev(
        "attention.requested", data, subject="Bash", capture=capture, severity="notice", **attrs
    )


PERMISSION = {
    "kind": "permission",
    "prompt": "Run rm -rf build/?",
    "options": [
        {"id": "allow_once", "label": "Allow once"},
        {"id": "allow_always", "label": "Always allow"},
        {"id": "deny", "label": "Deny"},
    ],
    "respond_via": ["control"],
    "expires_at": "2026-07-03T10:05:00Z",
}


def test_permission_request_maps_options_to_short_ids_and_back():
    request, ids = _renderer().permission_request(_request(PERMISSION), "k7", ceiling="redacted")
    assert request.id == "k7"
    assert request.title == "claude-code asks permission: Bash"
    assert request.description == "Run rm -rf build/?"
    assert [(o.id, o.label, o.is_allow) for o in request.options] == [
        ("o1", "Allow once", True),
        ("o2", "Always allow", True),
        ("o3", "Deny", False),
    ]
    assert ids == ["allow_once", "allow_always", "deny"]
    assert {o.id: ids[i] for i, o in enumerate(request.options)}["o3"] == "deny"
    assert request.accepts_text  # AEP-0008: a permission request takes a typed answer too
    assert not request.informational
    assert request.expires_at == datetime(2026, 7, 3, 10, 5, tzinfo=UTC)


@pytest.mark.parametrize("capture", ["metadata", "redacted", "full"])
def test_a_requests_option_ids_are_read_without_drawing_its_card(capture):
    """The core stores a request's option ids before any card is drawn (`option_ids`): the
    ids a press maps back to must be those of the card a channel shows, at any capture."""
    renderer = _renderer()
    requests = [_request(PERMISSION, capture=capture), _request({**PERMISSION, "options": []})]
    requests += [e for e in GOLDEN if e.type == "attention.requested"]
    for event in requests:
        _, drawn = renderer.permission_request(event, "k", ceiling="full")
        assert renderer.option_ids(event) == drawn
    assert renderer.option_ids(requests[0]) == ["allow_once", "allow_always", "deny"]


@pytest.mark.parametrize(
    ("respond_via", "informational"),
    [(["oob"], True), (["control", "oob"], False), (["control"], False), (None, False)],
)
def test_respond_via_without_control_is_informational(respond_via, informational):
    data = {k: v for k, v in PERMISSION.items() if k != "respond_via"}
    if respond_via is not None:
        data["respond_via"] = respond_via
    request, _ = _renderer().permission_request(_request(data), "k", ceiling="redacted")
    assert request.informational is informational
    assert request.accepts_text is not informational


def test_informational_requests_say_so_in_the_notification():
    data = {**PERMISSION, "respond_via": ["oob"]}
    rendered = _renderer().render(_request(data), ceiling="redacted", verbosity="quiet")
    assert rendered.notification is not None
    assert "terminal" in rendered.notification.summary


@pytest.mark.parametrize("ceiling", ["metadata", "none"])
def test_below_redacted_the_card_shows_structure_only(ceiling):
    request, ids = _renderer().permission_request(_request(PERMISSION), "k", ceiling=ceiling)
    assert "rm -rf" not in request.description
    assert all("Allow" not in o.label and "Deny" not in o.label for o in request.options)
    if ceiling == "metadata":
        assert request.description == "claude-code requests permission: Bash"
        assert [o.label for o in request.options] == ["allow_once", "allow_always", "deny"]
        assert ids == ["allow_once", "allow_always", "deny"]
    else:
        assert request.options == ()
        assert ids == []


def test_the_events_own_capture_makes_placeholders_even_at_a_full_ceiling():
    request, _ = _renderer().permission_request(
        _request(PERMISSION, capture="metadata"), "k", ceiling="full"
    )
    assert request.description == "claude-code requests permission: Bash"
    assert [o.label for o in request.options] == ["allow_once", "allow_always", "deny"]


def test_card_text_is_redacted_at_every_ceiling_that_shows_it():
    data = {
        **PERMISSION,
        "prompt": f"Push with {AWS} for {EMAIL}?",
        "options": [{"id": "allow", "label": f"Allow {EMAIL}"}],
    }
    for ceiling in ("redacted", "full"):
        request, _ = _renderer().permission_request(_request(data, "full"), "k", ceiling=ceiling)
        assert request.description == "Push with [REDACTED:secret] for [REDACTED:pii]?"
        assert request.options[0].label == "Allow [REDACTED:pii]"


@pytest.mark.parametrize(
    ("kind", "options", "accepts_text"),
    [
        ("permission", True, True),
        ("input", False, True),
        ("other", True, True),
        ("form", False, True),
        ("auth", True, False),
        ("review", True, False),
        ("review", False, True),
    ],
)
def test_which_requests_accept_text(kind, options, accepts_text):
    data: dict[str, Any] = {"kind": kind, "prompt": "?"}
    if options:
        data["options"] = [{"id": "ok", "label": "OK"}]
    if kind == "form":
        data["fields"] = [{"id": "n", "type": "string", "label": "Name"}]
    request, _ = _renderer().permission_request(_request(data), "k", ceiling="redacted")
    assert request.accepts_text is accepts_text
    assert request.kind == kind


def test_form_fields_get_short_ids_that_map_back():
    form = next(e for e in GOLDEN if e.type == "attention.requested" and e.data["kind"] == "form")
    request, _ = _renderer().permission_request(form, "k", ceiling="redacted")
    assert [(f.id, f.type, f.label) for f in request.fields] == [
        ("f1", "string", "Service name"),
        ("f2", "boolean", "Deploy to staging first?"),
        ("f3", "select", "Regions"),
        ("f4", "select", "Database"),
    ]
    assert [(c.id, c.label) for c in request.fields[2].choices] == [
        ("c1", "us-east"),
        ("c2", "eu-west"),
        ("c3", "ap-south"),
    ]
    assert request.fields[0].required
    assert request.fields[2].multi
    assert request.fields[3].other
    answered = {"f1": "billing-api", "f2": True, "f3": ["c1", "c3"], "f4": "MariaDB", "f9": 1}
    assert aep_form_values(form, answered) == {
        "name": "billing-api",
        "staged": True,
        "regions": ["1", "3"],
        "db": "MariaDB",
    }
    meta, _ = _renderer().permission_request(form, "k", ceiling="metadata")
    assert [f.label for f in meta.fields] == ["name", "staged", "regions", "db"]
    assert [c.label for c in meta.fields[2].choices] == ["1", "2", "3"]


# -- thread names ----------------------------------------------------------------------------


def test_thread_name_prefers_the_label_then_the_folder_then_agent_and_session():
    renderer = _renderer()
    both = ev("session.started", {"label": "Fix\nthe  test", "cwd": "/srv/app"}, capture="redacted")
    folder = ev("session.started", {"cwd": "/srv/work/aep-bridge/"}, capture="redacted")
    assert renderer.thread_name(both, ceiling="redacted") == "Fix the test"
    assert renderer.thread_name(folder, ceiling="redacted") == "aep-bridge"
    assert renderer.thread_name(both, ceiling="metadata") == "claude-code s1"
    assert renderer.thread_name(ev("session.started", {}), ceiling="full") == "claude-code s1"


def test_a_uuid_session_is_named_by_its_first_eight_characters():
    """Claude Code's session ids are UUIDs: the thread is `claude-code 9f2c7a1e`, enough to
    tell sessions apart, not 36 characters of hex."""
    uuid = "9f2c7a1e-3b4d-4c5e-8f60-1a2b3c4d5e6f"
    started = ev("session.started", {}, session=uuid)
    assert _renderer().thread_name(started, ceiling="metadata") == "claude-code 9f2c7a1e"
    other = ev("session.started", {}, session="not-a-uuid-but-long-9f2c7a1e3b4d")
    assert _renderer().thread_name(other, ceiling="metadata").endswith("9f2c7a1e3b4d")


def test_thread_name_is_redacted_and_short():
    renderer = _renderer()
    long = ev("session.started", {"label": f"{EMAIL} " + "word " * 60}, capture="redacted")
    name = renderer.thread_name(long, ceiling="redacted")
    assert len(name) <= 100
    assert "\n" not in name
    assert name.startswith("[REDACTED:pii] word")
    home = ev("session.started", {"cwd": HOME_USER}, capture="redacted")
    assert renderer.thread_name(home, ceiling="redacted") == "claude-code s1"


# -- vendor and unknown types ----------------------------------------------------------------


def test_vendor_types_use_the_hook_when_it_answers():
    calls: list[tuple[Event, str]] = []

    def hook(event: Event, verbosity: str) -> list[OutgoingMessage] | None:
        calls.append((event, verbosity))
        return [OutgoingMessage(type="text", text=f"deployed {event.data['target']}")]

    event = ev("x.acme.deploy.done", {"target": f"prod for {EMAIL}"}, capture="redacted")
    rendered = _renderer(vendor=hook).render(event, ceiling="redacted", verbosity="normal")
    assert [m.text for m in rendered.messages] == ["deployed prod for [REDACTED:pii]"]
    assert calls[0][1] == "normal"


def test_the_hook_sees_only_what_the_ceiling_allows():
    seen: list[Event] = []

    def hook(event: Event, verbosity: str) -> list[OutgoingMessage] | None:
        seen.append(event)
        return None

    event = ev("x.acme.deploy.done", {"target": "prod"}, capture="full")
    _renderer(vendor=hook).render(event, ceiling="redacted", verbosity="verbose")
    assert seen[0].data is None
    assert seen[0].capture != "full"


@pytest.mark.parametrize("type_", ["x.acme.deploy.done", "tool.progressed", "run.paused"])
def test_without_an_answer_the_default_line_shows_at_verbose_only(type_):
    renderer = _renderer(vendor=lambda event, verbosity: None)
    event = ev(type_)
    assert renderer.render(event, ceiling="redacted", verbosity="normal").messages == ()
    [line] = renderer.render(event, ceiling="redacted", verbosity="verbose").messages
    assert (line.type, line.text) == ("system_message", f"{type_} (claude-code)")


def test_unknown_types_of_known_categories_also_ask_the_hook():
    hook_messages = [OutgoingMessage(type="system_message", text="paused")]
    renderer = _renderer(vendor=lambda event, verbosity: hook_messages)
    rendered = renderer.render(ev("run.paused"), ceiling="redacted", verbosity="quiet")
    assert [m.text for m in rendered.messages] == ["paused"]


def test_an_empty_answer_hides_the_event_and_a_failing_hook_falls_back():
    hidden = _renderer(vendor=lambda event, verbosity: [])
    assert hidden.render(ev("x.acme.a.b"), ceiling="redacted", verbosity="verbose").messages == ()

    def broken(event: Event, verbosity: str) -> list[OutgoingMessage]:
        raise RuntimeError("plugin bug")

    fallback = _renderer(vendor=broken)
    [line] = fallback.render(ev("x.acme.a.b"), ceiling="redacted", verbosity="verbose").messages
    assert line.text == "x.acme.a.b (claude-code)"


def test_the_hook_is_not_asked_about_debug_events_below_verbose():
    calls: list[str] = []

    def hook(event: Event, verbosity: str) -> list[OutgoingMessage]:
        calls.append(verbosity)
        return [OutgoingMessage(type="text", text="x")]

    renderer = _renderer(vendor=hook)
    debug = ev("x.claude-code.session.config_change", severity="debug")
    assert renderer.render(debug, ceiling="redacted", verbosity="normal").messages == ()
    assert renderer.render(debug, ceiling="redacted", verbosity="verbose").messages
    assert calls == ["verbose"]


def test_hook_messages_are_redacted_text_metadata_and_key():
    def hook(event: Event, verbosity: str) -> list[OutgoingMessage]:
        return [
            OutgoingMessage(
                type="text",
                text=f"token {AWS}",
                key=f"card {AWS}",
                metadata={"who": EMAIL, "password": "hunter2"},
            )
        ]

    [message] = (
        _renderer(vendor=hook)
        .render(ev("x.acme.a.b"), ceiling="redacted", verbosity="quiet")
        .messages
    )
    assert AWS not in message.text
    assert AWS not in (message.key or "")
    assert message.metadata == {"who": "[REDACTED:pii]", "password": "[REDACTED:secret]"}


def test_a_label_that_was_all_secret_does_not_name_the_thread():
    event = ev("session.started", {"label": EMAIL, "cwd": "/srv/shop"}, capture="redacted")
    assert _renderer().thread_name(event, ceiling="redacted") == "shop"
