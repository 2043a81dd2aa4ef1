"""Bad values never wedge a card: any valid AEP value renders, and a card that cannot be
rendered becomes a plain one (title and options) that can still be answered."""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Any

from aep_bridge import hookimpl
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.redaction import RedactionPolicy, Redactor
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.types import PermissionRequest, ResolutionStatus
from aep_bridge.render import Renderer
from aep_bridge.render.cards import _parse_time
from aep_bridge.testing import MemoryChannel
from tests.core.rig import ALICE, Rig, memory_host

#: valid AEP (RFC 3339 with an offset), and the year 10000 once in UTC
FAR_EXPIRY = "9999-12-31T23:59:59-14:00"


class ClockChannel(MemoryChannel):
    """A memory channel that shows a card's expiry in UTC, as the Telegram channel does."""

    name = "clock"

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        if request.expires_at is not None:
            request.expires_at.astimezone(UTC).strftime("%H:%M UTC")
        await super().send_permission_request(session_id, request)


class _ClockPlugin:
    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        return [ChannelRegistration.of(ClockChannel)]


def _clock_rig(tmp_path: Any) -> Rig:
    return Rig(
        tmp_path,
        channels={"alpha": {"type": "clock", "approvers": ["alice"]}},
        host=memory_host(_ClockPlugin()),
        outbox_options={"max_attempts": 2},
    )


async def test_an_expiry_beyond_utc_gets_a_card_with_buttons_and_a_press_answers(tmp_path):
    async with _clock_rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask(expires_at=FAR_EXPIRY)
        await rig.settle()
        assert [label for label, _ in rig.buttons("alpha")] == ["Allow", "Deny"]
        resolution = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        assert resolution.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert agent.answers == [{"option": "allow"}]


async def test_a_renderer_that_raises_gives_a_plain_card_that_can_be_answered(
    tmp_path, monkeypatch, caplog
):
    def broken(self: Renderer, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Renderer, "_permission_card", broken)
    caplog.set_level(logging.ERROR, logger="aep_bridge")
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        asked = agent.ask("Run `make test`?", expires_at="2030-01-01T00:00:00Z")
        await rig.settle()
        for channel in ("alpha", "beta"):
            _, card, _ = rig.card(channel)
            assert card.title == "test-agent asks a question"
            assert card.expires_at is None
            assert card.description == ""
            assert [label for label, _ in rig.buttons(channel)] == ["Allow", "Deny"]
        failures = [r for r in caplog.records if "rendering the card of" in r.getMessage()]
        assert [r.getMessage() for r in failures] == [
            f"rendering the card of {asked.id} failed; a plain card is shown instead"
        ]
        resolution = await rig.channel("alpha").press(rig.buttons("alpha")[1][1], ALICE)
        assert resolution.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert agent.answers == [{"option": "deny"}]


def test_the_fallback_card_has_the_title_and_options_and_no_expiry(monkeypatch):
    policy = RedactionPolicy.from_environment([], extra_values=["hunter2-hunter2"])
    renderer = Renderer(Redactor(policy))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(renderer, "_permission_card", broken)
    event = Event.model_validate(
        {
            "aep": "0.1",
            "id": "ev-1",
            "type": "attention.requested",
            "source": "aep://host/claude-code",
            "agent": "claude-code",
            "session": "s1",
            "seq": 1,
            "time": "2026-01-01T00:00:00Z",
            "capture": "full",
            "data": {
                "kind": "permission",
                "prompt": "Run it?",
                "expires_at": FAR_EXPIRY,
                "options": [
                    {"id": "allow", "label": "Allow, token hunter2-hunter2"},
                    {"id": "deny", "label": "Deny"},
                ],
            },
        }
    )
    card, ids = renderer.permission_request(event, "c1", ceiling="redacted")
    assert card.title == "claude-code asks a question"
    assert [o.label for o in card.options] == ["Allow, token [REDACTED:secret]", "Deny"]
    assert [o.id for o in card.options] == ["o1", "o2"]
    assert card.options[0].is_allow
    assert ids == ["allow", "deny"]
    assert card.expires_at is None
    low, _ = renderer.permission_request(event, "c1", ceiling="metadata")
    assert [o.label for o in low.options] == ["allow", "deny"]


def test_an_expiry_is_given_in_utc_and_one_beyond_utc_is_none():
    assert _parse_time(FAR_EXPIRY) is None
    parsed = _parse_time("2030-01-01T02:00:00+02:00")
    assert parsed is not None
    assert parsed.isoformat() == "2030-01-01T00:00:00+00:00"
