"""The channel contract's conformance kit, against the real python-telegram-bot and the fake
Bot API over loopback (no rate limits here: the kit calls the adapter directly, without the
core's outbox that keeps them; the end-to-end tests keep the real limits)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from aep_bridge import (
    ChannelUser,
    FormChoice,
    FormField,
    PermissionOption,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.testing import ButtonView, ChannelConformance, FakeCore, Harness
from aep_bridge_telegram import TelegramChannel

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

            async def restart() -> TelegramChannel:
                """A bridge restart: the old adapter stops polling before the new one starts,
                as one bot token allows one poller."""
                await adapter.stop()
                again = make_adapter(fake, core)
                core.attach(again)
                polls = len(fake.calls_to("getUpdates"))
                await again.start()
                # polling, as after a real start (stopped before its first poll went out,
                # python-telegram-bot logs an error about the poll it cut short)
                await fake.wait_until(
                    lambda: len(fake.calls_to("getUpdates")) > polls, what="the new poll"
                )
                return again

            try:
                yield Harness(
                    adapter, core, TelegramProbe(fake, core), approver=APPROVER, restart=restart
                )
            finally:
                await adapter.stop()
                assert fake.violations == []
                assert fake.conflicts == []  # never two pollers, a restart included

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

    async def test_a_long_card_id_is_pressed_by_its_digest(self, harness: Harness) -> None:
        """A plugin's card id may not fit Telegram's 64 bytes of button data: the button
        carries a digest, and the core still gets the card id and the option's index."""
        h = harness
        await self._thread(h)
        long_id = "a-plugin-card-" + "x" * 60
        request = PermissionRequest(
            id=long_id,
            title="claude-code wants to run Bash",
            options=(
                PermissionOption(id="o1", label="Allow"),
                PermissionOption(id="o2", label="Deny"),
            ),
        )
        card = await self._card(h, request)
        assert all(b.data.startswith(b"#") and len(b.data) <= 64 for b in card.buttons)
        await h.probe.press(card, card.buttons[1], h.approver)
        await self._wait_for_press(h, 1)
        press = h.core.presses[-1]
        assert (press.card_id, press.answer, press.via) == (long_id, 1, "button")

    async def test_words_answer_a_card_by_its_id(self, harness: Harness) -> None:
        """A reply to the card, or words in the topic while it is the one open question, go
        to the core as a text answer to that card: never as an option, never as chat."""
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

    async def test_a_form_is_filled_on_the_card_and_sent_by_its_id(self, harness: Harness) -> None:
        """One field at a time on the card (choices and yes/no as buttons, text as a reply);
        the finished form goes to the core as the card's field ids and choice ids."""
        h = harness
        thread = await self._thread(h)
        request = PermissionRequest(
            id="cFrm",
            kind="form",
            title="Deploy settings",
            fields=(
                FormField(
                    id="f1",
                    type="select",
                    label="Environment",
                    required=True,
                    choices=(
                        FormChoice(id="c1", label="Staging"),
                        FormChoice(id="c2", label="Production"),
                    ),
                ),
                FormField(id="f2", type="boolean", label="Tell the team?"),
                FormField(id="f3", type="string", label="Release note", required=True),
            ),
        )
        card = await self._card(h, request)
        fake = h.probe.fake  # type: ignore[attr-defined]

        def shown() -> Any:
            return fake.message(FORUM_ID, int(card.id))

        async def press(label: str) -> None:
            data = next(b["callback_data"] for b in shown().buttons if b["text"] == label)
            await h.probe.press(card, ButtonView(label, data.encode()), h.approver)

        await press("Fill in ✏️")
        await fake.wait_until(lambda: "Production" in str(shown().buttons), what="field 1")
        await press("Production")
        await fake.wait_until(lambda: "Yes" in str(shown().buttons), what="field 2")
        await press("Yes")
        await fake.wait_until(lambda: "Release note" in shown().text, what="field 3")
        assert h.core.presses == []  # nothing is sent before the form is complete
        await h.probe.reply(thread, "ships the new login", h.approver, reply_to=card)
        press_ = h.core.presses[-1]
        assert (press_.card_id, press_.answer, press_.via) == (
            "cFrm",
            {"f1": "c2", "f2": True, "f3": "ships the new login"},
            "form",
        )
