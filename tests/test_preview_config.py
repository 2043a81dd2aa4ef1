"""`aep-bridge preview` tells the truth: it runs the channel as the user's config has it.

The config is the one `aep-bridge run` reads (`--config`, `$AEP_BRIDGE_CONFIG`, the default
file): its redaction (a secret only the config names is never in the page), its routes (a
session they send elsewhere is not shown), the channel instance's own settings (`--channel
team-telegram`, its verbosity) and, through the channel's own adapter built from that
instance's block but never started, the very capabilities and rate limits the outbox paces
by. A broken config is refused as `aep-bridge check` refuses it, naming the key and the fix.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.aep.validation import parse_event
from aep_bridge.commands.preview_command import choose
from aep_bridge.contract.plugins import PluginHost
from tests.bridge_process import ROOT

#: a secret no built-in pattern knows: only the config's `redaction.secret_env` names it
PASSPHRASE = "horse-battery-staple-7731"
TELEGRAM = {"type": "telegram", "token": "123456:preview-test-token", "approvers": [7]}


def _session(agent: str, session: str, reply: str) -> list[bytes]:
    source = f"aep://localhost/agent/{agent}/session/{session}"
    common = {"source": source, "agent": agent, "session": session, "capture": "redacted"}
    return [
        make_event(
            "session.started", seq=0, data={"label": f"{agent} at work", "cwd": "/tmp/x"},
            time="2026-11-30T10:00:00.000Z", **common,
        ).raw,
        make_event(
            "message.agent.replied", seq=1,
            data={"message_id": "m1", "role": "assistant", "text": reply},
            time="2026-11-30T10:00:02.000Z", **common,
        ).raw,
        make_event(
            "session.ended", seq=2, data={"reason": "normal"},
            time="2026-11-30T10:00:03.000Z", **common,
        ).raw,
    ]  # fmt: skip


def _write(tmp_path: Path, config: dict[str, Any], *sessions: list[bytes]) -> tuple[Path, Path]:
    recording = tmp_path / "session.jsonl"
    recording.write_bytes(b"\n".join(line for lines in sessions for line in lines) + b"\n")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return recording, path


def _found(config: Path) -> dict[str, str]:
    """The environment of a user whose config `aep-bridge run` finds without `--config`."""
    return {**os.environ, "AEP_BRIDGE_CONFIG": str(config)}


def _preview(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "preview", *args, "--text", "--out", "-"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_a_secret_only_the_configs_redaction_names_never_reaches_the_preview(
    tmp_path: Path,
) -> None:
    reply = f"deployed with passphrase {PASSPHRASE}, mail ops@example.com"
    recording, config = _write(
        tmp_path,
        {"redaction": {"secret_env": ["DEPLOY_PASSPHRASE"]}, "channels": {"web": {}}},
        _session("claude-code", "s_1", reply),
    )
    env = {"DEPLOY_PASSPHRASE": PASSPHRASE}
    plain = _preview(str(recording), "--channel", "web", env=env)
    assert plain.returncode == 0, plain.stderr
    assert PASSPHRASE in plain.stdout  # no built-in pattern covers it: the config does
    # found where `aep-bridge run` finds it: here $AEP_BRIDGE_CONFIG
    shown = _preview(
        str(recording), "--channel", "web", env={**env, "AEP_BRIDGE_CONFIG": str(config)}
    )
    assert shown.returncode == 0, shown.stderr
    assert PASSPHRASE not in shown.stdout
    assert "deployed with passphrase [REDACTED:secret]" in shown.stdout
    # the config's other redaction settings apply too: `pii: false` shows the address
    config.write_text(json.dumps({"redaction": {"pii": False}, "channels": {"web": {}}}))
    relaxed = _preview(str(recording), "--channel", "web", "--config", str(config))
    assert "ops@example.com" in relaxed.stdout
    assert "ops@example.com" not in plain.stdout


def test_the_configs_tokens_are_redacted_and_never_printed(tmp_path: Path) -> None:
    """A channel's token in the config and the bridge's own token (in its state folder) are
    kept out of the page, as `run` keeps them out of every channel."""
    token = "123456:AAFtoken-the-preview-must-hide"
    state = tmp_path / "state"
    state.mkdir()
    (state / "token").write_text("bridge-endpoint-token-5521\n")
    recording, config = _write(
        tmp_path,
        {
            "state_dir": str(state),
            "channels": {"team-telegram": {**TELEGRAM, "token": token, "chat_id": -100123}},
        },
        _session(
            "claude-code", "s_1", f"the bot token is {token}; curl -H bridge-endpoint-token-5521"
        ),
    )
    done = _preview(str(recording), "--channel", "team-telegram", env=_found(config))
    assert done.returncode == 0, done.stderr
    assert token not in done.stdout + done.stderr
    assert "bridge-endpoint-token-5521" not in done.stdout
    assert "the bot token is [REDACTED:secret]" in done.stdout
    assert "curl -H [REDACTED:secret]" in done.stdout


ROUTED = {
    "channels": {
        "team-telegram": {**TELEGRAM, "chat_id": -100123, "verbosity": "quiet"},
        "ops": {"type": "web", "approvers": ["local"]},
    },
    "routes": [
        {"match": {"agent": "codex"}, "channels": ["team-telegram"]},
        {"match": {}, "channels": ["ops"]},
    ],
}


def test_a_session_the_routes_send_elsewhere_is_not_shown(tmp_path: Path) -> None:
    recording, config = _write(
        tmp_path,
        ROUTED,
        _session("claude-code", "s_claude", "claude's words"),
        _session("codex", "s_codex", "codex's words"),
    )
    html = tmp_path / "page.html"
    done = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "preview", str(recording), "--channel",
         "team-telegram", "--out", str(html)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=_found(config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = html.read_text(encoding="utf-8")
    assert "codex at work" in page
    assert "claude-code at work" not in page
    assert "1 of its 2 sessions not shown (the routes send them elsewhere)" in page
    # the other channel gets both, as the catch-all route says
    both = _preview(str(recording), "--channel", "ops", "--config", str(config))
    assert "claude's words" in both.stdout
    assert "codex's words" in both.stdout


def test_a_recording_the_routes_send_nowhere_here_is_said_plainly(tmp_path: Path) -> None:
    recording, config = _write(tmp_path, ROUTED, _session("claude-code", "s_1", "hello"))
    done = _preview(str(recording), "--channel", "team-telegram", "--config", str(config))
    assert done.returncode == 2
    assert (
        "no session of session.jsonl goes to channel 'team-telegram' under the routes of "
        "config.json" in done.stderr
    )
    assert done.stdout == ""


def test_channel_names_a_configured_instance_with_its_own_settings(tmp_path: Path) -> None:
    recording, config = _write(
        tmp_path, ROUTED, _session("codex", "s_1", "done: the totals add up")
    )
    html = tmp_path / "page.html"
    args = [str(recording), "--channel", "team-telegram", "--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "preview", *args, "--out", str(html)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = html.read_text(encoding="utf-8")
    assert "in Telegram (team-telegram), verbosity quiet, capture redacted" in page
    assert "as config.json configures it" in page
    # --verbosity still wins over the config's; the type names its one instance
    done = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "preview", str(recording), "--channel",
         "telegram", "--config", str(config), "--verbosity", "verbose", "--out", str(html)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "(team-telegram), verbosity verbose" in html.read_text(encoding="utf-8")


def test_a_channel_whose_token_is_not_set_here_still_previews(tmp_path: Path) -> None:
    """A preview needs no token: a `${VAR}` unset here costs only the platform's settings."""
    recording, config = _write(
        tmp_path,
        {"channels": {"team-telegram": {**TELEGRAM, "token": "${NO_SUCH_TOKEN_VAR}",
                                        "chat_id": -100123, "verbosity": "quiet"}}},
        _session("claude-code", "s_1", "hello from the agent"),
    )  # fmt: skip
    done = _preview(str(recording), "--channel", "team-telegram", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert "hello from the agent" in done.stdout


@pytest.mark.parametrize(
    ("channel", "config", "words"),
    [
        (
            "team-telegram",
            {"channels": {"team-telegram": {**TELEGRAM, "chat_id": 1, "verbosity": "loud"}}},
            "config.json: channels.team-telegram.verbosity: ",
        ),
        ("web", {"redaction": {"secret_envs": []}}, "config.json: redaction.secret_envs: "),
        (
            "web",
            {"channels": {"web": {}}, "routes": [{"match": {}, "channels": ["nowhere"]}]},
            "config.json: routes[0].channels[0]: names no channel: 'nowhere' (use a key "
            "under channels (web))",
        ),
    ],
)
def test_a_broken_config_is_refused_naming_the_key_and_the_fix(
    tmp_path: Path, channel: str, config: dict[str, Any], words: str
) -> None:
    recording, path = _write(tmp_path, config, _session("claude-code", "s_1", "hello"))
    done = _preview(str(recording), "--channel", channel, "--config", str(path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"aep-bridge preview: {tmp_path / words}")
    assert "(" in lines[0]  # the fix, in parentheses after the problem
    assert "123456:preview-test-token" not in done.stderr


def test_a_broken_configs_error_never_prints_a_credential_it_quotes(tmp_path: Path) -> None:
    """A config error quotes the wrong value to help; a URL's credential in it is masked,
    as `aep-bridge check` masks it."""
    config = {"channels": {"web": {"verbosity": "x://me:hunter2@relay.example/"}}}
    recording, path = _write(tmp_path, config, _session("claude-code", "s_1", "hello"))
    done = _preview(str(recording), "--channel", "web", "--config", str(path))
    assert done.returncode == 2
    assert "channels.web.verbosity" in done.stderr
    assert "hunter2" not in done.stderr


# -- the recorder paces as the channel does ---------------------------------------------------

#: each built channel's block for an instance without a notifications place (a private chat)
BLOCKS = {
    "telegram": {**TELEGRAM, "chat_id": 4242},
    "discord": {"type": "discord", "token": "a.b.c", "guild_id": "1", "channel_id": "2",
                "approvers": ["7"]},
    "slack": {"type": "slack", "bot_token": "xoxb-1-2-3", "app_token": "xapp-1-2-3",
              "channel_id": "C0123456789", "approvers": ["U0123456789"]},
}  # fmt: skip


def _host(kind: str) -> PluginHost:
    host = PluginHost()
    host.load()
    if kind not in host.channels:
        pytest.skip(f"the {kind} plugin does not load here")
    return host


@pytest.mark.parametrize("kind", sorted(BLOCKS))
def test_the_recorder_declares_the_channels_own_capabilities_and_rate_limits(
    tmp_path: Path, kind: str
) -> None:
    from aep_bridge.commands.preview_command import run_recorder
    from aep_bridge.commands.preview_config import target

    host = _host(kind)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"channels": {f"my-{kind}": BLOCKS[kind]}}), encoding="utf-8")
    to = target(f"my-{kind}", host, path)
    registration = host.channels[kind]
    choice = choose(kind, host)
    events = [parse_event(line) for line in _session("claude-code", "s_1", "hi")]
    recorder = asyncio.run(run_recorder(events, choice, host, to))
    assert to.typed is not None
    real = registration.factory(recorder.core, to.typed)  # the instance `run` would build
    assert recorder.capabilities == real.capabilities
    assert recorder.capabilities.rate_limits == real.capabilities.rate_limits
    assert recorder.capabilities.edit_rate_limits == real.capabilities.edit_rate_limits
    # the instance's own declaration, where it differs from the type's
    declared = registration.capabilities
    if kind == "telegram":  # a private chat: no group limit
        assert declared.rate_limits.per_group is not None
        assert recorder.capabilities.rate_limits.per_group is None
    else:  # no notifications channel: no heads-up is queued at all
        assert declared.heads_ups
        assert not recorder.capabilities.heads_ups
    # and which limit each call spends, and where it counts, are the channel's own
    for op in ("rename_session_thread", "update_permission_request", "send_notification"):
        assert recorder.call_kind(op, ()) == real.call_kind(op, ())
    assert recorder.limit_keys("s_1") == real.limit_keys("s_1")
    assert recorder.limit_keys(None) == real.limit_keys(None)
