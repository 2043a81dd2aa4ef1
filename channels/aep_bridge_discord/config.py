"""The `channels.<name>` block of a Discord channel.

The descriptions are the user interface: `aep-bridge check` shows a field's description as the
fix when a required key is missing or wrong.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from aep_bridge import ChannelConfig

#: Discord's REST API (discord.py's `Route.BASE`) and gateway
DISCORD_API: Final = "https://discord.com/api/v10"
DISCORD_GATEWAY: Final = "wss://gateway.discord.gg/"


class DiscordConfig(ChannelConfig):
    """Which bot, which guild and channel, and how sessions end."""

    token: SecretStr = Field(
        description=(
            "the bot's token from the Developer Portal (Bot > Reset Token); write "
            "${DISCORD_BOT_TOKEN} to keep it out of the file"
        ),
    )
    guild_id: str = Field(
        description=(
            "the server's id (turn on Developer Mode in Discord's settings, then right-click "
            "the server > Copy Server ID)"
        ),
    )
    channel_id: str = Field(
        description=(
            "the channel sessions go to: a text channel (a public thread per session) or a "
            "forum channel (a post per session); right-click it > Copy Channel ID"
        ),
    )
    notifications_channel_id: str | None = Field(
        default=None,
        description=(
            "a text channel for heads-ups (done, failed, waiting for you), each linking to "
            "its session's thread; leave unset for no heads-ups"
        ),
    )
    approver_roles: list[str] = Field(
        default_factory=list,
        description=(
            'role ids whose members may answer, such as ["123456789012345678"] (right-click '
            "the role in Server Settings > Roles > Copy Role ID)"
        ),
    )
    lock_on_end: bool = Field(
        default=False,
        description="lock a session's thread when it is archived at the session's end",
    )
    api_base_url: str = Field(
        default=DISCORD_API,
        description=(
            "Discord's REST API, such as https://discord.com/api/v10 (change it only for a "
            "proxy or a test fake)"
        ),
    )
    gateway_url: str = Field(
        default=DISCORD_GATEWAY,
        description=(
            "Discord's gateway, such as wss://gateway.discord.gg/ (change it only for a "
            "proxy or a test fake)"
        ),
    )

    @field_validator("guild_id", "channel_id", "notifications_channel_id", mode="before")
    @classmethod
    def _snowflake(cls, value: object) -> object:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError("must be a Discord id: a number such as 123456789012345678")
        text = str(value).strip()
        if not text.isascii() or not text.isdigit() or int(text) == 0:
            raise ValueError(
                f"{text!r} is not a Discord id: ids are numbers such as 123456789012345678 "
                "(turn on Developer Mode, then right-click > Copy ID)"
            )
        return text

    @field_validator("approver_roles", mode="before")
    @classmethod
    def _roles(cls, value: object) -> object:
        if not isinstance(value, list):
            return value
        roles = []
        for role in value:
            text = str(role).strip()
            if isinstance(role, bool) or not text.isascii() or not text.isdigit():
                raise ValueError(
                    f"{role!r} is not a role id: approver_roles lists role ids (numbers such "
                    "as 123456789012345678), not role names"
                )
            roles.append(text)
        return roles

    @field_validator("api_base_url", "gateway_url")
    @classmethod
    def _url(cls, value: str, info: object) -> str:
        field = getattr(info, "field_name", "url")
        schemes = ("http", "https") if field == "api_base_url" else ("ws", "wss")
        example = DISCORD_API if field == "api_base_url" else DISCORD_GATEWAY
        try:
            parts = urlsplit(value.strip())
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in schemes or not parts.hostname:
            raise ValueError(
                f"{field} must be a {' or '.join(s + '://' for s in schemes)} URL with a "
                f"host, such as {example}"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"{field} must not have a query (?...) or a fragment (#...)")
        return value.strip().rstrip("/") if field == "api_base_url" else value.strip()
