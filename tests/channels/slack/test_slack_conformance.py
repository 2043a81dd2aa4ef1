"""The channel contract's conformance kit, against the real slack-bolt and slack-sdk and the
fake Slack over loopback (no rate limits here: the kit calls the adapter directly, without
the core's outbox that keeps them; the end-to-end tests keep the real limits)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aep_bridge import (
    ChannelUser,
    PermissionOption,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.testing import (
    ChannelConformance,
    FakeCore,
    Harness,
    library_logs_nothing_wrong,
)
from aep_bridge_slack import SlackChannel

from .conftest import AT_A_RESTART
from .fake_slack import ALICE, MALLORY, FakeSlack, Limits
from .probe import SlackProbe, make_adapter

APPROVER = ChannelUser(id=ALICE["id"], name="Alice")


#: the conftest's check, but for one known record: the kit's restart test stops the adapter
#: while bolt still acks an envelope over the closing Socket
#: Mode session; the check found it once it read the test's call phase (issue 35)
_slack_logs_no_errors = library_logs_nothing_wrong("slack_bolt", "slack_sdk", allow=AT_A_RESTART)


class TestSlackConformance(ChannelConformance):
    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        async with FakeSlack(limits=Limits.loose()) as fake:
            core = FakeCore()
            adapter = make_adapter(fake, core)
            core.attach(adapter)
            await adapter.start()

            async def restart() -> SlackChannel:
                """A bridge restart: a new app and Socket Mode connection."""
                await adapter.stop()
                again = make_adapter(fake, core)
                core.attach(again)
                await again.start()
                return again

            async def declining() -> SlackChannel:
                """Without `notifications_channel_id`: no heads-ups."""
                quiet = make_adapter(fake, core, notifications_channel_id=None)
                core.attach(quiet)
                await quiet.start()
                return quiet

            try:
                yield Harness(
                    adapter,
                    core,
                    SlackProbe(fake, core),
                    approver=APPROVER,
                    restart=restart,
                    declining=declining,
                )
            finally:
                await adapter.stop()
            assert fake.violations == []
            assert fake.unanswered() == []  # every envelope acked within 3 s

    async def test_presses_by_anyone_go_to_the_core_which_decides(self, harness: Harness) -> None:
        """The kit's version presses as `stranger-99`; here the stranger is Mallory, a
        member of the workspace who is no approver. The adapter does not filter presses:
        the core decides, and the presser alone is told (an ephemeral message)."""
        h = harness
        await self._thread(h)
        request = PermissionRequest(
            id="c8Qb",
            title="claude-code wants to run Bash",
            description="rm -rf build/",
            options=(PermissionOption(id="o1", label="Allow", is_allow=True),),
        )
        card = await self._card(h, request)
        stranger = ChannelUser(id=MALLORY["id"], name="Mallory")
        await h.probe.press(card, card.buttons[0], stranger)
        await self._wait_for_press(h, 1)
        assert h.core.presses[-1].user.id == MALLORY["id"]
        fake: FakeSlack = h.probe.fake  # type: ignore[attr-defined]
        (note,) = await fake.wait_until(lambda: fake.ephemeral(MALLORY), what="the refusal")
        assert note.text == Resolution(status=ResolutionStatus.NOT_ALLOWED).message
        assert note.thread_ts == card.thread_id  # in the card's thread

    async def test_words_answer_a_card_by_its_id(self, harness: Harness) -> None:
        """Words in the thread while the card is its one open question that takes words go
        to the core as a text answer to that card: never as an option, never as chat."""
        h = harness
        thread = await self._thread(h)
        request = PermissionRequest(id="cTxt", title="Which branch?", accepts_text=True)
        await self._card(h, request)
        await h.probe.reply(thread, "release/2.1 & <main>", h.approver)
        assert [(p.card_id, p.answer, p.via) for p in h.core.presses] == [
            ("cTxt", "release/2.1 & <main>", "text"),  # as typed, not as Slack's entities
        ]
        assert h.core.incoming == []
