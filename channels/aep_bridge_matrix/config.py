"""The `channels.<name>` block of a Matrix channel.

The descriptions are the user interface: `aep-bridge check` shows a field's description as the
fix when a required key is missing or wrong, and a validator's message names the fix when a
value is of the wrong kind (a room's alias where an id is wanted, a display name for a user id).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from aep_bridge import ChannelConfig

ACCESS_TOKEN_FIX: Final = (
    "the bot account's access token (Element: Settings > Help & About > Access Token, or "
    "`aep-bridge setup matrix`, which logs in once and keeps only the token); write "
    "${MATRIX_ACCESS_TOKEN} to keep it out of the file"
)
#: a Matrix user id, `@localpart:server` (the server part may carry a port)
_USER: Final = re.compile(r"^@[a-z0-9._=/+\-]+:[A-Za-z0-9.\-]+(:\d+)?$")
#: a room id, `!opaque:server`
_ROOM: Final = re.compile(r"^![A-Za-z0-9._~=+/\-]+:[A-Za-z0-9.\-]+(:\d+)?$")


class MatrixConfig(ChannelConfig):
    """Which homeserver, which bot account, which room."""

    homeserver: str = Field(
        description=(
            "the homeserver's client-server URL, such as https://matrix.example.org (the "
            "address your Matrix client signs in to)"
        ),
    )
    user_id: str = Field(
        description="the bot account's Matrix user id, such as @aep-bridge:example.org",
    )
    access_token: SecretStr = Field(description=ACCESS_TOKEN_FIX)
    room_id: str = Field(
        description=(
            "the id of the room sessions go to, such as !AbCdEf:example.org (Element: Room "
            "settings > Advanced > Internal room ID); invite the bot there first. The room "
            "must not be encrypted"
        ),
    )
    device_id: str | None = Field(
        default=None,
        description="the device id the access token belongs to (optional; shown by whoami)",
    )

    rate_per_second: float = Field(
        default=0.2,
        gt=0,
        description=(
            "the events a second the homeserver lets the bot send once its burst is spent "
            "(Synapse's rc_message.per_second, 0.2 by default): the bridge paces itself to it"
        ),
    )
    rate_burst: int = Field(
        default=10,
        ge=1,
        description="the events the bot may send at once (Synapse's rc_message.burst_count, 10)",
    )

    @field_validator("homeserver")
    @classmethod
    def _homeserver(cls, value: str) -> str:
        try:
            parts = urlsplit(value.strip())
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                "homeserver must be an http:// or https:// URL with a host, such as "
                "https://matrix.example.org"
            )
        if parts.query or parts.fragment:
            raise ValueError("homeserver must not have a query (?...) or a fragment (#...)")
        return value.strip().rstrip("/")

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str) -> str:
        text = value.strip()
        if not _USER.match(text):
            raise ValueError(
                f"{text!r} is not a Matrix user id: write the bot's full id, such as "
                "@aep-bridge:example.org"
            )
        return text

    @field_validator("access_token")
    @classmethod
    def _token(cls, value: SecretStr) -> SecretStr:
        token = value.get_secret_value().strip()
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"access_token must be one access token: use {ACCESS_TOKEN_FIX}")
        return SecretStr(token)

    @field_validator("room_id")
    @classmethod
    def _room(cls, value: str) -> str:
        text = value.strip()
        if text.startswith("#"):
            raise ValueError(
                f"{text!r} is a room's alias: write its id, such as !AbCdEf:example.org "
                "(Element: Room settings > Advanced > Internal room ID)"
            )
        if not _ROOM.match(text):
            raise ValueError(
                f"{text!r} is not a Matrix room id: ids look like !AbCdEf:example.org "
                "(Element: Room settings > Advanced > Internal room ID)"
            )
        return text

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: list[str]) -> list[str]:
        users = [str(user).strip() for user in value]
        for user in users:
            if not _USER.match(user):
                raise ValueError(
                    f"{user!r} is not a Matrix user id: approvers lists full user ids such as "
                    "@ada:example.org, not display names"
                )
        return users
