"""The channel contract's conformance kit, against the real discord.py and the fake Discord
over loopback (no rate limits here: the kit calls the adapter directly, without the core's
outbox that keeps them; the end-to-end tests keep the real limits)."""

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
from aep_bridge.testing import ChannelConformance, FakeCore, Harness
from aep_bridge_discord import DiscordChannel

from .fake_discord import ALICE, MALLORY, FakeDiscord, Limits, point_discord_py
from .probe import DiscordProbe, make_adapter

APPROVER = ChannelUser(id=str(ALICE["id"]), name="Alice")


class TestDiscordConformance(ChannelConformance):
    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        async with FakeDiscord(limits=Limits.loose()) as fake:
            with point_discord_py(fake):  # restores discord.py's endpoints afterwards
                core = FakeCore()
                adapter = make_adapter(fake, core)
                core.attach(adapter)
                await adapter.start()

                async def restart() -> DiscordChannel:
                    """A bridge restart: a new client, only the button class registered."""
                    await adapter.stop()
                    again = make_adapter(fake, core)
                    core.attach(again)
                    await again.start()
                    return again

                async def declining() -> DiscordChannel:
                    """Without a notifications channel: no heads-ups."""
                    quiet = make_adapter(fake, core, notifications_channel_id=None)
                    core.attach(quiet)
                    await quiet.start()
                    return quiet

                try:
                    yield Harness(
                        adapter,
                        core,
                        DiscordProbe(fake, core),
                        approver=APPROVER,
                        restart=restart,
                        declining=declining,
                    )
                finally:
                    await adapter.stop()
            assert fake.violations == []
            assert fake.unanswered() == []  # every press answered within 3 s

    async def test_presses_by_anyone_go_to_the_core_which_decides(self, harness: Harness) -> None:
        """The kit's version presses as `stranger-99`; Discord user ids are numbers, so the
        stranger here is Mallory, a member without the approver role. The adapter does not
        filter presses: the core decides, and the presser is told privately."""
        h = harness
        await self._thread(h)
        request = PermissionRequest(
            id="c8Qb",
            title="claude-code wants to run Bash",
            description="rm -rf build/",
            options=(PermissionOption(id="o1", label="Allow", is_allow=True),),
        )
        card = await self._card(h, request)
        stranger = ChannelUser(id=str(MALLORY["id"]), name="Mallory")
        await h.probe.press(card, card.buttons[0], stranger)
        await self._wait_for_press(h, 1)
        assert h.core.presses[-1].user.id == str(MALLORY["id"])
        fake: FakeDiscord = h.probe.fake  # type: ignore[attr-defined]
        (note,) = await fake.wait_until(lambda: fake.ephemeral(MALLORY), what="the refusal")
        assert note.content == Resolution(status=ResolutionStatus.NOT_ALLOWED).message

    async def test_words_answer_a_card_by_its_id(self, harness: Harness) -> None:
        """A reply to the card, or words in the thread while it is the one open question,
        go to the core as a text answer to that card: never as an option, never as chat."""
        h = harness
        thread = await self._thread(h)
        request = PermissionRequest(id="cTxt", title="Which branch?", accepts_text=True)
        card = await self._card(h, request)
        await h.probe.reply(thread, "release/2.1", h.approver, reply_to=card)
        await h.probe.reply(thread, "main, please", h.approver)
        assert [(p.card_id, p.answer, p.via) for p in h.core.presses] == [
            ("cTxt", "release/2.1", "text"),
            ("cTxt", "main, please", "text"),
        ]
        assert h.core.incoming == []
