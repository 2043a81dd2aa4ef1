"""Codex's held Stop (issue 33): the question the chat sees, and what the hook prints back.

The payload is Codex's documented Stop input, every field its generated input schema requires
(`stop.command.input.schema.json`); the output is checked against the rules Codex applies when
it reads a Stop hook's stdout (codex-rs/hooks/src/events/stop.rs): an object of the known keys
only, `decision` `"block"` with a `reason` that is not blank, or nothing at all to let the turn
end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.agents.codex import (
    AGENT,
    DONE,
    STOP_PROMPT,
    hook_output,
    identity,
    map_hook,
    stop_output,
    stop_question,
)
from aep_bridge.agents.mapping import DEFAULT_CEILING, Ceiling, Emission, Verdict
from tests.official import assert_valid

FULL = Ceiling(events="full", attention="full")
METADATA = Ceiling(events="metadata", attention="metadata")
SAID = "I fixed the rounding in invoice.py and the tests pass. Anything else?"
#: the keys Codex's Stop output may have (its schema has `additionalProperties: false`)
CODEX_STOP_KEYS = {
    "continue",
    "decision",
    "reason",
    "stopReason",
    "suppressOutput",
    "systemMessage",
}


def _stop(**changes: Any) -> dict[str, Any]:
    """Codex's Stop hook input, as Codex writes it on the hook's stdin."""
    payload: dict[str, Any] = {
        "session_id": "019a2c3e-7f1b-7d2a-9c1e-5b8a4f3d2e10",
        "turn_id": "turn-7",
        "transcript_path": None,
        "cwd": "/work/app",
        "hook_event_name": "Stop",
        "model": "gpt-5.3-codex",
        "permission_mode": "default",
        "stop_hook_active": False,
        "last_assistant_message": SAID,
    }
    payload.update(changes)
    return payload


def _wire(emission: Emission, payload: dict[str, Any]) -> dict[str, Any]:
    """The question in the envelope the daemon gives it, checked by our rules and AEP's."""
    session, run = identity(payload)
    event = make_event(
        emission.type,
        source="urn:aep-bridge:test",
        agent=AGENT,
        session=session or "s_test",
        seq=1,
        epoch=1,
        run=emission.run or run,
        severity=emission.severity,
        capture=emission.capture,
        extensions={"aepbridgesteer": "stop"},
        data=emission.data,
    )
    wire = event.to_dict()
    assert_valid(wire)
    return wire


def _codex_reads(printed: dict[str, Any] | None) -> tuple[str, str | None]:
    """What Codex does with the hook's stdout: ("stop", None) or ("continue", prompt)."""
    if printed is None:
        return "stop", None  # empty stdout, exit 0: the turn ends
    text = json.dumps(printed)
    parsed = json.loads(text)
    assert set(parsed) <= CODEX_STOP_KEYS, parsed
    if parsed.get("continue", True) is False:
        return "stop", None
    if parsed.get("decision") == "block":
        reason = parsed.get("reason")
        assert isinstance(reason, str)
        assert reason.strip(), "Codex fails a blank block reason"
        return "continue", reason
    return "stop", None


def test_the_question_asks_what_next_with_what_codex_said_and_done() -> None:
    payload = _stop()
    question = stop_question(payload, FULL)
    assert question is not None
    wire = _wire(question, payload)
    assert wire["type"] == "attention.requested"
    assert wire["run"] == "turn-7"
    assert wire["aepbridgesteer"] == "stop"
    data = wire["data"]
    assert data["kind"] == "input"
    assert data["prompt"] == "codex finished: what next?" == STOP_PROMPT
    assert data["options"] == [{"id": DONE, "label": "Done"}]
    assert data["respond_via"] == ["control"]
    assert data["context"] == {"last_assistant_message": SAID}


def test_what_codex_said_follows_the_attention_capture_ceiling() -> None:
    payload = _stop(last_assistant_message=f"deployed with token {'ghp_' + 'x' * 36}")
    redacted = stop_question(payload, DEFAULT_CEILING)
    assert redacted is not None
    data = _wire(redacted, payload)["data"]
    assert data["prompt"] == STOP_PROMPT
    assert "context" not in data  # `context` is gated at `full`
    assert "ghp_" not in json.dumps(data)
    metadata = stop_question(payload, METADATA)
    assert metadata is not None
    data = _wire(metadata, payload)["data"]
    assert data["prompt"] == "codex requests input"  # structure only (AEP-0003 §9.2)
    assert data["options"] == [{"id": DONE, "label": "Done"}]
    assert "context" not in data


def test_a_stop_without_words_still_asks() -> None:
    payload = _stop(last_assistant_message=None, stop_hook_active=True)
    question = stop_question(payload, FULL)
    assert question is not None
    assert "context" not in _wire(question, payload)["data"]


@pytest.mark.parametrize(
    "payload",
    [None, [], {"hook_event_name": "PermissionRequest", "session_id": "s"}, {"session_id": "s"}],
)
def test_only_a_stop_is_a_question(payload: Any) -> None:
    assert stop_question(payload, FULL) is None


def test_the_stop_still_finishes_the_run() -> None:
    """Holding the Stop adds the question; the Stop itself is still `run.finished`."""
    assert [e.type for e in map_hook(_stop(), FULL)] == ["run.finished"]


def test_words_from_the_chat_become_codex_next_instruction() -> None:
    words = "run the tests again, then open a PR"
    printed = hook_output(_stop(), Verdict(text=words))
    assert printed == {"decision": "block", "reason": words}
    assert _codex_reads(printed) == ("continue", words)
    assert stop_output(Verdict(text=words)) == printed


def test_the_words_reach_codex_as_written() -> None:
    words = '  keep "going"\n\n- step 1\n- step 2 ✅  '
    assert _codex_reads(hook_output(_stop(), Verdict(text=words))) == ("continue", words)


@pytest.mark.parametrize(
    "verdict",
    [None, Verdict(option=DONE), Verdict(text=""), Verdict(text=" \n\t "), Verdict(option="allow")],
    ids=["timeout", "done", "empty", "blank", "an option the question did not offer"],
)
def test_done_a_timeout_or_no_words_let_codex_stop(verdict: Verdict | None) -> None:
    printed = hook_output(_stop(), verdict)
    assert printed is None
    assert _codex_reads(printed) == ("stop", None)


def test_a_stop_answer_is_never_a_permission_decision() -> None:
    printed = hook_output(_stop(), Verdict(text="deny that"))
    assert printed is not None
    assert "hookSpecificOutput" not in printed
