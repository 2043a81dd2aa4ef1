"""The `channels.<name>` block of an ntfy channel.

The descriptions are the user interface: `aep-bridge check` shows a field's description as
the fix when a required key is missing.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from aep_bridge import ChannelConfig

#: ntfy's own rule for topic names (server/server.go, `topicRegex`).
TOPIC_PATTERN: Final = re.compile(r"[-_A-Za-z0-9]{1,64}")


def _base_url(value: str, key: str) -> str:
    """An http(s) URL without a trailing slash, query or fragment: paths are appended to it."""
    value = value.strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{key} must be an http:// or https:// URL, such as https://ntfy.sh")
    if parts.query or parts.fragment:
        raise ValueError(f"{key} must not have a query (?...) or fragment (#...)")
    if parts.username or parts.password:
        raise ValueError(f"{key} must not carry credentials; ntfy uses `token` for that")
    return value


class NtfyConfig(ChannelConfig):
    """Where to publish, who reads it, and how the phone reaches the bridge for buttons."""

    server: str = Field(
        default="https://ntfy.sh",
        description="the ntfy server to publish to: https://ntfy.sh or your own server's URL",
    )
    topic: str = Field(
        description=(
            "the ntfy topic to publish to, 1 to 64 letters, digits, '-' or '_'. It acts as a "
            "password: anyone who knows it reads every notification and can press its "
            "buttons, so pick a long random name, or reserve it on the server and set `token`"
        ),
    )
    token: SecretStr | None = Field(
        default=None,
        description=(
            "an ntfy access token (tk_...) allowed to publish to the topic, sent as a Bearer "
            "header; write ${NTFY_TOKEN} to keep it out of the file"
        ),
    )
    public_url: str = Field(
        default="http://127.0.0.1:8787",
        max_length=200,
        description=(
            "the bridge's address as the phone reaches it (https://bridge.example.com); action "
            "buttons POST to {public_url}/channels/{name}/press"
        ),
    )
    identity: str = Field(
        default="ntfy",
        min_length=1,
        description=(
            "the user id every press from this topic is reported as (ntfy does not say who "
            "tapped); list it in `approvers` to let the topic's subscribers answer"
        ),
    )
    priority: int = Field(
        default=3, ge=1, le=5, description="ntfy priority (1-5) of finished answers and outcomes"
    )
    quiet_priority: int = Field(
        default=2,
        ge=1,
        le=5,
        description="ntfy priority (1-5) of ordinary agent messages; 2 means no sound",
    )
    urgent_priority: int = Field(
        default=4,
        ge=1,
        le=5,
        description="ntfy priority (1-5) of permission requests, errors and input requests",
    )

    @field_validator("topic")
    @classmethod
    def _check_topic(cls, value: str) -> str:
        if not TOPIC_PATTERN.fullmatch(value):
            raise ValueError("must be 1 to 64 letters, digits, '-' or '_' (ntfy's topic rule)")
        return value

    @field_validator("server")
    @classmethod
    def _check_server(cls, value: str) -> str:
        return _base_url(value, "server")

    @field_validator("public_url")
    @classmethod
    def _check_public_url(cls, value: str) -> str:
        return _base_url(value, "public_url")
