"""`aep-bridge agent login URL` (issue 34): the remote bridge's URL and token kept for the
agent daemon, mode 0600, and the daemon finding them (docs/deploy.md). The whole path through
a real nginx with TLS: tests/agents/test_behind_nginx.py."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from aep_bridge.agents import daemon
from aep_bridge.agents.login import Login, LoginError, base_of, load, login_path, save
from aep_bridge.cli import main
from tests.bridge_process import ROOT, free_port

TOKEN = "tok-" + "x" * 40


@pytest.fixture
def agent_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An agent's machine: its config directory in `tmp_path`, no bridge settings."""
    monkeypatch.setenv("XDG_CONFIG_HOME", os.fspath(tmp_path / "config"))
    for name in ("AEP_AGENT_LOGIN", "AEP_BRIDGE_URL", "AEP_BRIDGE_TOKEN", "AEP_BRIDGE_CA_FILE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "config" / "aep-bridge" / "agent.json"


def login_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`aep-bridge agent login ...` as a person runs it, the token on standard input."""
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "agent", "login", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_the_token_on_stdin_is_kept_0600_where_the_docs_say(agent_home: Path):
    done = login_cli("https://bridge.example.com/", "--no-check", stdin=TOKEN + "\n")
    assert done.returncode == 0, done.stderr
    assert login_path() == agent_home
    assert stat.S_IMODE(agent_home.stat().st_mode) == 0o600
    assert json.loads(agent_home.read_text()) == {
        "url": "https://bridge.example.com",
        "token": TOKEN,
        "ca_file": None,
    }
    assert TOKEN not in done.stdout + done.stderr
    assert load() == Login("https://bridge.example.com", TOKEN)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("bridge.example.com", "is not a bridge's URL"),
        ("ftp://bridge.example.com", "is not a bridge's URL"),
        ("https://ada:pw@bridge.example.com", "no user, password"),
        ("https://bridge.example.com/?token=abc", "no user, password"),
    ],
)
def test_a_url_that_is_not_one_is_refused_and_nothing_is_kept(agent_home: Path, url, said):
    done = login_cli(url, "--no-check", stdin=TOKEN)
    assert done.returncode == 2
    assert said in done.stderr
    assert "pw" not in done.stderr.replace("password", "")
    assert not agent_home.exists()


def test_no_token_is_refused(agent_home: Path):
    done = login_cli("https://bridge.example.com", "--no-check", stdin="\n")
    assert done.returncode == 2
    assert "no usable token" in done.stderr
    assert not agent_home.exists()


def test_a_bridge_that_does_not_answer_stores_nothing(agent_home: Path):
    done = login_cli(f"http://127.0.0.1:{free_port()}", stdin=TOKEN)
    assert done.returncode == 2
    assert "does not answer" in done.stderr
    assert "nothing stored" in done.stderr
    assert not agent_home.exists()


def test_a_missing_ca_file_is_named(agent_home: Path, tmp_path: Path):
    done = login_cli(
        "https://bridge.example.com", "--ca-file", os.fspath(tmp_path / "no.pem"), stdin=TOKEN
    )
    assert done.returncode == 2
    assert "cannot read the CA file" in done.stderr
    assert not agent_home.exists()


def test_a_login_others_can_read_is_refused_with_the_fix(agent_home: Path):
    save(Login("https://bridge.example.com", TOKEN))
    agent_home.chmod(0o644)
    with pytest.raises(LoginError, match=r"can be read by others[\s\S]*chmod 600"):
        load()


def test_wss_urls_are_taken_back_to_the_bridges_base():
    assert base_of("wss://bridge.example.com/socket") == "https://bridge.example.com"
    assert base_of("HTTPS://bridge.example.com:8443/aep/") == "https://bridge.example.com:8443/aep"


def test_the_daemon_connects_where_the_login_says_unless_told_otherwise(
    agent_home: Path, monkeypatch: pytest.MonkeyPatch
):
    stored = Login("https://bridge.example.com", TOKEN)
    assert daemon._address(None, None, None, stored) == (
        "wss://bridge.example.com/socket",
        TOKEN,
    )
    assert daemon._address("http://127.0.0.1:9", "flag", None, stored) == (
        "ws://127.0.0.1:9/socket",
        "flag",
    )
    monkeypatch.setenv("AEP_BRIDGE_URL", "http://10.0.0.2:8787")
    monkeypatch.setenv("AEP_BRIDGE_TOKEN", "env")
    assert daemon._address(None, None, None, stored) == ("ws://10.0.0.2:8787/socket", "env")


def test_agent_login_in_process_reads_stdin(agent_home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(TOKEN + "\n"))
    assert main(["agent", "login", "https://bridge.example.com", "--no-check"]) == 0
    assert load() == Login("https://bridge.example.com", TOKEN)


def test_install_says_which_bridge_the_daemon_will_send_to(agent_home: Path, tmp_path: Path):
    from aep_bridge.agents import install

    project = tmp_path / "project"
    project.mkdir()
    config = os.fspath(tmp_path / "config.json")
    save(Login("https://bridge.example.com", TOKEN))
    out, err = io.StringIO(), io.StringIO()
    done = install.main(
        "claude-code",
        project=os.fspath(project),
        capture="metadata",
        config=config,
        out=out,
        err=err,
    )
    assert done == 0, err.getvalue()
    assert "the agent daemon sends to https://bridge.example.com (aep-bridge agent login)" in (
        out.getvalue()
    )
    agent_home.chmod(0o640)  # a login the daemon would refuse is said at install
    out, err = io.StringIO(), io.StringIO()
    install.main(
        "claude-code",
        project=os.fspath(project),
        capture="metadata",
        config=config,
        out=out,
        err=err,
    )
    assert "the agent daemon cannot start" in err.getvalue()
    assert "chmod 600" in err.getvalue()
    assert TOKEN not in out.getvalue() + err.getvalue()
