"""The `channels.<name>` block of a Matrix channel: each description and validator message is
the fix `aep-bridge check` shows."""

from __future__ import annotations

import re
from typing import Final

from pydantic import Field, SecretStr, field_validator

from aep_bridge import ChannelConfig, url_problem

ACCESS_TOKEN_FIX: Final = (
    "the bot account's access token (Element: Settings > Help & About > Access Token, or "
    "`aep-bridge setup matrix`, which logs in once and keeps only the token); write "
    "${MATRIX_ACCESS_TOKEN} to keep it out of the file"
)
#: a Matrix user id, `@localpart:server` (the server part may carry a port)
USER_ID: Final = re.compile(r"^@[a-z0-9._=/+\-]+:[A-Za-z0-9.\-]+(:\d+)?$")
#: a room id, `!opaque:server`
_ROOM_ID: Final = "!AbCdEf:example.org"
ROOM_ID_HOW: Final = "Element: Room settings > Advanced > Internal room ID"
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
            f"the id of the room sessions go to, such as {_ROOM_ID} ({ROOM_ID_HOW}); invite "
            "the bot there first. The room must not be encrypted"
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
        if problem := url_problem(value, example="https://matrix.example.org"):
            raise ValueError(f"homeserver {problem}")
        return value.strip().rstrip("/")

    @field_validator("user_id")
    @classmethod
    def _user_id(cls, value: str) -> str:
        return _user(value, "write the bot's full id, such as @aep-bridge:example.org")

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
        how = f"({ROOM_ID_HOW})"
        if text.startswith("#"):
            raise ValueError(f"{text!r} is a room's alias: write its id, such as {_ROOM_ID} {how}")
        if not _ROOM.match(text):
            raise ValueError(f"{text!r} is not a Matrix room id: ids look like {_ROOM_ID} {how}")
        return text

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: list[str]) -> list[str]:
        why = "approvers lists full user ids such as @ada:example.org, not display names"
        return [_user(user, why) for user in value]


def _user(value: str, fix: str) -> str:
    text = str(value).strip()
    if not USER_ID.match(text):
        raise ValueError(f"{text!r} is not a Matrix user id: {fix}")
    return text
