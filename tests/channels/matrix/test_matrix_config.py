"""The Matrix block: each wrong value refused with the key and its fix; the token a secret."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from aep_bridge.testing import FakeCore
from aep_bridge_matrix import MatrixChannel, MatrixConfig

GOOD = {
    "name": "matrix",
    "homeserver": "https://matrix.example.org/",
    "user_id": "@aep-bridge:example.org",
    "access_token": "syt_secret_token",
    "room_id": "!AbCdEf:example.org",
    "approvers": ["@ada:example.org"],
}


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("homeserver", "matrix.example.org", "http:// or https:// URL"),
        ("user_id", "aep-bridge", "write the bot's full id"),
        ("room_id", "#agents:example.org", "is a room's alias: write its id"),
        ("room_id", "agents", "is not a Matrix room id"),
        ("approvers", ["Ada Lovelace"], "not display names"),
        ("access_token", "two words", "one access token"),
        ("rate_per_second", 0, "rate_per_second"),
    ],
)
def test_a_wrong_value_is_refused_naming_the_key_and_the_fix(key, value, says):
    with pytest.raises(ValidationError) as refused:
        MatrixConfig.model_validate({**GOOD, key: value})
    error = refused.value.errors()[0]
    assert error["loc"][0] == key
    assert says in str(refused.value)
    assert "syt_secret_token" not in str(refused.value)


def test_a_good_block_paces_the_outbox_to_the_homeserver_s_rate():
    config = MatrixConfig.model_validate({**GOOD, "rate_per_second": 1.0, "rate_burst": 4})
    assert config.homeserver == "https://matrix.example.org"
    assert "syt_secret_token" not in repr(config)
    limits = MatrixChannel(FakeCore(), config).capabilities.rate_limits.global_
    assert (limits.count, limits.burst) == (1, 4)
    assert limits.per_seconds == pytest.approx(1.05)  # a little slower than the server
    default = MatrixChannel(FakeCore(), MatrixConfig.model_validate(GOOD))
    assert default.capabilities.rate_limits.global_.burst == 10  # Synapse's
