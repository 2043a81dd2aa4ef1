"""The `channels.<name>` block of a Telegram channel.

The descriptions are the user interface: `aep-bridge check` shows a field's description as the
fix when a required key is missing or wrong.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from aep_bridge import ChannelConfig


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
