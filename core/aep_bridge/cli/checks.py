"""The commands that look at a config without running the bridge: `check`, `doctor`,
`plugins` and `config path`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from ..commands.doctor import check_channel
from ..config import env_file
from ..config.config import (
    CONFIG_ENV,
    BridgeConfig,
    ChannelPlan,
    ConfigError,
    config_path,
    default_config_path,
    resolve_channels,
)
from ..contract.plugins import PluginHost
from ..text.scrub import scrub, secrets_in
from ..text.terminal import visible
from .common import EXIT_OK, EXIT_VIOLATIONS, load


def check(config_file: str | None, *, out: TextIO | None = None) -> int:
    """Validate a config as `run` would use it; exit 1 if anything must be fixed."""
    out = out or sys.stdout
    if (planned := _planned(config_file, out)) is None:
        return EXIT_VIOLATIONS
    config, plan, secrets = planned
    source = config_file or str(config_path(None) or "embedded defaults")
    for problem in plan.problems:
        print(scrub(f"{source}: error: {problem}", secrets), file=out)
    for warning in plan.warnings:
        print(scrub(f"{source}: warning: {warning}", secrets), file=out)
    if plan.problems:
        print(f"{source}: {len(plan.problems)} problem(s) to fix", file=out)
        return EXIT_VIOLATIONS
    names = ", ".join(f"{c.name} ({c.registration.name})" for c in plan.channels) or "none"
    names = visible(names, one_line=True)  # a channel's name is a key of the config's
    print(
        f"{source}: ok: listening on {config.listen.host}:{config.listen.port}; channels: {names}",
        file=out,
    )
    return EXIT_OK


def _planned(
    config_file: str | None, out: TextIO
) -> tuple[BridgeConfig, ChannelPlan, list[str]] | None:
    """What `check` and `doctor` look at: the config as `run` reads it (the secrets the
    wizards saved in the env file too), its channels' plan, and the secrets they keep out of
    what they print (`scrub`: every secret field of the config and of each channel's
    config). None, the reason printed, when the config cannot be read."""
    env_file.load()
    try:
        config, host = load(config_file)
    except ConfigError as exc:
        print(exc, file=out)
        return None
    plan = resolve_channels(config, host)
    return config, plan, secrets_in(config, *(resolved.config for resolved in plan.channels))


def doctor(config_file: str | None, *, out: TextIO | None = None) -> int:
    """Check each channel's platform side (token, chat, rights) without running the bridge;
    print every check and the fix for each failure. Exit 1 if anything must be fixed."""
    out = out or sys.stdout
    if (planned := _planned(config_file, out)) is None:
        return EXIT_VIOLATIONS
    _, plan, secrets = planned
    failed = len(plan.problems)
    for problem in plan.problems:
        print(scrub(f"config: {problem}", secrets), file=out)
    for resolved in plan.channels:
        failures, lines = asyncio.run(check_channel(resolved))
        failed += failures
        for line in lines:  # each a line: a name or a platform's words cannot add one
            print(visible(scrub(line, secrets), one_line=True), file=out)
    if failed:
        print(f"{failed} problem(s) to fix", file=out)
        return EXIT_VIOLATIONS
    print("everything checked is ok", file=out)
    return EXIT_OK


def plugins(*, as_json: bool = False, out: TextIO | None = None) -> int:
    """List the plugins found, where they come from, and whether they loaded."""
    out = out or sys.stdout
    host = PluginHost()
    host.load()
    if as_json:
        json.dump(
            [
                {
                    "name": r.name,
                    "module": r.module,
                    "distribution": r.distribution,
                    "version": r.version,
                    "status": r.status,
                    "error": r.error,
                    "channels": r.channels,
                    "builtin": r.builtin,
                }
                for r in host.records
            ],
            out,
            indent=2,
        )
        out.write("\n")
        return EXIT_OK
    if not host.records:
        print("no plugins found", file=out)
    for r in host.records:
        origin = f"{r.distribution} {r.version}" if r.distribution else r.module
        kind = "built-in" if r.builtin else "plugin"
        if r.status == "loaded":
            print(
                f"{r.name}: loaded ({kind}, {origin}); channels: {', '.join(r.channels)}", file=out
            )
        else:
            print(f"{r.name}: FAILED ({kind}, {origin}): {r.error}", file=out)
    return EXIT_OK


def show_config_path(
    config_file: str | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Print the config file the other commands would read; say on stderr where that choice
    comes from and whether the file exists."""
    out = out or sys.stdout
    err = err or sys.stderr
    chosen = config_file or os.environ.get(CONFIG_ENV)
    if config_file:
        path, origin = Path(config_file).expanduser(), "--config"
    elif chosen:
        path, origin = Path(chosen).expanduser(), f"${CONFIG_ENV}"
    else:
        path, origin = default_config_path(), "the default location"
    print(path, file=out)
    if path.exists():
        print(f"aep-bridge config path: exists (from {origin})", file=err)
    elif chosen:
        print(
            f"aep-bridge config path: does not exist (from {origin}): "
            "the commands that read it will say they cannot",
            file=err,
        )
    else:
        print(
            "aep-bridge config path: does not exist (the default location): the built-in "
            "defaults apply until you create it",
            file=err,
        )
    return EXIT_OK
