"""The Matrix docs say what the code does: the guide and docs/cli.md list every flag of the
wizard, the guide names every check of the doctor, and config.example.json's matrix block is
one the channel accepts once enabled."""

from __future__ import annotations

import json
import re
from pathlib import Path

import aep_bridge_matrix.doctor as doctor
from aep_bridge.config.config import read_config, resolve_channels
from aep_bridge.contract.plugins import PluginHost
from aep_bridge_matrix.setup import MatrixSetup
from tests.bridge_process import ROOT

from . import wizard_plugin

GUIDE = ROOT / "docs" / "channels" / "matrix.md"


def test_the_guide_and_the_cli_page_list_every_wizard_flag():
    table = re.findall(r"^\| `(--[a-z-]+)", GUIDE.read_text(), flags=re.M)
    assert sorted(table) == sorted(o.flag for o in MatrixSetup.options)
    cli = (ROOT / "docs" / "cli.md").read_text()
    for option in MatrixSetup.options:
        assert option.flag in cli, option.flag


def test_the_guide_names_every_check_of_the_doctor():
    source = Path(doctor.__file__).read_text()
    named = set(re.findall(r'doctor_(?:ok|fail)\(\s*"([a-z_]+)"', source))
    assert named == {"homeserver", "access_token", "room", "encryption", "power_level", "approvers"}
    rows = set(re.findall(r"^\| `([a-z_]+)` \| ", GUIDE.read_text(), flags=re.M))
    assert named <= rows


def test_config_example_has_a_disabled_matrix_block_the_channel_accepts(tmp_path: Path):
    block = json.loads((ROOT / "config.example.json").read_text())["channels"]["matrix"]
    assert block["enabled"] is False
    assert block["access_token"] == "${MATRIX_ACCESS_TOKEN}"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"channels": {"matrix": {**block, "enabled": True}}}))
    host = PluginHost()
    host.register(wizard_plugin)
    plan = resolve_channels(read_config(path), host, {"MATRIX_ACCESS_TOKEN": "syt_abc"})
    assert plan.problems == []
    assert [c.name for c in plan.channels] == ["matrix"]
    assert plan.channels[0].config.room_id == block["room_id"]  # type: ignore[attr-defined]
