"""The channel contract's conformance kit, against the real python-telegram-bot and the fake
Bot API over loopback (no rate limits here: the kit calls the adapter directly, without the
core's outbox that keeps them; the end-to-end tests keep the real limits)."""

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

from .fake_bot_api import ALICE, BOB, FORUM_ID, FakeBotApi, Limits
from .probe import TelegramProbe, make_adapter

APPROVER = ChannelUser(id=str(ALICE["id"]), name="Alice")


class TestTelegramConformance(ChannelConformance):
    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        async with FakeBotApi(limits=Limits.no_rate_limits()) as fake:
            core = FakeCore()
            adapter = make_adapter(fake, core)
            core.attach(adapter)
            await adapter.start()
            # the Notifications topic is made as soon as the (here: fake) core runs calls
            await fake.wait_until(lambda: fake.topics(FORUM_ID), what="the Notifications topic")
            try:
                yield Harness(adapter, core, TelegramProbe(fake, core), approver=APPROVER)
            finally:
                await adapter.stop()
                assert fake.violations == []

    async def test_presses_by_anyone_go_to_the_core_which_decides(self, harness: Harness) -> None:
        """The kit's version presses as `stranger-99`; Telegram user ids are numbers, so the
        stranger here is Bob (222222222). What it guards is the same: the adapter does not
        filter presses, the core decides, and the presser is told what it decided."""
        h = harness
        await self._thread(h)
        h.core.next_resolution = Resolution(status=ResolutionStatus.NOT_ALLOWED)
        request = PermissionRequest(
            id="c8Qb",
            title="claude-code wants to run Bash",
            description="rm -rf build/",
            options=(PermissionOption(id="o1", label="Allow", is_allow=True),),
        )
        card = await self._card(h, request)
        stranger = ChannelUser(id=str(BOB["id"]), name="Bob")
        await h.probe.press(card, card.buttons[0], stranger)
        await self._wait_for_press(h, 1)
        assert h.core.presses[-1].user.id == str(BOB["id"])
        fake = h.probe.fake  # type: ignore[attr-defined]
        assert fake.answers[-1].text == Resolution(status=ResolutionStatus.NOT_ALLOWED).message
