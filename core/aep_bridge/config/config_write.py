"""Set one key of the config file and keep the rest: every other key, its order and the
file's indentation.

What `aep-bridge install --capture` (and the setup wizards' capture question) write with.
A file that does not exist yet starts from the defaults the bridge runs with when there is
none (`EMBEDDED_DEFAULTS`: the console and web channels), so writing one key never takes
away what ran before. A file that is not a JSON object is refused untouched, naming the
file and what is wrong. The write is atomic (a temporary file beside it, then a rename); an
existing file keeps its mode, a new one is its owner's only (it may come to hold channel
settings).
"""

from __future__ import annotations

import copy
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import CONFIG_ENV, EMBEDDED_DEFAULTS, default_config_path


class ConfigWriteError(Exception):
    """The file cannot be changed safely; the message names it and says the fix."""


def target_path(explicit: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The file to write: `--config`, else `$AEP_BRIDGE_CONFIG`, else the default location
    (which need not exist yet), as `aep-bridge setup` writes."""
    env = os.environ if environ is None else environ
    chosen = explicit or env.get(CONFIG_ENV)
    return Path(chosen).expanduser() if chosen else default_config_path(env)


def read_object(path: Path) -> dict[str, Any] | None:
    """The config file as a JSON object, None when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigWriteError(f"cannot read {path}: {why}") from None
    if not text.strip():
        return {}
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigWriteError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}): "
            "fix it, or pass --config to write another file; nothing was changed"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigWriteError(f"{path} is not a JSON object: fix it first; nothing was changed")
    return raw


def get_key(path: Path, key: Sequence[str]) -> Any:
    """The value at `key` (`("agents", "capture")`) written in the file, None if not there."""
    node: Any = read_object(path)
    for part in key:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def set_key(path: Path, key: Sequence[str], value: Any) -> bool:
    """Write `value` at `key` in the config file at `path`, keeping everything else; returns
    whether the file changed (False: it held that value already)."""
    raw = read_object(path)
    existed = raw is not None
    doc: dict[str, Any] = copy.deepcopy(EMBEDDED_DEFAULTS) if raw is None else raw
    node = doc
    for depth, part in enumerate(key[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(key[: depth + 1])
            raise ConfigWriteError(
                f"{path}: {where} is not an object: fix it first; nothing was changed"
            )
        node = child
    if existed and key[-1] in node and node[key[-1]] == value:
        return False
    node[key[-1]] = value
    indent = indent_of(path.read_text(encoding="utf-8")) if existed else "  "
    write_private(path, json.dumps(doc, indent=indent, ensure_ascii=False) + "\n")
    return True


def indent_of(text: str) -> str:
    """The file's own indentation: the leading blanks of its first indented line."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            return line[: len(line) - len(stripped)]
    return "  "


def write_private(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace the file at once (a reader sees the old or the new), through a temporary of a
    fresh name (O_EXCL); the target of a symlink is written, not the link. An existing file
    keeps its mode unless `mode`; a new one is its owner's only. The config file, the env
    file of tokens (setup) and the capture choice are written with it."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        keep = target.stat().st_mode & 0o777
    except FileNotFoundError:
        keep = 0o600
    final = keep if mode is None else mode
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, final)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
