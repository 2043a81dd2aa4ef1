"""A third-party plugin installed with pip into a fresh environment is found and configured.

This is the promise to plugin authors: `pip install` the package, name its channel in the
config, and the bridge runs it, with no change to aep-bridge.
"""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NTFY = ROOT / "plugins" / "aep-bridge-ntfy"


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(ROOT),
            str(NTFY),
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    return target


def run(env: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AEP_BRIDGE", "PYTHON", "VIRTUAL_ENV"))
    }
    return subprocess.run(
        [str(env / "bin" / "aep-bridge"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **extra},
    )


def test_the_installed_plugin_is_listed_as_loaded(fresh_env: Path):
    records = {r["name"]: r for r in json.loads(run(fresh_env, "plugins", "--json").stdout)}
    assert records["ntfy"]["status"] == "loaded"
    assert records["ntfy"]["distribution"] == "aep-bridge-ntfy"
    assert records["ntfy"]["channels"] == ["ntfy"]
    assert records["console"]["builtin"] is True


def test_check_accepts_a_config_that_enables_it_and_never_prints_the_token(
    fresh_env: Path, tmp_path: Path
):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "channels": {
                    "phone": {
                        "type": "ntfy",
                        "topic": "aep-bridge-test-7f3k",
                        "token": "${NTFY_TOKEN}",
                        "public_url": "https://bridge.example.com",
                        "approvers": ["ntfy"],
                    }
                }
            }
        )
    )
    result = run(fresh_env, "check", str(config), NTFY_TOKEN="tk_secret_value_123")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "channels: phone (ntfy)" in result.stdout
    assert "tk_secret_value_123" not in result.stdout + result.stderr
    missing = run(fresh_env, "check", str(config))
    assert missing.returncode == 1
    assert "channels.phone.token: environment variable NTFY_TOKEN is not set" in missing.stdout
