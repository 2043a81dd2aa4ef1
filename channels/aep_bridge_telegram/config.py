"""The `channels.<name>` block of a Telegram channel.

The descriptions are the user interface: `aep-bridge check` shows a field's description as the
fix when a required key is missing or wrong.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from aep_bridge import ChannelConfig

#: user ids Telegram shows for many people at once: none of them can stand for one approver
SHARED_USER_IDS: Final = {
    "1087968824": "GroupAnonymousBot, the id every anonymous admin of a group presses as",
    "777000": "Telegram's service account, which posts what a linked channel forwards",
    "136817688": "Channel_Bot, the id of anyone writing as a channel",
}


def shared_id_reason(user_id: str) -> str | None:
    """Why `user_id` can never be an approver, if it is one of Telegram's shared ids."""
    return SHARED_USER_IDS.get(user_id.strip())


class TelegramConfig(ChannelConfig):
    """Which bot, which chat, and how sessions are laid out in it."""

    token: SecretStr = Field(
        description=(
            "the bot's token from @BotFather (123456:ABC...); write ${TELEGRAM_BOT_TOKEN} to "
            "keep it out of the file"
        ),
    )
    chat_id: int = Field(
        description=(
            "the chat the bot posts in: a forum supergroup's id (it starts with -100; see "
            "docs/channels/telegram.md for how to find it), or your own user id for a private "
            "chat"
        ),
    )
    topics: bool = Field(
        default=True,
        description=(
            "a forum topic per agent session (the chat must be a supergroup with topics, and "
            "the bot an admin allowed to manage topics); false: sessions are reply chains in "
            "the chat"
        ),
    )
    notifications_topic: str = Field(
        default="Notifications",
        min_length=1,
        max_length=128,
        description="the name of the topic that gets heads-ups (done, failed, waiting for you)",
    )
    api_base_url: str | None = Field(
        default=None,
        description=(
            "a self-hosted Bot API server's base URL, such as http://127.0.0.1:8081/bot "
            "(the token is appended to it; /bot is added if it is missing); leave unset for "
            "https://api.telegram.org/bot"
        ),
    )
    poll_timeout: int = Field(
        default=30, ge=1, le=50, description="seconds each getUpdates long poll may wait"
    )

    @field_validator("approvers")
    @classmethod
    def _one_person_each(cls, value: list[str]) -> list[str]:
        for user_id in value:
            why = shared_id_reason(str(user_id))
            if why is not None:
                raise ValueError(
                    f"{user_id} can never be an approver: it is {why}, so Telegram does not "
                    "say who pressed; list each person's own numeric user id (an admin who "
                    "wants to answer turns off Remain anonymous in the group's admin rights)"
                )
        return value

    @field_validator("api_base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "api_base_url must be an http:// or https:// URL with a host, such as "
                "http://127.0.0.1:8081/bot"
            )
        if parts.query or parts.fragment or value.rstrip().endswith(("?", "#")):
            raise ValueError(
                "api_base_url must not have a query (?...) or a fragment (#...): the bot's "
                "token and the method are appended to it, such as http://127.0.0.1:8081/bot"
            )
        # the token is appended right after it: without /bot, it would land in the host or
        # port (and in the error that says so); so /bot is added where it is missing
        path = parts.path.rstrip("/")
        if not path.endswith("/bot"):
            path += "/bot"
        return parts._replace(path=path).geturl()

    def instructions_by_default(self) -> bool:
        """A private chat (a positive chat id: a person's own) is the operator's; a group's
        or a supergroup's id is negative, and its members read what is typed there."""
        return self.chat_id > 0
