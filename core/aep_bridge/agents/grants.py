"""The "for this session" options of a permission card: what each grants, and its label.

A button grants exactly what its label says (issue 30). Claude Code sends the "always
allow" choices its own dialog would show as `permission_suggestions`, and "a hook can echo
one of the permission_suggestions it received as its own updatedPermissions output"
(hooks reference, "Permission update entries"). So each offered option stands for ONE of
those suggestions, re-scoped to `destination: "session"` and rebuilt from the fields the
reference lists (nothing else in the entry is echoed), and its label names what it grants:

- an `addRules` allow rule for the requested tool only: "Allow Bash(npm test:*) for this
  session" (option `allow_session`);
- a `setMode`: "Allow and switch this session to acceptEdits mode" (`allow_mode_<mode>`);
  `bypassPermissions` is never offered (it would switch off every later prompt, this
  card's included: choose it at the terminal), nor `auto` (Claude Code's classifier would
  answer the later prompts instead of a person, and it is not in the reference's list);
- an `addDirectories`: "Allow and add folder /etc for this session" (`allow_directories`).

The first suggestion of each kind that fits is offered, in that order. A suggestion that
does not fit is not offered at all, never shortened: a rule for another tool, a deny or
ask rule, `replaceRules`, `removeRules`, `removeDirectories`, more than `MAX_ENTRIES`
rules or folders, text with a control or format character (a newline, a bidi override,
a zero-width space) or with runs of spaces the card would fold, and any label longer than
`MAX_GRANT_LABEL`, the longest a card shows whole. Without a suggestion that fits, the card
has no "for this session" option: the bridge never makes a rule up.

At a `metadata` attention ceiling the agent's words never leave the machine (AEP-0003
§9.2): the label names the kind of grant from structure alone ("Allow a rule for this
session", the mode, which is one of a fixed list, "Allow and add a folder for this
session"); the bridge shows the option's id there. At `redacted` the label passes the
redaction pipeline like the prompt, and a label the pipeline changes at all is left out:
`rm -rf /home/bob:*` shown as `rm -rf ~:*` would read as the approver's own home, and
`[REDACTED:pii]` names nothing, while pressing would grant the real rule.

Codex's hook answer has no session rule (`updatedPermissions` is reserved and fails
closed): its one option is the daemon's own rule, "Allow this exact call for this session"
(codex.py, `session_rule_key`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..aep.registry import CAPTURE_RANK
from .mapping import ALLOW, ALLOW_SESSION, Ceiling, text_of

#: the longest label a card shows whole (render.helpers.MAX_LABEL; a test holds them equal)
MAX_GRANT_LABEL: Final = 64
#: the most rules (or folders) one offered suggestion may carry
MAX_ENTRIES: Final = 4
#: the option of a suggestion that adds working folders
ALLOW_DIRECTORIES: Final = "allow_directories"
#: the option of a suggestion that switches the session's mode is this plus the mode
ALLOW_MODE: Final = "allow_mode_"
#: the modes a button may switch a session to: the hooks reference's list, never
#: `bypassPermissions` (no later prompt would be asked) nor `auto` (later prompts would go
#: to Claude Code's classifier, not to a person: the card would hand its own job away)
OFFERED_MODES: Final = ("acceptEdits", "default", "dontAsk", "plan")
_WORDS: Final = CAPTURE_RANK["redacted"]


@dataclass(frozen=True, slots=True)
class Grant:
    """One "for this session" option: its id, its label, and what pressing it returns.

    `update` is the one `updatedPermissions` entry Claude Code gets; None for Codex, whose
    rule the daemon keeps. `structural` is the label at a `metadata` ceiling."""

    option: str
    label: str
    structural: str
    update: dict[str, Any] | None = None


def _clean(value: Any, limit: int = MAX_GRANT_LABEL) -> str | None:
    """`value` when a card would show it exactly as it is: a short string of printable
    characters with single spaces between words; else None."""
    if not isinstance(value, str) or not value or len(value) > limit:
        return None
    if " ".join(value.split()) != value:
        return None
    if any(unicodedata.category(c).startswith("C") for c in value):
        return None
    return value


def _fits(label: str) -> str | None:
    return label if len(label) <= MAX_GRANT_LABEL else None


def _rule_grant(entry: dict[str, Any], tool: str) -> Grant | None:
    rules = entry.get("rules")
    if entry.get("behavior") != "allow" or not isinstance(rules, list):
        return None
    if not 0 < len(rules) <= MAX_ENTRIES:
        return None
    clean: list[dict[str, str]] = []
    shown: list[str] = []
    for rule in rules:
        if not isinstance(rule, dict) or rule.get("toolName") != tool:
            return None  # a rule for another tool than the one asking: never echoed
        content = rule.get("ruleContent")
        if content is None:
            clean.append({"toolName": tool})
            shown.append(f"any {tool}")
            continue
        text = _clean(content)
        if text is None:
            return None
        clean.append({"toolName": tool, "ruleContent": text})
        shown.append(f"{tool}({text})")
    label = _fits(f"Allow {', '.join(shown)} for this session")
    if label is None:
        return None
    update = {"type": "addRules", "rules": clean, "behavior": "allow", "destination": "session"}
    return Grant(ALLOW_SESSION, label, "Allow a rule for this session", update)


def _mode_grant(entry: dict[str, Any], tool: str) -> Grant | None:
    """A mode is the session's, whichever tool asked."""
    mode = entry.get("mode")
    if mode not in OFFERED_MODES:
        return None
    label = f"Allow and switch this session to {mode} mode"
    update = {"type": "setMode", "mode": mode, "destination": "session"}
    return Grant(ALLOW_MODE + str(mode), label, label, update)


def _directories_grant(entry: dict[str, Any], tool: str) -> Grant | None:
    """Folders are the session's, whichever tool asked."""
    folders = entry.get("directories")
    if not isinstance(folders, list) or not 0 < len(folders) <= MAX_ENTRIES:
        return None
    clean = [_clean(f) for f in folders]
    if any(f is None for f in clean):
        return None
    paths = [f for f in clean if f is not None]
    noun = "folder" if len(paths) == 1 else "folders"
    label = _fits(f"Allow and add {noun} {', '.join(paths)} for this session")
    if label is None:
        return None
    structural = f"Allow and add {'a folder' if len(paths) == 1 else 'folders'} for this session"
    update = {"type": "addDirectories", "directories": paths, "destination": "session"}
    return Grant(ALLOW_DIRECTORIES, label, structural, update)


#: the suggestion types a button may stand for, in the order of the buttons
_KINDS: Final[dict[str, Callable[[dict[str, Any], str], Grant | None]]] = {
    "addRules": _rule_grant,
    "setMode": _mode_grant,
    "addDirectories": _directories_grant,
}


def claude_code_grants(payload: Any) -> list[Grant]:
    """The "for this session" options of a Claude Code `PermissionRequest`: one per kind,
    each from one suggestion it carries (the module docstring has the rules)."""
    if not isinstance(payload, dict) or payload.get("hook_event_name") != "PermissionRequest":
        return []
    tool = _clean(text_of(payload.get("tool_name")))
    suggestions = payload.get("permission_suggestions")
    if tool is None or not isinstance(suggestions, list):
        return []
    found: dict[str, Grant] = {}  # entry type -> the first of that type that fits
    for entry in suggestions:
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind not in _KINDS or kind in found:
            continue
        grant = _KINDS[kind](entry, tool)
        if grant is not None:
            found[kind] = grant
    return [found[kind] for kind in _KINDS if kind in found]


def chosen(grants: Sequence[Grant], option: str | None) -> Grant | None:
    """The grant an answer's option stands for, if it is one of them."""
    return next((g for g in grants if g.option == option), None)


def options(grants: Sequence[Grant], ceiling: Ceiling) -> list[dict[str, str]]:
    """The grants as `attention.requested` options at the attention ceiling: structure
    only at `metadata`; at `redacted`, only a label the redaction pipeline leaves exactly
    as it is (a label must say what pressing grants: one it changes is left out)."""
    rank = CAPTURE_RANK[ceiling.attention]
    out: list[dict[str, str]] = []
    for grant in grants:
        if rank < _WORDS:
            label = grant.structural
        elif rank == _WORDS and ceiling.redactor.text(grant.label) != grant.label:
            continue  # the words shown would not be the words granted
        else:
            label = grant.label
        if len(label) <= MAX_GRANT_LABEL:
            out.append({"id": grant.option, "label": label})
    return out


def with_options(data: dict[str, Any], extra: Sequence[dict[str, str]]) -> dict[str, Any]:
    """A permission request's data with `extra` options after "Allow" (none already there)."""
    have = [o for o in data.get("options") or [] if isinstance(o, dict)]
    ids = {o.get("id") for o in have}
    new = [dict(o) for o in extra if o["id"] not in ids]
    if not new:
        return data
    at = next((i + 1 for i, o in enumerate(have) if o.get("id") == ALLOW), len(have))
    return {**data, "options": [*have[:at], *new, *have[at:]]}


__all__ = [
    "ALLOW_DIRECTORIES",
    "ALLOW_MODE",
    "MAX_ENTRIES",
    "MAX_GRANT_LABEL",
    "OFFERED_MODES",
    "Grant",
    "chosen",
    "claude_code_grants",
    "options",
    "with_options",
]
