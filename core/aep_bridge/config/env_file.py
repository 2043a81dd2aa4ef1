"""`~/.config/aep-bridge/env`, read by `aep-bridge run` as the systemd unit reads it.

The setup wizards keep the secrets they are given there (`VAR=value` lines, the value quoted
as a shell word, mode 0600), and the systemd unit loads it (`EnvironmentFile=`). `run` started
by hand reads it too, so a token the wizard saved works without `set -a; . env`. A variable
already in the environment wins over the file. Values are never logged: a line that cannot be
read is named by its number and what is wrong with it, never by its content.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import stat
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from .config import default_config_path

log = logging.getLogger("aep_bridge")

#: the file's name beside the default config (`setup_command.ENV_FILE` writes it)
ENV_FILE: Final = "env"
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def env_file_path() -> Path:
    """`$XDG_CONFIG_HOME/aep-bridge/env`, else `~/.config/aep-bridge/env`."""
    return default_config_path().parent / ENV_FILE


@dataclass
class EnvFile:
    """What a file says: its variables in order, and its unreadable lines (number, why)."""

    values: dict[str, str] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)


def parse(text: str) -> EnvFile:
    """Parse systemd `EnvironmentFile` lines: `NAME=value`, blank lines and `#`/`;` comments;
    a value quoted with `'` or `"` is unquoted as a shell word (what the wizards write), an
    unquoted one is taken as it stands, without its surrounding spaces."""
    parsed = EnvFile()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        name, equals, rest = line.partition("=")
        name = name.strip()
        if not equals or not _NAME.fullmatch(name):
            parsed.problems.append((number, "not NAME=value (NAME: letters, digits and _)"))
            continue
        value = rest.strip()
        if value.startswith(("'", '"')):
            try:
                words = shlex.split(value, comments=False, posix=True)
            except ValueError:
                parsed.problems.append((number, f"{name}: a quote is not closed"))
                continue
            if len(words) != 1:
                parsed.problems.append((number, f"{name}: the value is not one quoted word"))
                continue
            value = words[0]
        parsed.values[name] = value
    return parsed


@dataclass
class Loaded:
    """What `load` did: the file read (None when there is none), the names it set, and the
    names the environment already had (which it left alone)."""

    path: Path | None
    set: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def load(environ: MutableMapping[str, str] | None = None, path: Path | None = None) -> Loaded:
    """Set each variable of the env file that `environ` (the process's environment) does not
    have; log, in one line each, what was set (names only) and each line that cannot be read."""
    env: MutableMapping[str, str] = os.environ if environ is None else environ
    path = env_file_path() if path is None else path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Loaded(None)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        log.warning("env file %s: not read (%s)", path, reason)
        return Loaded(None)
    _warn_if_shared(path)
    parsed = parse(text)
    for number, why in parsed.problems:
        log.warning("env file %s, line %d: skipped: %s", path, number, why)
    loaded = Loaded(path)
    for name, value in parsed.values.items():
        if name in env:
            loaded.kept.append(name)
        else:
            env[name] = value
            loaded.set.append(name)
    if loaded.set:
        log.info(
            "env file %s: set %s%s",
            path,
            ", ".join(loaded.set),
            f" ({', '.join(loaded.kept)} already set, kept)" if loaded.kept else "",
        )
    return loaded


def _warn_if_shared(path: Path) -> None:
    """The file holds tokens: other users must not read it (the wizards make it 0600)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "env file %s: other users can read it (mode %s); it holds secrets: chmod 600 %s",
            path,
            f"{stat.S_IMODE(mode):o}",
            path,
        )


__all__ = ["ENV_FILE", "EnvFile", "Loaded", "env_file_path", "load", "parse"]
