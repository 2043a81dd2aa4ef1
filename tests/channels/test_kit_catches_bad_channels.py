"""The conformance kit fails channels that break the contract: it is a test that can fail.

Each channel here is the memory channel with one realistic mistake; the kit test that guards
against that mistake must fail on it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from aep_bridge import CallKind
from aep_bridge.contract.types import (
    ChannelConfig,
    ChannelUser,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.markup import Heading, Paragraph, spans_text
from aep_bridge.testing import (
    ChannelConformance,
    FakeCore,
    Harness,
    MemoryChannel,
    MemoryProbe,
)
from aep_bridge.testing.memory import _Stored


class NoSplit(MemoryChannel):
    """Sends long text whole, over the limit it declares."""

    def _post(self, thread, text, buttons=None):
        self.messages.append(_Stored(f"m{len(self.messages)}", thread, text, list(buttons or [])))
        return self.messages[-1].id


class OptionIdsInButtons(MemoryChannel):
    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        await super().send_permission_request(session_id, request)
        card = self.messages[-1]
        card.buttons = [
            (label, f"{request.id}:{o.id}")
            for (label, _), o in zip(card.buttons, request.options, strict=True)
        ]


class Gatekeeper(MemoryChannel):
    """Decides for itself who may answer: strangers' presses never reach the core."""

    async def press(self, data: str, user: ChannelUser) -> Resolution:
        if user.id not in self.config.approvers:
            return Resolution(status=ResolutionStatus.NOT_ALLOWED)
        return await super().press(data, user)


class StickyButtons(MemoryChannel):
    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        _, _, message_id = self.cards[request.id]
        for stored in self.messages:
            if stored.id == message_id:
                stored.text += "\n" + outcome.summary()  # shown, but the buttons stay


class RemembersCards(MemoryChannel):
    """Answers a press from a card map of its own (contract 1.1 style): a restart loses it."""

    async def press(self, data: str, user: ChannelUser) -> Resolution:
        card, _, index = data.rpartition(":")
        if card not in self.cards:
            return Resolution(status=ResolutionStatus.UNKNOWN)
        return await self.core.resolve_permission(card, int(index), user)


class ForgetsCards(MemoryChannel):
    """Keeps which message is which card in memory only: after a restart it cannot edit."""

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        if request.id in self.cards:
            await super().update_permission_request(session_id, request, outcome)


class EatsMarkup(MemoryChannel):
    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        cleaned = re.sub(r"<[^>]+>", "", content.text)
        await super().send_message(session_id, content.model_copy(update={"text": cleaned}))


class ShowsMarkdown(MemoryChannel):
    """Writes a message's blocks back as markdown source: a platform without markdown shows
    the markers raw."""

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        lines = []
        for block in content.blocks:
            if isinstance(block, Heading):
                lines.append("## " + spans_text(block.spans))
            elif isinstance(block, Paragraph):
                lines.append("".join(f"**{s.text}**" if s.bold else s.text for s in block.spans))
        text = "\n\n".join(lines) or content.text
        await super().send_message(session_id, content.model_copy(update={"text": text}))


class DropsFolds(MemoryChannel):
    """Shows a message's paragraphs and drops what is folded (a failure's last lines, a
    diff), as a dialect that knows no collapsible block might."""

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        kept = tuple(b for b in content.blocks if isinstance(b, Paragraph))
        text = "\n\n".join(spans_text(b.spans) for b in kept) or content.text
        await super().send_message(session_id, content.model_copy(update={"text": text}))


class TitleOnlyCards(MemoryChannel):
    """Shows a card's title and buttons, not what is asked (its details or description)."""

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        bare = request.model_copy(update={"details": (), "description": ""})
        await super().send_permission_request(session_id, bare)


class TwoThreads(MemoryChannel):
    async def create_session_thread(self, session_id: str, name: str) -> str:
        await super().create_session_thread(session_id, name)
        return await super().create_session_thread(session_id, name)


class NoHeadsUps(MemoryChannel):
    """Configured without a place for heads-ups (as Slack without a notifications channel):
    it declines them, and the core never queues one."""

    capabilities = MemoryChannel.capabilities.model_copy(update={"heads_ups": False})


class SaysItPostsHeadsUps(NoHeadsUps):
    """Has no heads-ups, but says every call is a post: the core queues heads-ups it drops,
    and charges each a slot of the platform's budget."""

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        return "post"


class DeclinesCards(NoHeadsUps):
    """Declines what it is unsure of, a question's card included: the card never shows."""

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        return None if op in ("send_notification", "send_permission_request") else "post"


CASES = [
    (NoSplit, "test_long_text_is_split_under_the_declared_limit"),
    (OptionIdsInButtons, "test_button_data_stays_under_the_declared_limit"),
    (Gatekeeper, "test_presses_by_anyone_go_to_the_core_which_decides"),
    (StickyButtons, "test_the_outcome_is_shown_and_the_buttons_go"),
    (EatsMarkup, "test_agent_text_is_shown_verbatim_not_as_markup"),
    (TwoThreads, "test_a_thread_is_created_once_and_renamed"),
    (ShowsMarkdown, "test_a_message_with_blocks_reads_without_markdown_markers"),
    (DropsFolds, "test_folded_output_and_a_diff_are_shown_not_lost"),
    (TitleOnlyCards, "test_a_card_shows_what_exactly_is_approved"),
    (RemembersCards, "test_a_press_is_resolved_by_card_id_alone"),
    (ForgetsCards, "test_a_card_from_before_a_restart_still_shows_its_outcome"),
]


def _harness(adapter: MemoryChannel, core: FakeCore) -> Harness:
    probe = MemoryProbe(adapter)

    async def restart() -> MemoryChannel:
        await probe.channel.stop()
        probe.channel = probe.channel.restarted()
        await probe.channel.start()
        return probe.channel

    return Harness(adapter, core, probe, ChannelUser(id="alice"), timeout=0.5, restart=restart)


@pytest.mark.parametrize(("channel", "test"), CASES, ids=[c[1] for c in CASES])
async def test_the_kit_fails_a_channel_with_this_mistake(channel: type[MemoryChannel], test: str):
    core = FakeCore()
    adapter = channel(core, ChannelConfig(name="memory", approvers=["alice"]))
    await adapter.start()
    harness = _harness(adapter, core)
    with pytest.raises((AssertionError, TimeoutError)):
        await getattr(ChannelConformance(), test)(harness)


@pytest.mark.parametrize(("channel", "test"), CASES, ids=[c[1] for c in CASES])
async def test_and_passes_the_correct_channel(channel: type[MemoryChannel], test: str):
    core = FakeCore()
    adapter = MemoryChannel(core, ChannelConfig(name="memory", approvers=["alice"]))
    await adapter.start()
    harness = _harness(adapter, core)
    await getattr(ChannelConformance(), test)(harness)


#: the mistakes about declined calls, checked against a channel that declines heads-ups
DECLINING = [
    (SaysItPostsHeadsUps, "test_every_call_says_what_it_costs"),
    (DeclinesCards, "test_a_call_the_channel_declines_is_never_queued_made_or_charged"),
]


@pytest.mark.parametrize(("channel", "test"), DECLINING, ids=[c[1] for c in DECLINING])
async def test_the_kit_fails_a_channel_that_declines_wrongly(
    channel: type[MemoryChannel], test: str
):
    core = FakeCore()
    adapter = channel(core, ChannelConfig(name="memory", approvers=["alice"]))
    await adapter.start()
    with pytest.raises((AssertionError, TimeoutError)):
        await getattr(ChannelConformance(), test)(_harness(adapter, core))


@pytest.mark.parametrize(("channel", "test"), DECLINING, ids=[c[1] for c in DECLINING])
async def test_and_passes_a_channel_that_declines_heads_ups(
    channel: type[MemoryChannel], test: str
):
    core = FakeCore()
    adapter = NoHeadsUps(core, ChannelConfig(name="memory", approvers=["alice"]))
    await adapter.start()
    await getattr(ChannelConformance(), test)(_harness(adapter, core))
