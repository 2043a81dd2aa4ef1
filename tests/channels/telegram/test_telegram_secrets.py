"""The bot token never printed: an `api_base_url` without `/bot` (once the token landed in
the URL's port and in the `InvalidURL` error that quoted it), credentials in `api_base_url`,
and what `aep-bridge check` says of a bad one."""

from __future__ import annotations

import io
import json

import pytest
from pydantic import ValidationError

from aep_bridge import cli
from aep_bridge_telegram.config import TelegramConfig
from tests.bridge_process import BridgeProcess, free_port, write_config

from .fake_bot_api import DEFAULT_TOKEN, FakeBotApi
from .test_telegram_doctor import doctor

TOKEN_SECRET = DEFAULT_TOKEN.split(":", 1)[1]


async def test_doctor_with_an_api_base_url_without_bot_never_prints_the_token(tmp_path):
    async with FakeBotApi() as fake:
        bare = fake.base_url.removesuffix("/bot")
        code, out = await doctor(tmp_path, fake, api_base_url=bare)
    assert TOKEN_SECRET not in out
    assert code == 0, out  # /bot is added: the bot is reached
    assert "ok    token: the bot is @aep_test_bot" in out


async def test_doctor_never_prints_credentials_in_api_base_url(tmp_path):
    closed = free_port()  # nothing answers: doctor says it cannot reach the URL
    async with FakeBotApi() as fake:
        code, out = await doctor(
            tmp_path, fake, api_base_url=f"http://admin:pa55word-x@127.0.0.1:{closed}/bot"
        )
    assert code == 1
    assert f"cannot reach http://***@127.0.0.1:{closed}/bot" in out
    assert "pa55word-x" not in out
    assert TOKEN_SECRET not in out


async def test_run_with_an_api_base_url_without_bot_never_logs_the_token(tmp_path):
    async with FakeBotApi() as fake:
        port = free_port()
        block = fake.channel_block(api_base_url=fake.base_url.removesuffix("/bot"), poll_timeout=1)
        bridge = BridgeProcess(write_config(tmp_path, port, {"telegram": block}), tmp_path / "log")
        await bridge.start(f"http://127.0.0.1:{port}")
        try:
            await bridge.until(
                "the channel",
                lambda: "channel telegram " in bridge.log.read_text(),
                20,
            )
        finally:
            await bridge.aclose()
    text = bridge.log.read_text()
    assert TOKEN_SECRET not in text
    assert "channel telegram started (telegram)" in text, text


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("http://127.0.0.1:8081", "http://127.0.0.1:8081/bot"),
        ("http://127.0.0.1:8081/", "http://127.0.0.1:8081/bot"),
        ("https://tg.example/api/bot/", "https://tg.example/api/bot"),
        ("https://tg.example/api", "https://tg.example/api/bot"),
    ],
)
def test_api_base_url_gets_bot_where_it_is_missing(given, kept):
    config = TelegramConfig(name="t", type="telegram", token="1:a", chat_id=1, api_base_url=given)
    assert config.api_base_url == kept


@pytest.mark.parametrize(
    "given", ["ftp://tg.example/bot", "tg.example/bot", "http://h:port/bot", "http://h/bot?x=1"]
)
def test_a_bad_api_base_url_is_refused(given):
    with pytest.raises(ValidationError, match="api_base_url must"):
        TelegramConfig(name="t", type="telegram", token="1:a", chat_id=1, api_base_url=given)


def test_check_reports_a_bad_api_base_url_without_the_token(tmp_path):
    config = tmp_path / "config.json"
    block = {
        "type": "telegram",
        "token": DEFAULT_TOKEN,
        "chat_id": -1001,
        "approvers": ["1"],
        "api_base_url": "ftp://tg.example/bot",
    }
    config.write_text(json.dumps({"channels": {"telegram": block}}))
    out = io.StringIO()
    assert cli.check(str(config), out=out) == 1
    text = out.getvalue()
    assert "api_base_url" in text
    assert "must be an http:// or https:// URL" in text
    assert TOKEN_SECRET not in text
