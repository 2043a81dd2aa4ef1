"""docs/writing-a-channel.md works as written: its files build a plugin that passes the kit,
installs, is found through its entry point, and is accepted by `aep-bridge check`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "writing-a-channel.md"
FILE_BLOCK = re.compile(r"<!-- file: (?P<path>\S+) -->\n```\w*\n(?P<body>.*?)\n```", re.DOTALL)


def build(target: Path) -> Path:
    plugin = target / "aep-bridge-gotify"
    files = FILE_BLOCK.findall(DOC.read_text())
    assert {path for path, _ in files} == {
        "pyproject.toml",
        "src/aep_bridge_gotify/__init__.py",
        "src/aep_bridge_gotify/channel.py",
        "tests/test_gotify.py",
    }
    for path, body in files:
        (plugin / path).parent.mkdir(parents=True, exist_ok=True)
        (plugin / path).write_text(body + "\n")
    return plugin


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AEP_BRIDGE")}
    return {**base, **extra}


def test_the_tutorial_plugin_passes_its_tests_and_the_kit(tmp_path: Path):
    plugin = build(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(plugin / "tests")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=plugin,
        env=env(PYTHONPATH=str(plugin / "src")),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"\b1[0-9] passed", result.stdout), result.stdout[-500:]


def test_the_tutorial_plugin_installs_and_runs_from_config(tmp_path: Path):
    plugin = build(tmp_path)
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(plugin),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    listing = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "plugins"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(PYTHONPATH=str(site)),
    )
    assert "gotify: loaded (plugin, aep-bridge-gotify 0.1.0); channels: gotify" in listing.stdout
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "channels": {
                    "console": {"approvers": ["local"]},
                    "gotify": {"server": "https://push.example.com", "token": "${GOTIFY_TOKEN}"},
                }
            }
        )
    )
    checked = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "check", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(PYTHONPATH=str(site), GOTIFY_TOKEN="gt-123"),
    )
    assert checked.returncode == 0, checked.stdout
    assert "channels: console (console), gotify (gotify)" in checked.stdout
