"""With no config file at all, the web page runs, answerable by the person signed in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from aep_bridge.config.config import read_config, resolve_channels
from aep_bridge.contract.plugins import PluginHost

ROOT = Path(__file__).resolve().parents[3]


def test_the_embedded_defaults_run_the_web_page_with_local_as_its_approver() -> None:
    host = PluginHost()
    host.load(autoload=True)
    plan = resolve_channels(read_config(None), host)
    channels = {resolved.config.name: resolved for resolved in plan.channels}
    assert set(channels) >= {"console", "web"}
    web = channels["web"].config
    assert web.approvers == ["local"]
    assert web.user == "local"  # type: ignore[attr-defined]
    assert plan.problems == []


def test_the_example_config_has_a_web_block_its_plugin_accepts() -> None:
    example = json.loads((ROOT / "config.example.json").read_text())
    from aep_bridge_web import WebConfig

    block = WebConfig.model_validate(example["channels"]["web"])
    assert block.approvers == ["local"]


def test_a_bad_sign_in_option_is_named_with_its_bounds() -> None:
    from aep_bridge_web import WebConfig

    block = WebConfig.model_validate({"name": "web", "signin_limit": 3, "signin_max_hours": 1})
    assert (block.signin_limit, block.signin_max_hours, block.signin_idle_hours) == (3, 1, 12)
    for key, value in (("signin_limit", 0), ("signin_idle_hours", 0), ("signin_max_hours", 9999)):
        with pytest.raises(ValidationError) as raised:
            WebConfig.model_validate({"name": "web", key: value})
        assert key in str(raised.value)
