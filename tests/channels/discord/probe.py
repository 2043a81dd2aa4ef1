"""The conformance kit's eyes and hands on the fake Discord, and a Discord adapter factory."""

from __future__ import annotations

import hashlib
from typing import Any

from aep_bridge import ChannelUser
from aep_bridge.testing import ButtonView, FakeCore, MessageView, ThreadView
from aep_bridge_discord import DiscordChannel, DiscordConfig

from .fake_discord import (
    ALICE,
    BOB,
    DEFAULT_TOKEN,
    GUILD_ID,
    MALLORY,
    NOTIFY_CHANNEL_ID,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    FakeMessage,
    _user,
)
from .test_discord_markdown import render, visible

KNOWN = {u["id"]: u for u in (ALICE, BOB, MALLORY)}


def channel_block(fake: FakeDiscord, **config: Any) -> dict[str, Any]:
    """The `channels.discord` block for the fake (its endpoints, its guild and channels)."""
    return {
        "token": DEFAULT_TOKEN,
        "guild_id": str(GUILD_ID),
        "channel_id": str(TEXT_CHANNEL_ID),
        "notifications_channel_id": str(NOTIFY_CHANNEL_ID),
        "api_base_url": fake.api_base_url,
        "gateway_url": fake.gateway_url,
        **config,
    }


def make_adapter(fake: FakeDiscord, core: Any, **config: Any) -> DiscordChannel:
    block = DiscordConfig.model_validate({"name": "discord", **channel_block(fake, **config)})
    return DiscordChannel(core, block)


def discord_user(fake: FakeDiscord, user: ChannelUser) -> dict[str, Any]:
    """A Discord user for a kit user (kit ids are words; Discord's are numbers), a member of
    the guild without roles unless it is one of the fake's people."""
    if user.id in KNOWN:
        return KNOWN[user.id]
    number = (
        int(user.id)
        if user.id.isdigit()
        else 10**18 + int(hashlib.sha256(user.id.encode()).hexdigest()[:12], 16)
    )
    found = _user(number, user.id, user.name)
    if number not in fake.members:
        fake.add_member(found)
    return found


def shown(message: FakeMessage) -> str:
    """What a person reads in a message: its markdown as Discord draws it, then each embed's
    title, description and footer (Discord draws them under the content)."""
    parts = [message.content]
    for embed in message.embeds:
        parts += [
            embed.get("title"),
            embed.get("description"),
            (embed.get("footer") or {}).get("text"),
        ]
    return "\n".join(visible(render(part)) for part in parts if part)


class DiscordProbe:
    """`PlatformProbe` over the fake: what the guild shows, and presses and replies in it."""

    def __init__(self, fake: FakeDiscord, core: FakeCore, parent: int = TEXT_CHANNEL_ID) -> None:
        self.fake = fake
        self.core = core
        self.parent = parent

    async def threads(self) -> list[ThreadView]:
        return [ThreadView(str(t.id), t.name, t.archived) for t in self.fake.threads(self.parent)]

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        places = (
            [int(thread_id)]
            if thread_id is not None
            else [
                *(t.id for t in self.fake.threads(self.parent)),
                self.parent,
                NOTIFY_CHANNEL_ID,
            ]
        )
        found = [m for place in places for m in self.fake.messages(place, from_bot=True)]
        return [self._view(m) for m in sorted(found, key=lambda m: m.id)]

    @staticmethod
    def _view(message: FakeMessage) -> MessageView:
        buttons = tuple(
            ButtonView(b.get("label", ""), b.get("custom_id", "").encode()) for b in message.buttons
        )
        return MessageView(str(message.id), str(message.channel_id), shown(message), buttons)

    async def direct_messages(self, user_id: str) -> list[MessageView]:
        """The bot's DMs to `user_id`: as drawn, then the raw content (its link to the card)."""
        return [
            MessageView(str(m.id), None, f"{shown(m)}\n{m.content}")
            for m in self.fake.dms({"id": user_id})
        ]

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        pressed = self.fake.press(
            int(message.id), button.data.decode(), discord_user(self.fake, user)
        )
        await self.fake.wait_until(lambda: pressed.acknowledged, what="the press answered")

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        before = self.core.heard
        self.fake.say(
            int(thread_id) if thread_id else self.parent,
            text,
            discord_user(self.fake, user),
            reply_to=int(reply_to.id) if reply_to else None,
        )
        await self.core.hears_more_than(before)
