"""The `channels.<name>` block of a Slack channel.

The descriptions are the user interface: `aep-bridge check` shows a field's description as the
fix when a required key is missing or wrong, and a validator's message names the fix when a
value is of the wrong kind (a `#name` where Slack wants an id, a user token for a bot token).
"""

from __future__ import annotations

import re
from typing import Final

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from aep_bridge import ChannelConfig, url_problem

#: Slack's Web API; slack-sdk joins `base_url + method`, so it keeps its trailing slash
SLACK_API: Final = "https://slack.com/api/"

BOT_TOKEN_FIX: Final = (
    "the Bot User OAuth Token (OAuth & Permissions > Bot User OAuth Token, xoxb-...); write "
    "${SLACK_BOT_TOKEN} to keep it out of the file"
)
APP_TOKEN_FIX: Final = (
    "an App-Level Token with the connections:write scope (Basic Information > App-Level "
    "Tokens, xapp-...); write ${SLACK_APP_TOKEN} to keep it out of the file"
)
_CHANNEL: Final = re.compile(r"^[CG][A-Z0-9]{2,}$")
_USER: Final = re.compile(r"^[UW][A-Z0-9]{2,}$")
_GROUP: Final = re.compile(r"^S[A-Z0-9]{2,}$")
#: what each list of ids takes, and what is said of an entry that is not one
_IDS: Final = {
    "approvers": (
        _USER,
        "is not a Slack user id: approvers lists member ids such as U0123456789 (a person's "
        "profile > ⋮ > Copy member ID), not names",
    ),
    "approver_roles": (
        _GROUP,
        "is not a Slack user group id: approver_roles lists user group ids such as "
        "S0123456789, not @handles",
    ),
}


class SlackConfig(ChannelConfig):
    """Which app (two tokens), which channel, and where heads-ups go."""

    bot_token: SecretStr = Field(description=BOT_TOKEN_FIX)
    app_token: SecretStr = Field(description=APP_TOKEN_FIX)
    channel_id: str = Field(
        description=(
            "the id of the channel sessions go to, such as C0123456789 (open the channel's "
            "details: the Channel ID is at the bottom); invite the bot there with /invite @app"
        ),
    )
    notifications_channel_id: str | None = Field(
        default=None,
        description=(
            "the id of a channel for heads-ups (done, failed, waiting for you), each linking "
            "to its card; leave unset for no heads-ups"
        ),
    )
    approver_roles: list[str] = Field(
        default_factory=list,
        description=(
            'Slack user group ids whose members may answer, such as ["S0123456789"] (the '
            "group's page in People > User groups; its id is in the page's URL)"
        ),
    )
    api_base_url: str = Field(
        default=SLACK_API,
        description=(
            "Slack's Web API, such as https://slack.com/api/ (change it for GovSlack, a proxy "
            "or a test fake)"
        ),
    )

    @field_validator("bot_token")
    @classmethod
    def _bot_token(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip().startswith("xoxb-"):
            raise ValueError(f"bot_token must be a bot token (xoxb-...): use {BOT_TOKEN_FIX}")
        return SecretStr(value.get_secret_value().strip())

    @field_validator("app_token")
    @classmethod
    def _app_token(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip().startswith("xapp-"):
            raise ValueError(
                f"app_token must be an app-level token (xapp-...): use {APP_TOKEN_FIX}"
            )
        return SecretStr(value.get_secret_value().strip())

    @field_validator("channel_id", "notifications_channel_id", mode="before")
    @classmethod
    def _channel(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError("must be a Slack channel id, such as C0123456789")
        text = value.strip()
        if text.startswith("#"):
            raise ValueError(
                f"{text!r} is a channel's name: Slack wants its id, such as C0123456789 (open "
                "the channel's details: the Channel ID is at the bottom)"
            )
        if not _CHANNEL.match(text):
            raise ValueError(
                f"{text!r} is not a Slack channel id: ids look like C0123456789 (or G... for "
                "an old private channel); open the channel's details: the Channel ID is at "
                "the bottom"
            )
        return text

    @field_validator("approvers", "approver_roles")
    @classmethod
    def _ids(cls, value: list[str], info: ValidationInfo) -> list[str]:
        """Member ids (`approvers`) and user group ids (`approver_roles`), trimmed."""
        pattern, wrong = _IDS[str(info.field_name)]
        ids = [str(one).strip() for one in value]
        for one in ids:
            if not pattern.match(one):
                raise ValueError(f"{one!r} {wrong}")
        return ids

    @field_validator("api_base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if problem := url_problem(value, example=SLACK_API):
            raise ValueError(f"api_base_url {problem}")
        return value.strip().rstrip("/") + "/"
