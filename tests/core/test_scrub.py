"""Secrets never printed: the scrubber, the log filter, `doctor` and `check`, and a real
`aep-bridge run` whose channel fails with its secret in the error."""

from __future__ import annotations

import io
import logging

import pytest

from aep_bridge import cli
from aep_bridge.process import log_setup
from aep_bridge.text import scrub
from tests.bridge_process import BridgeProcess, free_port, write_config

SECRET = "s3cr3t-value-0123456789"
BOT_URL = "https://api.telegram.org/bot123456:AAsecret-bot-token/getMe"


@pytest.fixture(autouse=True)
def _no_secrets_left():
    yield
    scrub.forget()


def test_scrub_removes_registered_and_given_secrets_url_credentials_and_bot_tokens():
    scrub.register([SECRET, "abc"])  # shorter than 4: ignored
    text = scrub.scrub(
        f"token {SECRET}, extra xyz-extra-1, http://alice:hunter2@host:8081/x, {BOT_URL}, abc",
        ["xyz-extra-1"],
    )
    assert text == (
        "token ***, extra ***, http://***@host:8081/x, https://api.telegram.org/bot***/getMe, abc"
    )
    assert scrub.scrub("git@github.com:me/repo and ssh://git@host/x") == (
        "git@github.com:me/repo and ssh://***@host/x"
    )


def test_a_log_record_carrying_a_secret_is_scrubbed_by_the_handler_filter():
    stream = io.StringIO()
    root = logging.getLogger()
    before = list(root.handlers), root.level
    log_setup.configure(stream=stream)
    try:
        scrub.register([SECRET])
        logging.getLogger("aep_bridge.test").error("login with %s failed", SECRET)
        logging.getLogger("somelibrary").warning("GET %s failed", BOT_URL)
        logging.getLogger("httpx").warning("proxy http://bob:pw-12345@proxy:3128 refused")
        try:
            raise RuntimeError(f"boom {SECRET}")
        except RuntimeError:
            logging.getLogger("aep_bridge.test").exception("it failed")
    finally:
        for handler in [h for h in root.handlers if h not in before[0]]:
            root.removeHandler(handler)
        root.setLevel(before[1])
    text = stream.getvalue()
    assert "login with *** failed" in text
    assert "bot***/getMe" in text
    assert "http://***@proxy:3128" in text
    assert "boom ***" in text
    for leaked in (SECRET, "AAsecret-bot-token", "pw-12345"):
        assert leaked not in text


def _leaky_config(tmp_path, port: int | None = None):
    channels = {"leaky": {"type": "leaky", "approvers": ["a"], "secret": SECRET}}
    return write_config(tmp_path, port or free_port(), channels)


def test_doctor_never_prints_a_channels_secret_a_url_credential_or_a_bot_token(
    tmp_path, monkeypatch, capsys
):
    from tests.core import leaky_channel

    async def leaky_doctor(self):
        await self.start()

    monkeypatch.setattr(leaky_channel.LeakyChannel, "doctor", leaky_doctor, raising=False)
    monkeypatch.setenv("AEP_BRIDGE_PLUGINS", "tests.core.leaky_channel")
    monkeypatch.setenv("AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD", "1")
    out = io.StringIO()
    assert cli.doctor(str(_leaky_config(tmp_path)), out=out) == 1
    text = out.getvalue() + "".join(capsys.readouterr())
    assert "FAIL  RuntimeError: cannot log in with *** at https://***@relay.example/bot***" in text
    for leaked in (SECRET, "pa55word-x", "AAsecret-bot-token"):
        assert leaked not in text


async def test_run_never_logs_a_channels_secret(tmp_path):
    port = free_port()
    bridge = BridgeProcess(
        _leaky_config(tmp_path, port), tmp_path / "bridge.log", plugins="tests.core.leaky_channel"
    )
    await bridge.start(f"http://127.0.0.1:{port}")
    try:
        await bridge.until(
            "the channel's failure", lambda: "did not start" in bridge.log.read_text(), 20
        )
    finally:
        await bridge.aclose()
    text = bridge.log.read_text()
    assert "did not start: RuntimeError: cannot log in with *** at https://***@relay" in text
    for leaked in (SECRET, "pa55word-x", "AAsecret-bot-token"):
        assert leaked not in text
