"""`aep-bridge install AGENT`: write (or remove) the hook entries that connect an agent.

One command per agent puts `aep-bridge hook AGENT` on every hook the bridge maps into the
project's settings file, merged with what is there; `--uninstall` takes exactly those out.

What was mapped, and where each name comes from:

Claude Code (docs: code.claude.com/docs/en/hooks, the hooks reference for Claude Code
2.1.x, read December 2026). Project hooks live in `.claude/settings.json` under `hooks`: each event
name maps to a list of matcher groups `{"matcher": ..., "hooks": [handler, ...]}`, a handler
being `{"type": "command", "command": ..., "timeout": N}` with `timeout` in seconds (600 by
default for command hooks, "Configuration" and "Hook handler fields"). `"*"`, `""` or no
matcher match everything; a matcher on an event that has none is ignored ("Matcher
patterns"). The 17 events registered are all in that reference's lifecycle table:
SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure,
PermissionRequest, PermissionDenied, Notification, Stop, StopFailure, SubagentStart,
SubagentStop, PreCompact, PostCompact, SessionEnd, Elicitation, ElicitationResult.

Codex (docs: developers.openai.com/codex/hooks, the page as it reads since hooks went
generally available in May 2026, read December 2026; source: openai/codex
`codex-rs/config/src/hook_config.rs`, `codex-rs/hooks/src/engine/discovery.rs` and
`.../events/common.rs`). Project hooks live in
`.codex/hooks.json`, the same shape: `HooksFile {hooks}` of event name to `MatcherGroup
{matcher, hooks}`, a handler `{"type": "command", "command", "timeout"}` (`timeout`, alias
`timeoutSec`, in seconds; `timeout_sec.unwrap_or(600).max(1)`). `"*"` or `""` match all
(`is_match_all_matcher`); UserPromptSubmit, Stop, PreCompact and PostCompact ignore matchers
(`matcher_pattern_for_event`). The ten events registered are the ones issue 18 maps:
SessionStart, UserPromptSubmit, Stop, PreToolUse, PostToolUse, PermissionRequest,
SubagentStart, SubagentStop, PreCompact, PostCompact. Newer Codex also has SessionEnd,
Interrupt and StopFailure; they are not registered, as the Codex mapping has no pin for them.
Hooks are on by default, `[features] hooks = false` (or the older `codex_hooks`) in
`config.toml` turns them off, and a non-managed hook runs only once the person trusted it in
`/hooks`, a trust kept per hook definition (its hash covers the timeout), so `install`
reminds of both.

The mark: an entry is ours when its command starts with `aep-bridge hook ` (`OURS`). The
command is the bare `aep-bridge hook AGENT`, found on PATH, never a path on this machine, so
the file can be committed and shared. Tool hooks get the matcher `"*"`; the other events get
none (all occurrences). Timeouts sit above the hold: PermissionRequest (and Elicitation for
Claude Code) stay open while a human answers, up to the daemon's attention timeout (55 s by
default, `--hold` when it was changed), so they get hold + 10 s; every other hook returns at
once and gets 10 s.

The file: parsed with every key kept in order, written back with its own indentation (2 for
a new file) and its own trailing newline, atomically (a temporary file beside it, then
`os.replace`), keeping its mode; a file that is not JSON is refused untouched. Uninstall
removes our handlers, then each group, event list and `hooks` object that removing them left
empty, and the file itself when nothing is left in it (and the folder, when install made it
and it is empty), so an install followed by an uninstall gives back the bytes there were.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import shutil
import stat
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from ..config.config_write import ConfigWriteError, indent_of, target_path
from ..process.exit_status import EXIT_OK, EXIT_USAGE
from . import capture_choice
from .login import LoginError
from .login import load as load_login
from .shim import (
    BLOCK_CAP_VARIABLE,
    DEFAULT_HOLD,  # how long a held hook waits for a human by default
    MAX_HOLD,
)

#: Added to the hold, so the agent never kills a hook that is still waiting for its answer.
HOLD_MARGIN: Final = 10
#: Instructions in a row from the chat Claude Code takes with no tool call between them
#: (its own default is 8: a long conversation from the phone would end there).
STEER_BLOCK_CAP: Final = 100
#: Every hook that does not wait for a person returns within this.
SHORT_TIMEOUT: Final = 10
#: Every command we write starts so, and only ours do: uninstall finds exactly these.
OURS: Final = "aep-bridge hook "

#: a refused change: the file is left as it was
EXIT_REFUSED: Final = EXIT_USAGE


@dataclass(frozen=True, slots=True)
class Agent:
    """Where an agent keeps its project hooks, and which of its events we register."""

    name: str
    title: str
    folder: str
    file: str
    #: event name -> matcher (None: no matcher, every occurrence)
    events: dict[str, str | None]
    #: the events whose hook stays open while a human answers
    held: frozenset[str]
    #: the events whose hook is held while the person is away, as long as the bridge says
    steered: frozenset[str] = frozenset()
    #: settings `env` entries the steered hooks need (kept as the person set them)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        return OURS + self.name

    def relative(self) -> Path:
        return Path(self.folder) / self.file


CLAUDE_CODE: Final = Agent(
    name="claude-code",
    title="Claude Code",
    folder=".claude",
    file="settings.json",
    events={
        "SessionStart": None,
        "UserPromptSubmit": None,
        "PreToolUse": "*",
        "PostToolUse": "*",
        "PostToolUseFailure": "*",
        "PermissionRequest": "*",
        "PermissionDenied": "*",
        "Notification": None,
        "Stop": None,
        "StopFailure": None,
        "SubagentStart": None,
        "SubagentStop": None,
        "PreCompact": None,
        "PostCompact": None,
        "SessionEnd": None,
        "Elicitation": None,
        "ElicitationResult": None,
    },
    held=frozenset({"PermissionRequest", "Elicitation"}),
    steered=frozenset({"Stop"}),
    env={BLOCK_CAP_VARIABLE: str(STEER_BLOCK_CAP)},
)

CODEX: Final = Agent(
    name="codex",
    title="Codex",
    folder=".codex",
    file="hooks.json",
    events={
        "SessionStart": None,
        "UserPromptSubmit": None,
        "PreToolUse": "*",
        "PermissionRequest": "*",
        "PostToolUse": "*",
        "SubagentStart": None,
        "SubagentStop": None,
        "PreCompact": None,
        "PostCompact": None,
        "Stop": None,
    },
    held=frozenset({"PermissionRequest"}),
    # held while away (issue 33); Codex counts no blocks in a row, so no `env` is needed
    steered=frozenset({"Stop"}),
)

AGENTS: Final = {agent.name: agent for agent in (CLAUDE_CODE, CODEX)}


class Refused(Exception):
    """The file cannot be changed safely; the message names it and says what is wrong."""


def command_for(agent: Agent, event: str, hold: float) -> str:
    """The hook's command: a held hook is told a hold other than the default (the daemon
    holds its prompt that long, and the hook waits for it)."""
    if event in agent.held and hold != DEFAULT_HOLD:
        return f"{agent.command} --hold {hold:g}"
    return agent.command


def timeout_for(agent: Agent, event: str, hold: float) -> int:
    """Seconds the agent may let this event's hook run: above the hold for a held one, above
    the longest hold the bridge may name for a steered one (a Stop, while away)."""
    if event in agent.steered:
        return math.ceil(MAX_HOLD) + HOLD_MARGIN
    return math.ceil(hold) + HOLD_MARGIN if event in agent.held else SHORT_TIMEOUT


def is_ours(handler: object) -> bool:
    """A handler this command wrote (its command starts with `aep-bridge hook `)."""
    if not isinstance(handler, dict):
        return False
    command = handler.get("command")
    return isinstance(command, str) and command.startswith(OURS)


@dataclass(slots=True)
class Change:
    """What a merge or a removal did, counted in handlers."""

    added: int = 0
    updated: int = 0
    removed: int = 0
    kept: int = 0
    events: list[str] = field(default_factory=list)
    #: `env` entries added (install) or removed (uninstall)
    env: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.env)


def merge(doc: dict[str, Any], agent: Agent, hold: float, where: str) -> Change:
    """Put one handler of ours on each of the agent's events, in place; keep everything else.

    Idempotent: a handler of ours already there gets the wanted type, command and timeout
    (counted as updated if one differed), a second one of ours on the same event is removed,
    and ours on an event no longer registered are removed.
    """
    change = Change()
    hooks = doc.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise Refused(f"{where}: `hooks` is not an object; fix it or move the file aside")
    for event, matcher in agent.events.items():
        wanted: dict[str, Any] = {
            "type": "command",
            "command": command_for(agent, event, hold),
            "timeout": timeout_for(agent, event, hold),
        }
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise Refused(f"{where}: `hooks.{event}` is not a list; fix it or move the file aside")
        found = _ours_in(groups)
        if not found:
            group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
            group["hooks"] = [wanted]
            groups.append(group)
            change.added += 1
        else:
            handler = found[0][1]
            if any(handler.get(key) != value for key, value in wanted.items()):
                handler.update(wanted)
                change.updated += 1
            else:
                change.kept += 1
            change.removed += _remove(groups, skip=handler)
        change.events.append(event)
    for event in [name for name in hooks if name not in agent.events]:
        groups = hooks[event]
        if isinstance(groups, list):
            removed = _remove(groups)
            change.removed += removed
            if removed and not groups:
                del hooks[event]
    if agent.env:
        env = doc.setdefault("env", {})
        if not isinstance(env, dict):
            raise Refused(f"{where}: `env` is not an object; fix it or move the file aside")
        for key, value in agent.env.items():
            if key not in env:  # a value the person set stays theirs
                env[key] = value
                change.env.append(key)
    return change


def remove(doc: dict[str, Any], env: dict[str, str] | None = None) -> Change:
    """Take every handler of ours out, in place, and what removing them left empty; and the
    `env` entries install wrote (`env`: the agent's), where they still have its value."""
    change = Change()
    settings = doc.get("env")
    if env and isinstance(settings, dict):
        for key, value in env.items():
            if settings.get(key) == value:
                del settings[key]
                change.env.append(key)
        if change.env and not settings:
            del doc["env"]
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return change
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        removed = _remove(groups)
        if removed:
            change.removed += removed
            change.events.append(event)
            if not groups:
                del hooks[event]
    if change.removed and not hooks:
        del doc["hooks"]
    return change


def _ours_in(groups: list[Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (group, handler)
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for handler in group["hooks"]
        if is_ours(handler)
    ]


def _remove(groups: list[Any], skip: object = None) -> int:
    """Remove our handlers (but `skip`) from `groups`, and each group that left empty."""
    removed = 0
    for group in list(groups):
        if not (isinstance(group, dict) and isinstance(group.get("hooks"), list)):
            continue
        handlers = group["hooks"]
        mine = [h for h in handlers if is_ours(h) and h is not skip]
        if not mine:
            continue
        handlers[:] = [h for h in handlers if not any(h is m for m in mine)]
        removed += len(mine)
        if not handlers:
            groups[:] = [g for g in groups if g is not group]
    return removed


# -- the file ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Loaded:
    """A settings file as read: its object, its bytes (None: absent) and its layout."""

    doc: dict[str, Any]
    raw: bytes | None
    indent: str = "  "
    newline: bool = True


def load(path: Path, where: str) -> Loaded:
    """Read `path` (absent: an empty object); refuse what is not a JSON object."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Loaded({}, None)
    except OSError as exc:
        raise Refused(f"cannot read {where}: {exc.strerror}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Refused(f"{where} is not UTF-8 text; nothing was changed") from exc
    if not text.strip():
        return Loaded({}, raw, newline=text.endswith("\n") or not text)
    try:
        doc = json.loads(text, object_pairs_hook=_no_repeats)
    except json.JSONDecodeError as exc:
        raise Refused(
            f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix it or move it aside, nothing was changed"
        ) from exc
    except _Repeated as exc:
        raise Refused(
            f"{where} has the key {exc.args[0]!r} twice in one object, and only one would "
            "be kept; fix it, nothing was changed"
        ) from exc
    if not isinstance(doc, dict):
        raise Refused(
            f"{where} holds a JSON {type(doc).__name__}, not an object; nothing was changed"
        )
    return Loaded(doc, raw, indent_of(text), text.endswith("\n"))


class _Repeated(Exception):
    pass


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Repeated(key)
        out[key] = value
    return out


def render(doc: dict[str, Any], loaded: Loaded) -> bytes:
    text = json.dumps(doc, indent=loaded.indent, ensure_ascii=False)
    return (text + ("\n" if loaded.newline else "")).encode("utf-8")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` at once: a reader sees the old file or the new, never half.

    The target of a symlink is replaced, not the link; an existing file keeps its mode, a new
    one gets 0666 less the umask, as any editor would make it.
    """
    target = Path(os.path.realpath(path))
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


# -- the command ---------------------------------------------------------------------------


def project_root(start: Path) -> Path:
    """The git work tree `start` is in (its top level), else `start` itself."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _hooks(n: int) -> str:
    return f"{n} hook" if n == 1 else f"{n} hooks"


def main(
    agent_name: str,
    *,
    project: str | os.PathLike[str] | None = None,
    uninstall: bool = False,
    hold: float | None = None,
    capture: str | None = None,
    config: str | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Install (or uninstall) `agent_name`'s hooks in a project; 0 when done, 2 if refused.

    An install also settles what the chat may see (`capture_choice`): `capture`, else the
    config's `agents.capture`, else a question on a terminal."""
    out = out or sys.stdout
    err = err or sys.stderr
    stdin = stdin or sys.stdin
    agent = AGENTS[agent_name]
    cwd = Path.cwd()
    hold = DEFAULT_HOLD if hold is None else hold
    if not math.isfinite(hold) or hold <= 0:
        print(
            f"aep-bridge install: --hold must be a number of seconds above 0, not {hold}", file=err
        )
        return EXIT_REFUSED
    root = Path(project).expanduser().absolute() if project is not None else project_root(cwd)
    if not root.is_dir():
        print(f"aep-bridge install: {root} is not a folder", file=err)
        return EXIT_REFUSED
    path = root / agent.relative()
    where = _shown(path, cwd)
    try:
        loaded = load(path, where)
        if uninstall:
            return _uninstall(agent, path, where, loaded, out)
        done = _install(agent, path, where, loaded, hold, out, err)
    except Refused as refused:
        print(f"aep-bridge install: {refused}", file=err)
        return EXIT_REFUSED
    except OSError as exc:
        print(f"aep-bridge install: cannot write {where}: {exc.strerror}", file=err)
        return EXIT_REFUSED
    return done if done != EXIT_OK else _capture(capture, config, stdin, out, err)


def _capture(flag: str | None, config: str | None, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """Ask (or take `--capture`) what the chat may see, and write it into the config."""

    def ask(prompt: str) -> str:
        out.write(prompt)
        out.flush()
        return stdin.readline()

    def say(line: str) -> None:
        print(line, file=out)

    try:
        path = target_path(config)
        chosen = capture_choice.choose(path, flag, interactive=stdin.isatty(), ask=ask, say=say)
        if chosen is not None:
            capture_choice.write(path, chosen, say)
    except (ConfigWriteError, OSError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        # asked for (`--capture`): a failure; else only a warning, the hooks are what was asked
        warning = "" if flag is not None else "warning: "
        print(f"aep-bridge install: {warning}the hooks are in place, but {why}", file=err)
        return EXIT_REFUSED if flag is not None else EXIT_OK
    return EXIT_OK


def _install(
    agent: Agent, path: Path, where: str, loaded: Loaded, hold: float, out: TextIO, err: TextIO
) -> int:
    change = merge(loaded.doc, agent, hold, where)
    held = [event for event in agent.events if event in agent.held]
    timing = (
        f"{' and '.join(held)} {'wait' if len(held) > 1 else 'waits'} up to "
        f"{timeout_for(agent, held[0], hold)} s for an answer, the others {SHORT_TIMEOUT} s"
    )
    steered = [event for event in agent.events if event in agent.steered]
    if steered:
        timing += (
            f"; {' and '.join(steered)} up to {timeout_for(agent, steered[0], hold)} s "
            "while you are away"
        )
    if change.changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, render(loaded.doc, loaded))
        done = [
            part
            for part in (
                f"added {_hooks(change.added)}" if change.added else "",
                f"updated {_hooks(change.updated)}" if change.updated else "",
                f"removed {_hooks(change.removed)} no longer used" if change.removed else "",
                f"set {', '.join(f'env.{key}' for key in change.env)}" if change.env else "",
            )
            if part
        ]
        into = "to" if len(done) == 1 and change.added else "in"
        print(f"{', '.join(done)} {into} {where} ({timing})", file=out)
    else:
        print(
            f"{where} has the {_hooks(change.kept)} already ({timing}); nothing changed", file=out
        )
    if shutil.which("aep-bridge") is None:
        print(
            f"aep-bridge install: warning: aep-bridge is not on this PATH, and {agent.title} "
            "runs `aep-bridge hook ...` from its PATH: install it where the agent finds it "
            "(pipx install, or the virtualenv's bin folder on PATH)",
            file=err,
        )
    _say_bridge(out, err)
    if agent is CODEX:
        for line in _codex_reminders(change):
            print(line, file=out)
    return EXIT_OK


def _say_bridge(out: TextIO, err: TextIO) -> None:
    """Where the hooks' daemon will send, when `agent login` chose a bridge elsewhere; a
    login the daemon would refuse is said now, not at the agent's first hook."""
    try:
        stored = load_login()
    except LoginError as exc:
        print(f"aep-bridge install: warning: the agent daemon cannot start: {exc}", file=err)
        return
    if stored is not None:
        print(f"the agent daemon sends to {stored.url} (aep-bridge agent login)", file=out)


def _uninstall(agent: Agent, path: Path, where: str, loaded: Loaded, out: TextIO) -> int:
    if loaded.raw is None:
        print(f"{where} does not exist; nothing to remove", file=out)
        return EXIT_OK
    change = remove(loaded.doc, agent.env)
    if not change.changed:
        print(f"{where} has no aep-bridge hooks; nothing changed", file=out)
        return EXIT_OK
    if loaded.doc or path.is_symlink():
        write_atomically(path, render(loaded.doc, loaded))
        print(f"removed {_removed(change)} from {where}", file=out)
        return EXIT_OK
    path.unlink()
    with contextlib.suppress(OSError):  # removed only when empty: install may have made it
        path.parent.rmdir()
    print(
        f"removed {_removed(change)} from {where}, which held nothing else: deleted it",
        file=out,
    )
    return EXIT_OK


def _removed(change: Change) -> str:
    env = [f"env.{key}" for key in change.env]
    return " and ".join([_hooks(change.removed), *env] if change.removed else env)


def codex_home() -> Path:
    """Where Codex keeps its user config: $CODEX_HOME, else ~/.codex."""
    home = os.environ.get("CODEX_HOME")
    return Path(home).expanduser() if home else Path.home() / ".codex"


def _codex_reminders(change: Change) -> list[str]:
    """What Codex still needs before it runs the hooks: them turned on, and trusted."""
    lines: list[str] = []
    config = codex_home() / "config.toml"
    try:
        features = tomllib.loads(config.read_text(encoding="utf-8")).get("features", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        features = {}
    if isinstance(features, dict):
        for key in ("hooks", "codex_hooks"):
            if features.get(key) is False:
                lines.append(
                    f"Codex has hooks turned off in {config} ([features] {key} = false): "
                    "set it to true, or Codex runs none of them"
                )
    if change.changed:
        lines.append(
            "Codex runs a project's hooks only once you trust them: start codex in this "
            "project, open /hooks and trust the aep-bridge hooks (a changed hook needs it "
            "again). Codex older than the release that turned hooks on by default also needs "
            "[features] codex_hooks = true in ~/.codex/config.toml"
        )
    return lines
