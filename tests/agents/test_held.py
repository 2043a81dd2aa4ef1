"""The held attention loop's decisions: one per command, checked against its request.

The loop runs with the daemon's real emitter (positions, session log); what it sends is
collected as the bridge would receive it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.agents.emitter import Emitter, SessionState
from aep_bridge.agents.held import AttentionLoop
from aep_bridge.agents.mapping import Ceiling, Verdict

pytestmark = pytest.mark.asyncio

PERMISSION = {
    "kind": "permission",
    "prompt": "Permission requested: Bash — npm test",
    "options": [
        {"id": "allow", "label": "Allow"},
        {"id": "allow_session", "label": "Allow for this session"},
        {"id": "deny", "label": "Deny"},
    ],
    "respond_via": ["control"],
}
FORM = {
    "kind": "form",
    "prompt": "claude-code asks 1 question",
    "fields": [
        {
            "id": "1",
            "type": "select",
            "label": "Database",
            "required": True,
            "other": True,
            "choices": [{"id": "1", "label": "PostgreSQL"}, {"id": "2", "label": "SQLite"}],
        }
    ],
    "respond_via": ["control"],
}


class Rig:
    def __init__(self, tmp_path: Path) -> None:
        self.emitter = Emitter(tmp_path)
        self.sent: list[Event] = []
        self.state = self.emitter.session("claude-code", "s1")
        self.loop = AttentionLoop(self.emit, self.sent.append, self.find, Ceiling())

    def emit(self, state: SessionState, type_: str, data: dict[str, Any], **kw: Any) -> Event:
        event = self.emitter.build(state, type_, data, **kw)
        self.sent.append(event)
        return event

    def find(self, session: str | None) -> SessionState | None:
        return self.state if session == "s1" else None

    def request(self, data: dict[str, Any]) -> Event:
        return self.emit(self.state, "attention.requested", data, capture="redacted")

    def hold(self, request: Event, seconds: float = 5.0) -> asyncio.Task[Verdict | None]:
        return asyncio.create_task(self.loop.hold(self.state, request, "Bash", seconds))

    @staticmethod
    def command(request: Event, answer: dict[str, Any], id: str = "cmd-1") -> Event:
        return make_event(
            "control.attention.respond",
            source="aep://bridge/aep-bridge",
            agent="aep-bridge",
            session=request.session,
            subject=request.id,
            cause=request.id,
            data={"answer": answer},
            capture="full" if "text" in answer or "values" in answer else "metadata",
            id=id,
        )

    def types(self) -> list[str]:
        return [e.type for e in self.sent]


async def test_a_retried_command_gets_the_recorded_ack_byte_for_byte(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(PERMISSION)
    held = rig.hold(request)
    await asyncio.sleep(0)
    command = rig.command(request, {"option": "allow"})
    await rig.loop.on_command(command)
    assert await held == Verdict(option="allow")
    before = list(rig.sent)
    await rig.loop.on_command(command)  # the bridge did not see the ack: it sends again
    assert rig.sent[len(before) :] == [before[-3]]  # the same control.accepted, nothing new
    assert rig.sent[-1].raw == before[-3].raw
    assert rig.types().count("attention.answered") == 1


async def test_an_answer_to_a_closed_request_is_rejected_invalid(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(PERMISSION)
    held = rig.hold(request, 0.05)
    assert await held is None  # the hold passed
    await rig.loop.on_command(rig.command(request, {"option": "allow"}))
    assert rig.types()[-2:] == ["attention.timeout", "control.rejected"]
    assert rig.sent[-1].data["reason"] == "invalid"


async def test_an_option_the_request_does_not_offer_is_rejected_and_it_stays_open(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(PERMISSION)
    held = rig.hold(request)
    await asyncio.sleep(0)
    await rig.loop.on_command(rig.command(request, {"option": "sudo"}, id="c1"))
    assert rig.types()[-1] == "control.rejected"
    assert not held.done()
    await rig.loop.on_command(rig.command(request, {"option": "deny"}, id="c2"))
    assert await held == Verdict(option="deny")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  ALLOW ", Verdict(option="allow")),  # the word is the decision
        ("allow for this session", Verdict(option="allow_session")),
        ("run it with -x", Verdict(option="deny", text="run it with -x")),  # never grants
    ],
)
async def test_text_answers_follow_aep_0008(tmp_path: Path, text: str, expected: Verdict):
    rig = Rig(tmp_path)
    request = rig.request(PERMISSION)
    held = rig.hold(request)
    await asyncio.sleep(0)
    await rig.loop.on_command(rig.command(request, {"text": text}))
    assert await held == expected


async def test_form_values_are_checked_against_the_fields(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(FORM)
    held = rig.hold(request)
    await asyncio.sleep(0)
    await rig.loop.on_command(rig.command(request, {"values": {}}, id="c1"))  # required
    assert rig.types()[-1] == "control.rejected"
    assert not held.done()
    await rig.loop.on_command(rig.command(request, {"values": {"1": "2"}}, id="c2"))
    assert await held == Verdict(values={"1": "2"})


async def test_a_text_answer_to_a_one_question_form_is_its_other_answer(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(FORM)
    held = rig.hold(request)
    await asyncio.sleep(0)
    await rig.loop.on_command(rig.command(request, {"text": "DuckDB"}))
    assert await held == Verdict(values={"1": "DuckDB"})


async def test_an_answer_for_another_session_is_rejected(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(PERMISSION)
    held = rig.hold(request)
    await asyncio.sleep(0)
    forged = make_event(
        "control.attention.respond",
        source="aep://bridge/aep-bridge",
        agent="aep-bridge",
        session="another",
        subject=request.id,
        data={"answer": {"option": "allow"}},
    )
    await rig.loop.on_command(forged)
    assert not held.done()
    assert "control.accepted" not in rig.types()
    held.cancel()


async def test_a_hook_that_goes_away_dismisses_its_request(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(PERMISSION)
    held = rig.hold(request)
    await asyncio.sleep(0)
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    assert rig.sent[-1].type == "attention.resolved"
    assert rig.sent[-1].data == {"resolution": "dismissed"}
    assert rig.loop.pending == {}


async def test_a_request_answered_on_the_agents_own_surface_is_recorded_oob(tmp_path: Path):
    rig = Rig(tmp_path)
    request = rig.request(FORM)
    held = rig.hold(request)
    await asyncio.sleep(0)
    assert rig.loop.answered_elsewhere(rig.state, "Bash", {"values": {"1": "1"}})
    assert await held is None
    assert rig.types()[-2:] == ["attention.answered", "attention.resolved"]
    assert rig.sent[-2].data["via"] == "oob"
