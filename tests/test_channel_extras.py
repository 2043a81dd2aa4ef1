"""A channel is one command away: `make run` installs every built channel's extra, and a
command that meets a channel whose platform SDK is missing names the extra and the exact
command that installs it here (a clone's `make run` or its .venv's pip, or pip).

The missing SDK is made so in a subprocess: `sys.modules[name] = None` makes its import fail
as an absent package's does (ModuleNotFoundError), whatever this machine has installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from aep_bridge.contract import install_hint
from tests.bridge_process import ROOT

#: each extra's platform module, as the channel package imports it
SDK_MODULE = {
    "telegram": "telegram",
    "discord": "discord",
    "slack": "slack_sdk",
    "matrix": "mautrix",
}


def _built_extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"]) - {"dev", "all"}


def test_every_extra_is_a_known_sdk_module():
    assert set(SDK_MODULE) == _built_extras()


def test_make_run_installs_every_built_channels_extra(tmp_path):
    """What `make run` would install into a fresh .venv (`make -n` prints it, runs nothing)."""
    venv = tmp_path / "venv"
    planned = subprocess.run(
        ["make", "-n", "-C", str(ROOT), f"VENV={venv}", f"{venv}/.installed-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert planned.returncode == 0, planned.stderr
    installs = re.findall(r"-e '\.\[([^\]]*)\]'", planned.stdout)
    assert installs, planned.stdout
    assert set(installs[0].split(",")) >= _built_extras(), planned.stdout
    assert not venv.exists()


def _blocked(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`aep-bridge ARGS` with `module` unimportable, in a fresh HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AEP_BRIDGE")}
    env |= {"HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd / "xdg")}
    code = (
        "import sys; sys.modules[sys.argv[1]] = None; "
        "from aep_bridge.launch import main; raise SystemExit(main(sys.argv[2:]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, module, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize("extra", sorted(SDK_MODULE))
def test_preview_of_a_channel_without_its_sdk_names_the_extra_and_the_command(tmp_path, extra):
    done = _blocked(SDK_MODULE[extra], "preview", "--demo", "--channel", extra, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"the {extra} channel needs the '{SDK_MODULE[extra]}" in done.stderr
    assert f"install the {extra} extra: {install_hint.command(extra)}" in done.stderr
    assert f"[{extra}]'" in done.stderr
    assert not list(tmp_path.glob("*.html"))


def test_check_of_a_config_with_a_channel_without_its_sdk_names_the_extra(tmp_path):
    config = tmp_path / "config.json"
    channels = {"team": {"type": "discord"}}
    config.write_text(json.dumps({"state_dir": str(tmp_path / "state"), "channels": channels}))
    done = _blocked("discord", "check", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "channels.team.type" in done.stdout
    assert f"install the discord extra: {install_hint.command('discord')}" in done.stdout


def test_this_checkouts_command_is_make_run_or_its_venvs_pip():
    """The suite runs in the clone's .venv that `make` made: the fix offered is the clone's."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("not run from the clone's .venv")
    assert install_hint.command("discord") == (
        f"in the clone {ROOT}, run `make run` (it installs every channel's extra) "
        "or `.venv/bin/pip install -e '.[discord]'`"
    )


def test_the_command_fits_each_kind_of_install(tmp_path):
    clone = tmp_path / "clone"
    (clone / ".venv").mkdir(parents=True)
    (clone / "Makefile").write_text("run:\n")
    in_clone = install_hint.Install(clone, clone / ".venv")
    assert "`make run`" in install_hint.command("slack", in_clone)
    assert "`.venv/bin/pip install -e '.[slack]'`" in install_hint.command("slack", in_clone)
    elsewhere = install_hint.Install(clone, tmp_path / "env")
    assert install_hint.command("slack", elsewhere) == (
        f"run `{tmp_path / 'env' / 'bin' / 'pip'} install -e '{clone}[slack]'`"
    )
    pipx = install_hint.Install(None, tmp_path / "pipx" / "venvs" / "aep-bridge")
    assert install_hint.command("slack", pipx) == (
        "run `pipx runpip aep-bridge install 'aep-bridge[slack]'`"
    )
    plain = install_hint.Install(None, tmp_path / "env")
    assert install_hint.command("slack", plain) == "run `pip install 'aep-bridge[slack]'`"
