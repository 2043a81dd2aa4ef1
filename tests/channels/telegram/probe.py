"""The conformance kit's eyes and hands on the fake Bot API, and a Telegram adapter factory."""

from __future__ import annotations

import asyncio
from typing import Any

from aep_bridge import ChannelUser
from aep_bridge.testing import ButtonView, FakeCore, MessageView, ThreadView
from aep_bridge_telegram import TelegramChannel, TelegramConfig

from .fake_bot_api import FORUM_ID, FakeBotApi, FakeMessage


def telegram_user(user: ChannelUser) -> dict[str, Any]:
    """A Telegram `User` for a kit user (kit ids are words; Telegram's are numbers)."""
    number = int(user.id) if user.id.isdigit() else abs(hash(user.id)) % 10**9 + 10**9
    return {"id": number, "is_bot": False, "first_name": user.name or user.id}


def make_adapter(
    fake: FakeBotApi, core: Any, *, chat_id: int = FORUM_ID, **config: Any
) -> TelegramChannel:
    block = TelegramConfig.model_validate(
        fake.channel_block(name="telegram", chat_id=chat_id, poll_timeout=1, **config)
    )
    return TelegramChannel(core, block)


class TelegramProbe:
    """`PlatformProbe` over the fake: what the chat shows, and presses and replies in it."""

    def __init__(self, fake: FakeBotApi, core: FakeCore, chat_id: int = FORUM_ID) -> None:
        self.fake = fake
        self.core = core
        self.chat_id = chat_id

    async def threads(self) -> list[ThreadView]:
        return [
            ThreadView(str(t.message_thread_id), t.name, t.closed)
            for t in self.fake.topics(self.chat_id)
        ]

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        found = self.fake.messages(self.chat_id, from_bot=True)
        if thread_id is not None:
            found = [m for m in found if str(m.message_thread_id) == thread_id]
        return [self._view(m) for m in found]

    @staticmethod
    def _view(message: FakeMessage) -> MessageView:
        buttons = tuple(
            ButtonView(b["text"], b.get("callback_data", "").encode()) for b in message.buttons
        )
        thread = None if message.message_thread_id is None else str(message.message_thread_id)
        return MessageView(str(message.message_id), thread, message.text, buttons)

    async def direct_messages(self, user_id: str) -> list[MessageView]:
        """The bot's messages in `user_id`'s private chat with it, their links in the text."""
        found = [m for m in self.fake.messages(int(user_id), from_bot=True) if m.text]
        return [
            MessageView(
                str(m.message_id),
                None,
                "\n".join([m.text, *(e["url"] for e in m.entities if e["type"] == "text_link")]),
            )
            for m in found
        ]

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        query = self.fake.press(
            self.chat_id, int(message.id), button.data.decode(), telegram_user(user)
        )
        await self._answered(query)

    async def _answered(self, query: str) -> None:
        async with asyncio.timeout(10):
            while not any(a.query_id == query for a in self.fake.answers):
                await asyncio.sleep(0.01)

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        before = self.core.heard
        self.fake.say(
            self.chat_id,
            text,
            telegram_user(user),
            message_thread_id=int(thread_id) if thread_id else None,
            reply_to_message_id=int(reply_to.id) if reply_to else None,
        )
        await self.core.hears_more_than(before)
