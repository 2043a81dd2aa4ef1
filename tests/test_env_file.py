"""`aep-bridge run` reads `~/.config/aep-bridge/env`, the file the setup wizards keep tokens in
(and the systemd unit loads): what the wizard wrote comes back as it was given, a variable
already in the environment wins, and a line that cannot be read is named without its value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from aep_bridge.commands.setup_command import ENV_FILE, FileSetupContext
from aep_bridge.config import env_file
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.contract.wizard import SetupIO
from tests.bridge_process import BridgeProcess, free_port

#: values a person may paste: spaces, quotes of both kinds, `$`, `#`, `=`, a backslash
AWKWARD = ["123:AAE-simple_token", 'it\'s a "quoted" $HOME #not-a-comment = \\n', "", "  pad  "]


def wizard_wrote(env: Path, values: dict[str, str]) -> None:
    """The env file as `aep-bridge setup` writes it (`FileSetupContext.save_secret`)."""
    context = FileSetupContext(
        wizard=None,  # type: ignore[arg-type]  # save_secret needs neither
        host=PluginHost(),
        channel="x",
        config_path=env.parent / "config.json",
        env_file=env,
        io=SetupIO(),
        options={},
    )
    for name, value in values.items():
        context.save_secret(name, value)


def test_what_the_wizard_saved_is_read_back_as_given(tmp_path: Path):
    env = tmp_path / "env"
    given = {f"TOKEN_{i}": value for i, value in enumerate(AWKWARD)}
    wizard_wrote(env, given)
    assert env.name == ENV_FILE == env_file.ENV_FILE
    environ: dict[str, str] = {}
    loaded = env_file.load(environ, env)
    assert environ == given
    assert loaded.set == list(given)


def test_the_environment_wins_and_bad_lines_are_named_without_their_value(tmp_path, caplog):
    env = tmp_path / "env"
    env.write_text(
        "# saved by aep-bridge setup\n"
        "KEPT=from-the-file\n"
        "this line leaks-secret-1\n"
        "BROKEN='unclosed leaks-secret-2\n"
        "\n"
        "ADDED=yes\n"
    )
    env.chmod(0o600)
    environ = {"KEPT": "from-the-environment"}
    with caplog.at_level("INFO", logger="aep_bridge"):
        loaded = env_file.load(environ, env)
    assert environ == {"KEPT": "from-the-environment", "ADDED": "yes"}
    assert loaded.kept == ["KEPT"]
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"env file {env}, line 3: skipped: not NAME=value (NAME: letters, digits and _)",
        f"env file {env}, line 4: skipped: BROKEN: a quote is not closed",
        f"env file {env}: set ADDED (KEPT already set, kept)",
    ]
    assert "leaks-secret" not in caplog.text
    assert "from-the-file" not in caplog.text


def test_a_file_others_can_read_is_said(tmp_path, caplog):
    env = tmp_path / "env"
    env.write_text("A=1\n")
    env.chmod(0o644)
    env_file.load({}, env)
    assert f"env file {env}: other users can read it (mode 644)" in caplog.text


async def test_run_by_hand_uses_the_env_file(tmp_path: Path):
    """The real bridge, HOME a fresh one whose env file names the host a request may use
    (`listen.allowed_hosts: ["${BRIDGE_NAME}"]`): without the file the config cannot be read;
    with it the bridge serves that name; a value in the environment wins over the file's."""
    port = free_port()
    home = tmp_path / "home"
    folder = home / ".config" / "aep-bridge"
    folder.mkdir(parents=True)
    config = folder / "config.json"
    block = {
        "state_dir": str(tmp_path / "state"),
        "listen": {"port": port, "allowed_hosts": ["${BRIDGE_NAME}"]},
        "channels": {},
    }
    config.write_text(json.dumps(block))
    wizard_wrote(folder / "env", {"BRIDGE_NAME": "from-file.example"})

    class Bridge(BridgeProcess):
        def __init__(self, log: Path, environ: dict[str, str]) -> None:
            super().__init__(config, log, plugins="tests.core.recording_channel")
            self.environ = environ

        def env(self) -> dict[str, str]:
            base = {k: v for k, v in super().env().items() if not k.startswith("XDG_")}
            base.pop("BRIDGE_NAME", None)
            return {**base, "HOME": str(home), **self.environ}

    async def host_allowed(bridge: Bridge, name: str) -> int:
        async with httpx.AsyncClient() as client:
            answer = await client.get(
                f"http://127.0.0.1:{port}/.well-known/aep", headers={"Host": name}
            )
            return answer.status_code

    by_hand = Bridge(tmp_path / "a.log", {})
    await by_hand.start(f"http://127.0.0.1:{port}")
    try:
        assert await host_allowed(by_hand, "from-file.example") == 200
        assert await host_allowed(by_hand, "other.example") != 200
    finally:
        assert by_hand.stop() == 0
    text = by_hand.log.read_text()
    assert f"env file {folder / 'env'}: set BRIDGE_NAME" in text, text

    exported = Bridge(tmp_path / "b.log", {"BRIDGE_NAME": "from-env.example"})
    await exported.start(f"http://127.0.0.1:{port}")
    try:
        assert await host_allowed(exported, "from-env.example") == 200
        assert await host_allowed(exported, "from-file.example") != 200
    finally:
        assert exported.stop() == 0
    assert "from-file.example" not in exported.log.read_text()
    assert os.environ.get("BRIDGE_NAME") is None


def test_check_reads_it_as_run_does(tmp_path: Path):
    """`aep-bridge check` (and `doctor`) check what `run` would use: the env file too."""
    folder = tmp_path / ".config" / "aep-bridge"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"listen": {"allowed_hosts": ["${BRIDGE_NAME}"]}}')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "AEP_BRIDGE_"))}
    env.pop("BRIDGE_NAME", None)

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "aep_bridge", "check"],
            env={**env, "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    before = check()
    assert "BRIDGE_NAME is not set" in before.stdout + before.stderr
    wizard_wrote(folder / "env", {"BRIDGE_NAME": "bridge.example"})
    after = check()
    assert after.returncode == 0, after.stdout + after.stderr
    assert ": ok: listening on" in after.stdout
