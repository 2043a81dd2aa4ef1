"""`aep-bridge doctor` for a Telegram channel: the token, the chat, topics and the bot's
rights, each check with its fix. It uses a Bot of its own, so it runs whether the channel is
started or not."""

from __future__ import annotations

import contextlib
from typing import Any

from telegram import Bot
from telegram.error import Forbidden, InvalidToken, TelegramError

from aep_bridge import DoctorCheck, clean_error, doctor_fail, doctor_ok

from .config import TelegramConfig


async def diagnose(config: TelegramConfig) -> list[DoctorCheck]:
    """The token, the chat, topics and the bot's rights, each with its fix."""
    base = (config.api_base_url or "https://api.telegram.org/bot").rstrip("/")
    checks: list[DoctorCheck] = []
    token = config.token.get_secret_value()
    bot = Bot(token, base_url=base)
    try:
        try:
            await bot.initialize()  # getMe
            me = bot.bot
        except (InvalidToken, Forbidden):  # its message quotes the token: not shown
            checks.append(
                doctor_fail(
                    "token",
                    "Telegram refused the token",
                    "copy the token again from @BotFather (/mybots → API Token)",
                )
            )
            return checks
        except TelegramError as exc:
            checks.append(
                doctor_fail(
                    "token",
                    f"cannot reach {base}: {clean_error(exc, token)}",
                    "check the network, or api_base_url if you run your own Bot API",
                )
            )
            return checks
        checks.append(doctor_ok("token", f"the bot is @{me.username}"))
        try:
            chat = await bot.get_chat(config.chat_id)
        except TelegramError as exc:
            checks.append(
                doctor_fail(
                    "chat",
                    f"chat {config.chat_id}: {clean_error(exc, token)}",
                    "add the bot to the group, and set chat_id to the group's id "
                    "(it starts with -100; docs/channels/telegram.md shows how to find it)",
                )
            )
            return checks
        title = chat.title or chat.username or str(chat.id)
        checks.append(doctor_ok("chat", f"{title} ({chat.type})"))
        if not config.topics:
            checks.append(doctor_ok("topics", "off: sessions are reply chains"))
        elif chat.is_forum or private_topics(chat, me):
            checks.append(doctor_ok("topics", "the chat has topics"))
        else:
            checks.append(
                doctor_fail(
                    "topics",
                    "the chat has no topics: sessions would fall back to reply chains",
                    "in the group's settings turn on Topics (the group becomes a "
                    "supergroup with topics), or set topics: false",
                )
            )
        if chat.type in ("group", "supergroup"):
            member = await bot.get_chat_member(config.chat_id, me.id)
            admin = member.status in ("administrator", "creator")
            manage = bool(getattr(member, "can_manage_topics", False)) or (
                member.status == "creator"
            )
            if admin and (manage or not config.topics):
                checks.append(doctor_ok("rights", "admin"))
            else:
                checks.append(
                    doctor_fail(
                        "rights",
                        "the bot is not an admin" if not admin else "the bot may not manage topics",
                        "in the group: Administrators → Add admin → the bot, with "
                        "'Manage topics' on",
                    )
                )
    finally:
        with contextlib.suppress(Exception):  # it may never have started
            await bot.shutdown()
    return checks


def private_topics(chat: Any, me: Any) -> bool:
    """Whether a private chat with the bot has topics (Telegram's bots may turn them on)."""
    return bool(chat.type == "private" and getattr(me, "has_topics_enabled", False))
