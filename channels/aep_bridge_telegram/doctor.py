"""`aep-bridge doctor` for a Telegram channel: the token, the chat, topics and the bot's
rights, each check with its fix. It uses a Bot of its own, so it runs whether the channel is
started or not."""

from __future__ import annotations

import contextlib
from typing import Any

from telegram import Bot
from telegram.error import Forbidden, InvalidToken, TelegramError

from aep_bridge import DoctorCheck

from .config import TelegramConfig


async def diagnose(config: TelegramConfig) -> list[DoctorCheck]:
    """The token, the chat, topics and the bot's rights, each with its fix."""
    base = (config.api_base_url or "https://api.telegram.org/bot").rstrip("/")
    checks: list[DoctorCheck] = []
    bot = Bot(config.token.get_secret_value(), base_url=base)
    try:
        try:
            await bot.initialize()  # getMe
            me = bot.bot
        except (InvalidToken, Forbidden):  # its message quotes the token: not shown
            checks.append(
                DoctorCheck(
                    name="token",
                    ok=False,
                    detail="Telegram refused the token",
                    fix="copy the token again from @BotFather (/mybots → API Token)",
                )
            )
            return checks
        except TelegramError as exc:
            checks.append(
                DoctorCheck(
                    name="token",
                    ok=False,
                    detail=f"cannot reach {base}: {exc}",
                    fix="check the network, or api_base_url if you run your own Bot API",
                )
            )
            return checks
        checks.append(DoctorCheck(name="token", ok=True, detail=f"the bot is @{me.username}"))
        try:
            chat = await bot.get_chat(config.chat_id)
        except TelegramError as exc:
            checks.append(
                DoctorCheck(
                    name="chat",
                    ok=False,
                    detail=f"chat {config.chat_id}: {exc}",
                    fix=(
                        "add the bot to the group, and set chat_id to the group's id "
                        "(it starts with -100; docs/channels/telegram.md shows how to find it)"
                    ),
                )
            )
            return checks
        title = chat.title or chat.username or str(chat.id)
        checks.append(DoctorCheck(name="chat", ok=True, detail=f"{title} ({chat.type})"))
        if not config.topics:
            checks.append(
                DoctorCheck(name="topics", ok=True, detail="off: sessions are reply chains")
            )
        elif chat.is_forum or private_topics(chat, me):
            checks.append(DoctorCheck(name="topics", ok=True, detail="the chat has topics"))
        else:
            checks.append(
                DoctorCheck(
                    name="topics",
                    ok=False,
                    detail="the chat has no topics: sessions would fall back to reply chains",
                    fix=(
                        "in the group's settings turn on Topics (the group becomes a "
                        "supergroup with topics), or set topics: false"
                    ),
                )
            )
        if chat.type in ("group", "supergroup"):
            member = await bot.get_chat_member(config.chat_id, me.id)
            admin = member.status in ("administrator", "creator")
            manage = bool(getattr(member, "can_manage_topics", False)) or (
                member.status == "creator"
            )
            if admin and (manage or not config.topics):
                checks.append(DoctorCheck(name="rights", ok=True, detail="admin"))
            else:
                checks.append(
                    DoctorCheck(
                        name="rights",
                        ok=False,
                        detail=(
                            "the bot is not an admin"
                            if not admin
                            else "the bot may not manage topics"
                        ),
                        fix=(
                            "in the group: Administrators → Add admin → the bot, with "
                            "'Manage topics' on"
                        ),
                    )
                )
    finally:
        with contextlib.suppress(Exception):  # it may never have started
            await bot.shutdown()
    return checks


def private_topics(chat: Any, me: Any) -> bool:
    """Whether a private chat with the bot has topics (Telegram's bots may turn them on)."""
    return bool(chat.type == "private" and getattr(me, "has_topics_enabled", False))
