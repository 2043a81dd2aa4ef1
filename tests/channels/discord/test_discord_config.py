"""The `channels.discord` block: what a user writes, and what they are told when it is wrong
(each problem names its key and says the fix, as `aep-bridge check` shows it)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from aep_bridge.config.config_errors import explain
from aep_bridge_discord.config import DiscordConfig

GOOD = {"token": "${DISCORD_BOT_TOKEN}", "guild_id": "100", "channel_id": "201"}


def problems(block: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ValidationError) as caught:
        DiscordConfig.model_validate(block)
    return {
        key: f"{message} {fix or ''}"
        for key, message, fix in explain(caught.value, "channels.discord", DiscordConfig)
    }


def test_a_minimal_block_gets_discord_s_own_endpoints() -> None:
    config = DiscordConfig.model_validate({**GOOD, "guild_id": 100, "approver_roles": [301]})
    assert config.guild_id == "100"  # numbers as written in JSON are ids too
    assert config.approver_roles == ["301"]
    assert config.api_base_url == "https://discord.com/api/v10"
    assert config.gateway_url == "wss://gateway.discord.gg/"
    assert config.notifications_channel_id is None
    assert config.lock_on_end is False
    assert "DISCORD_BOT_TOKEN" not in repr(config)  # a secret, never printed


def test_missing_keys_say_where_to_find_them() -> None:
    found = problems({})
    assert set(found) == {
        "channels.discord.token",
        "channels.discord.guild_id",
        "channels.discord.channel_id",
    }
    assert "Developer Portal" in found["channels.discord.token"]
    assert "Copy Server ID" in found["channels.discord.guild_id"]
    assert "forum channel" in found["channels.discord.channel_id"]


def test_names_where_ids_belong_are_refused_with_the_fix() -> None:
    found = problems(
        {**GOOD, "guild_id": "Agents HQ", "channel_id": "0", "approver_roles": ["admins"]}
    )
    assert "is not a Discord id" in found["channels.discord.guild_id"]
    assert "Copy ID" in found["channels.discord.guild_id"]
    assert "is not a Discord id" in found["channels.discord.channel_id"]
    assert "not role names" in found["channels.discord.approver_roles"]
    assert (
        "must be a Discord id"
        in problems({**GOOD, "notifications_channel_id": True})[
            "channels.discord.notifications_channel_id"
        ]
    )


def test_endpoints_must_be_urls_of_their_kind() -> None:
    found = problems({**GOOD, "api_base_url": "discord.com/api", "gateway_url": "https://x"})
    assert "http:// or https://" in found["channels.discord.api_base_url"]
    assert "ws:// or wss://" in found["channels.discord.gateway_url"]
    assert (
        "fragment"
        in problems({**GOOD, "api_base_url": "http://h/api#x"})["channels.discord.api_base_url"]
    )
    fine = DiscordConfig.model_validate({**GOOD, "api_base_url": "http://127.0.0.1:9/api/v10/"})
    assert fine.api_base_url == "http://127.0.0.1:9/api/v10"
