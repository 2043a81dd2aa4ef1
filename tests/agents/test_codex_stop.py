"""Codex's held Stop (issue 33): what the hook prints back for the person's answer.

The question itself is the daemon's, the same for every agent (agents/steer.py). The payload
is Codex's documented Stop input, every field its generated input schema requires
(`stop.command.input.schema.json`); the output is checked against the rules Codex applies when
it reads a Stop hook's stdout (codex-rs/hooks/src/events/stop.rs): an object of the known keys
only, `decision` `"block"` with a `reason` that is not blank, or nothing at all to let the turn
end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aep_bridge.agents.codex import (
    STEERED_HOOKS,
    STOP_BLOCK_CAP,
    hook_output,
    map_hook,
    stop_output,
)
from aep_bridge.agents.mapping import Ceiling, Verdict

FULL = Ceiling(events="full", attention="full")
DONE = "done"  # the held Stop's one option (the daemon's question offers it)
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
        "cwd": "/home/user/app",
        "hook_event_name": "Stop",
        "model": "gpt-5.3-codex",
        "permission_mode": "default",
        "stop_hook_active": False,
        "last_assistant_message": SAID,
    }
    payload.update(changes)
    return payload


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


def test_codex_stop_is_held_and_no_cap_stops_the_instructions() -> None:
    """The daemon holds Codex's Stop while away, and never stops asking for a cap: Codex
    counts no Stop blocks in a row (Claude Code's cap is its own)."""
    assert "Stop" in STEERED_HOOKS
    assert STOP_BLOCK_CAP == 0


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
