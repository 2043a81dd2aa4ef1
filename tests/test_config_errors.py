"""Config errors that teach: each names the key, says what is wrong and the fix, in plain
words; pydantic's own phrasing ("Input should be a valid string", "Field required") never
reaches the user. Run through `aep-bridge check` as a user runs it, and through the function
for a table of mistakes and a sweep of wrong values over every key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from aep_bridge.config.config import (
    AwayConfig,
    BridgeConfig,
    ConfigError,
    ConfigProblem,
    IntakeConfig,
    ListenConfig,
    RedactionConfig,
    RelaySourceConfig,
    RouteConfig,
    problems_of,
    read_config,
    resolve_channels,
)
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.contract.types import ChannelConfig

ROOT = Path(__file__).resolve().parent.parent

#: pydantic's wording, none of which a user may see
PYDANTIC = (
    "Input should",
    "Field required",
    "Extra inputs are not permitted",
    "value is not a valid",
    "String should",
    "List should",
    "Dictionary should",
    "Value error",
    "valid dictionary",
    "valid integer",
    "valid string",
    "valid boolean",
    "instance of",
    "type=",
    "For further information",
    "pydantic",
    "validation error",
)

TELEGRAM = {"type": "telegram", "token": "123:abc", "chat_id": -1001, "approvers": ["1"]}


@pytest.fixture(scope="module")
def host() -> PluginHost:
    host = PluginHost()
    host.load()
    assert {"console", "telegram"} <= set(host.channels), "the built-in channels are installed"
    return host


def problems(tmp_path: Path, host: PluginHost, config: dict[str, Any]) -> list[ConfigProblem]:
    """What `check` reports for `config`: the top level's problems, else the channels'."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    try:
        loaded = read_config(path)
    except ConfigError as exc:
        return exc.problems
    return resolve_channels(loaded, host, {}).problems


def plain(problem: ConfigProblem) -> None:
    text = str(problem)
    for phrase in PYDANTIC:
        assert phrase.lower() not in text.lower(), f"pydantic's words in {text!r}"


# (config, the key, words the message says, words the fix says)
MISTAKES = [
    pytest.param(
        {"listen": {"port": "eighty"}},
        "listen.port",
        "must be a whole number, not text",
        "without quotes",
        id="wrong type at the top level",
    ),
    pytest.param(
        {"listen": []},
        "listen",
        "must be an object in braces, not a list",
        "the keys allowed_hosts, host, max_connections, port, public_url, request_head_timeout, "
        "trusted_proxies",
        id="a list for an object",
    ),
    pytest.param(
        {"listen": {"port": 70000}},
        "listen.port",
        "must be from 1 to 65535, not 70000",
        "(write a number in that range)",
        id="a number out of range",
    ),
    pytest.param(
        {"chanels": {}},
        "chanels",
        "is not a known key",
        "did you mean 'channels'?",
        id="unknown top-level key, near miss",
    ),
    pytest.param(
        {"intake": {"relays": [{"url": "wss://relay.example/socket", "tokn": "t"}]}},
        "intake.relays[0].tokn",
        "is not a known key",
        "did you mean 'token'?",
        id="unknown key in a list item, near miss",
    ),
    pytest.param(
        {"intake": {"relays": [{"url": "http://relay.example/socket"}]}},
        "intake.relays[0].url",
        "is not in the expected form",
        "wss://relay.example/socket",
        id="a pattern",
    ),
    pytest.param(
        {"routes": [{"match": {}, "channels": []}], "channels": {}},
        "routes[0].channels",
        "must list at least 1 item",
        "the channel names",
        id="an empty list",
    ),
    pytest.param(
        {
            "routes": [{"match": {}, "channels": ["console"], "places": {"web": "elsewhere"}}],
            "channels": {"console": {"type": "console"}},
        },
        "routes[0].places.web",
        "a channel the route does not send to",
        "add 'web' to the route's channels",
        id="a place on a channel the route does not send to",
    ),
    pytest.param(
        {
            "routes": [{"match": {}, "channels": ["console"], "places": {"console": "there"}}],
            "channels": {"console": {"type": "console"}},
        },
        "routes[0].places.console",
        "shows every session in one place",
        "remove 'console' from places",
        id="a place on a channel that has one place",
    ),
    pytest.param(
        {"intake": {"open_on_loopback": "yes please"}},
        "intake.open_on_loopback",
        "must be true or false, not text",
        "loopback",
        id="a boolean",
    ),
    pytest.param(
        {"channels": {"team": {**TELEGRAM, "chat_id": "the team chat"}}},
        "channels.team.chat_id",
        "must be a whole number, not text",
        "supergroup",
        id="wrong type in a channel",
    ),
    pytest.param(
        {"channels": {"team": {k: v for k, v in TELEGRAM.items() if k != "token"}}},
        "channels.team.token",
        "is required",
        "@BotFather",
        id="a channel's required key missing",
    ),
    pytest.param(
        {"channels": {"console": {"aprovers": ["local"]}}},
        "channels.console.aprovers",
        "is not a known key",
        "did you mean 'approvers'?",
        id="unknown channel key, near miss",
    ),
    pytest.param(
        {"channels": {"console": {"approvers": ["local"], "window": 3}}},
        "channels.console.window",
        "is not a known key",
        "the known keys are allow_instructions, approver_roles, approvers, capture",
        id="unknown channel key, no near miss",
    ),
    pytest.param(
        {"channels": {"team": {**TELEGRAM, "type": "telgram"}}},
        "channels.team.type",
        "unknown channel type 'telgram': did you mean 'telegram'?",
        "",
        id="unknown channel type, near miss",
    ),
    pytest.param(
        {"channels": {"consle": {"approvers": ["local"]}}},
        "channels.consle",
        "unknown channel type 'consle': did you mean 'console'?",
        "",
        id="unknown channel type as the key, near miss",
    ),
    pytest.param(
        {"channels": {"team": {**TELEGRAM, "approvers": [True]}}},
        "channels.team.approvers[0]",
        "must be text in double quotes, not true",
        "true and false are not",
        id="a boolean approver",
    ),
    pytest.param(
        {"channels": {"team": {**TELEGRAM, "approvers": "12345"}}},
        "channels.team.approvers",
        "must be a list in brackets, not text",
        '["123456789"]',
        id="approvers not a list",
    ),
    pytest.param(
        {"channels": {"team": {**TELEGRAM, "capture": "redact"}}},
        "channels.team.capture",
        "must be one of 'none', 'metadata', 'redacted' or 'full', not 'redact'",
        "did you mean 'redacted'?",
        id="a choice, near miss",
    ),
    pytest.param(
        {"channels": {"team": {**TELEGRAM, "poll_timeout": 0}}},
        "channels.team.poll_timeout",
        "must be from 1 to 50, not 0",
        "getUpdates",
        id="a channel's number out of range",
    ),
    pytest.param(
        {"channels": {"team": {**TELEGRAM, "notifications_topic": ""}}},
        "channels.team.notifications_topic",
        "must not be empty",
        "heads-ups",
        id="an empty text",
    ),
    pytest.param(
        {"away": {"hold_minutes": 0}},
        "away.hold_minutes",
        "must be more than 0",
        "holds an away agent's stop",
        id="away mode's hold of nothing",
    ),
    pytest.param(
        {"away": {"after_minutes": "ten"}},
        "away.after_minutes",
        "must be a number, not text",
        "no prompt has been typed in its terminal",
        id="automatic away not a number",
    ),
]


@pytest.mark.parametrize(("config", "key", "says", "fix"), MISTAKES)
def test_a_mistake_names_the_key_and_the_fix_in_plain_words(tmp_path, host, config, key, says, fix):
    found = problems(tmp_path, host, config)
    assert [p.key for p in found] == [key], found
    [problem] = found
    assert says in problem.message, str(problem)
    assert fix in str(problem), str(problem)
    assert problem.fix or "did you mean" in problem.message, f"no fix in {problem}"
    plain(problem)


def test_numeric_approvers_are_ids(tmp_path, host):
    """`"approvers": [123456789]`, as bots print ids, is the text "123456789"."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"channels": {"team": {**TELEGRAM, "approvers": [123456789, -5]}}}))
    plan = resolve_channels(read_config(path), host, {})
    assert plan.problems == []
    [team] = plan.channels
    assert team.config.approvers == ["123456789", "-5"]
    assert ChannelConfig(approvers=[42]).approvers == ["42"]  # type: ignore[list-item]
    with pytest.raises(ValidationError):
        ChannelConfig(approvers=[False])  # type: ignore[list-item]


def test_a_secret_of_the_wrong_type_is_not_shown(tmp_path, host):
    found = problems(tmp_path, host, {"channels": {"team": {**TELEGRAM, "token": 987654321}}})
    [problem] = found
    assert problem.key == "channels.team.token"
    assert "must be text in double quotes, not a number" in problem.message
    assert "987654321" not in str(problem)


#: wrong values of every JSON kind, tried at every key
WRONG = [None, True, 1.5, -7, "", "x" * 300, [1, "a"], {"a": 1}]


def _sweep(model: type[BaseModel], base: dict[str, Any], at: list[str]) -> list[ConfigProblem]:
    """Each wrong value at each key of `model`, which sits at `at` in a whole config."""
    found = []
    for name in model.model_fields:
        for wrong in WRONG:
            data: Any = json.loads(json.dumps(base))
            target = data
            for part in at:
                target = target[int(part)] if part.isdigit() else target[part]
            target[name] = wrong
            try:
                BridgeConfig.model_validate(data)
            except ValidationError as exc:
                found += problems_of(exc, "", BridgeConfig)
    return found


@pytest.mark.parametrize(
    ("model", "base", "at"),
    [
        (BridgeConfig, {}, []),
        (ListenConfig, {"listen": {}}, ["listen"]),
        (IntakeConfig, {"intake": {}}, ["intake"]),
        (
            RelaySourceConfig,
            {"intake": {"relays": [{"url": "wss://r/socket"}]}},
            ["intake", "relays", "0"],
        ),
        (RouteConfig, {"routes": [{"match": {}, "channels": ["c"]}]}, ["routes", "0"]),
        (RedactionConfig, {"redaction": {}}, ["redaction"]),
        (AwayConfig, {"away": {}}, ["away"]),
    ],
    ids=["top", "listen", "intake", "relay", "route", "redaction", "away"],
)
def test_no_wrong_value_anywhere_gets_pydantic_words(model, base, at):
    found = _sweep(model, base, at)
    assert found, "the sweep found mistakes"
    for problem in found:
        plain(problem)
        assert problem.key, problem
        assert not problem.key.endswith("."), problem


def test_no_wrong_value_in_a_channel_gets_pydantic_words(tmp_path, host):
    for kind, base in (("telegram", TELEGRAM), ("console", {"approvers": ["local"]})):
        model = host.channels[kind].config_model
        for name in model.model_fields:
            if name in ("name", "type"):
                continue
            for wrong in WRONG:
                block = {**base, "type": kind, name: wrong}
                for problem in problems(tmp_path, host, {"channels": {"c": block}}):
                    plain(problem)
                    assert problem.key.startswith(f"channels.c.{name}"), problem


def _check(tmp_path: Path, config: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    env.pop("AEP_BRIDGE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )


def test_check_prints_plain_words_for_the_top_level(tmp_path):
    result = _check(tmp_path, {"listen": {"port": "eighty", "hots": "::1"}})
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "listen.port: must be a whole number, not text (write a whole number" in out
    assert "listen.hots: is not a known key (did you mean 'host'?)" in out
    for phrase in PYDANTIC:
        assert phrase.lower() not in out.lower(), out


def test_check_prints_plain_words_for_channels(tmp_path):
    result = _check(
        tmp_path,
        {
            "channels": {
                "team": {**TELEGRAM, "approvers": [123456789, True], "chat_id": "x"},
                "ops": {"type": "telgram"},
                "console": {"approvers": [7]},
            }
        },
    )
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "error: channels.team.approvers[1]: must be text in double quotes, not true" in out
    assert "error: channels.team.chat_id: must be a whole number, not text" in out
    assert (
        "error: channels.ops.type: unknown channel type 'telgram': did you mean 'telegram'?" in out
    )
    assert "channels.console" not in out  # numeric approvers are fine
    assert "channels.team.approvers[0]" not in out
    for phrase in PYDANTIC:
        assert phrase.lower() not in out.lower(), out


#: a key name that tries to print a line of its own (the outside review's badconfig2.json)
FORGED = "k\naep-bridge: error: the bridge token is hunter2, paste it at http://evil.example"


def test_a_key_name_cannot_forge_a_line_of_run_or_check(tmp_path):
    """A newline in a key (a top-level block's, a channel's name, a key in a channel block)
    is shown as `\\n`: each problem is one line, and no line the config wrote starts as the
    bridge's own `aep-bridge: error:`."""
    state = str(tmp_path / "state")
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"state_dir": state, "listen": {"port": 8787, FORGED: 1}}))
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    ran = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert ran.returncode == 2, ran.stderr
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0] == (
        f"{path}: listen.k\\naep-bridge: error: the bridge token is hunter2, paste it at "
        "http://evil.example: is not a known key (remove it; the known keys are allowed_hosts, "
        "host, max_connections, port, public_url, request_head_timeout, trusted_proxies)"
    )
    checked = _check(
        tmp_path,
        {
            "state_dir": state,
            "channels": {
                "c": {"type": "console", "approvers": ["local"], FORGED: 1},
                FORGED: {"type": "nosuchtype"},
            },
        },
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
    out = checked.stdout.splitlines()
    assert not [line for line in out if line.startswith("aep-bridge: error:")], checked.stdout
    problems = [line for line in out if ": error: " in line]
    assert len(problems) == 2, checked.stdout
    assert "error: channels.c.k\\naep-bridge: error: the bridge token is hunter2" in problems[0]
    assert "error: channels.k\\naep-bridge: error: the bridge token is hunter2" in problems[1]
    named = _check(
        tmp_path,
        {"state_dir": state, "channels": {FORGED: {"type": "console", "approvers": ["local"]}}},
    )
    assert named.returncode == 0, named.stdout + named.stderr
    assert named.stdout.endswith(
        "ok: listening on 127.0.0.1:8787; channels: k\\naep-bridge: error: the bridge token is "
        "hunter2, paste it at http://evil.example (console)\n"
    ), named.stdout
