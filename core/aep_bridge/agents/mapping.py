"""What the agent mappings share: the event a hook turns into, and the capture ceiling.

A mapping module (`codex.py`, `claude_code.py`) is pure: a native hook payload in, a list of
`Emission`s out, no I/O and no state. The daemon (`daemon.py`) owns everything that needs
memory: the envelope identity, `seq` and `epoch`, the current run of a Claude Code session,
and the held attention loop.

Capture (AEP-0001 §8, AEP-0003 §9): a mapping computes each payload at `full`, with every
digest taken over the original value (§9.3), then lowers it to the ceiling here, before the
event exists, so nothing above the ceiling ever leaves the machine. The defaults follow
Annex A: `metadata` for everything, `attention.*` at `redacted`, where the human needs the
words to decide (the prompt and labels pass the §9.4 redaction pipeline first).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from ..aep.capture import METADATA_STAR, field_levels, synthesize_prompt
from ..aep.redaction import Redactor, digest
from ..aep.registry import CAPTURE_RANK, Capture, Severity

#: Where `attention.*` content may go by default: the human answering needs the words.
DEFAULT_ATTENTION_CAPTURE: Final[Capture] = "redacted"
DEFAULT_EVENT_CAPTURE: Final[Capture] = "metadata"
_REDACTED: Final = CAPTURE_RANK["redacted"]


@dataclass(frozen=True, slots=True)
class Ceiling:
    """The highest capture level each family of events may carry out of the machine."""

    events: Capture = DEFAULT_EVENT_CAPTURE
    attention: Capture = DEFAULT_ATTENTION_CAPTURE
    redactor: Redactor = field(default_factory=Redactor, compare=False)

    def of(self, type_: str) -> Capture:
        """The ceiling for events of `type_`."""
        return self.attention if type_.startswith("attention.") else self.events


DEFAULT_CEILING: Final = Ceiling()


@dataclass(frozen=True, slots=True)
class Emission:
    """One event a hook produces, before it has an envelope.

    `data` is already at `capture` (never above the ceiling). `run` is the run the payload
    names (Codex's `turn_id`); None lets the daemon use the session's current run.
    """

    type: str
    data: dict[str, Any]
    subject: str | None = None
    capture: Capture = DEFAULT_EVENT_CAPTURE
    severity: Severity | None = None
    run: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The human's answer to a held request, as the daemon applied it (AEP-0008).

    For a permission: `option` is `allow`, `deny` or one of the "for this session" options
    the request offered (`allow_session`, ... : grants.py), and `text` is the
    human's guidance when a text answer became a deny. For a form: `values` are the
    validated answers keyed by field id (choice ids, lists of them for `multi`, free text
    for `other`, numbers, booleans), exactly as `attention.answered` records them.
    """

    option: str | None = None
    text: str | None = None
    values: dict[str, Any] | None = None


#: The options every permission card offers (Annex A's allow/deny, and the session rule).
ALLOW: Final = "allow"
ALLOW_SESSION: Final = "allow_session"
DENY: Final = "deny"
#: what the agent is told when a person denies without words of their own
DENY_MESSAGE: Final = "Denied from the chat (aep-bridge)"


def _prune(value: Any, path: str, table: dict[str, Capture], rank: int, redactor: Redactor) -> Any:
    if isinstance(value, list):
        return [_prune(item, path + "[]", table, rank, redactor) for item in value]
    if not isinstance(value, dict):
        return value
    kept: dict[str, Any] = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        level = table.get(child, "metadata")
        if CAPTURE_RANK[level] > rank:
            continue
        if rank == _REDACTED and (level == "redacted" or child in METADATA_STAR):
            kept[key] = redactor.value(item)  # §9.4: words kept at `redacted` pass the pipeline
        else:
            kept[key] = _prune(item, child, table, rank, redactor)
    return kept


def gated(
    type_: str, data: dict[str, Any], ceiling: Ceiling = DEFAULT_CEILING
) -> tuple[dict[str, Any], Capture]:
    """`data` (computed at `full`) lowered to the ceiling for `type_`, and the level it is at.

    Fields gated above the ceiling are dropped; `redacted` fields kept at a `redacted`
    ceiling pass the §9.4 pipeline. The `[metadata*]` text of `attention.requested` (prompt,
    labels) is the mapping's to synthesize: it knows the structure to put in its place.
    Unknown (vendor) types keep only what is structural: their data must be built so.
    """
    level = ceiling.of(type_)
    table = field_levels(type_)
    if table is None:
        return data, level
    return _prune(data, "", table, CAPTURE_RANK[level], ceiling.redactor), level


def emission(
    type_: str,
    data: dict[str, Any],
    ceiling: Ceiling = DEFAULT_CEILING,
    *,
    subject: str | None = None,
    severity: Severity | None = None,
    run: str | None = None,
) -> Emission:
    """An `Emission` of `data` (at `full`) gated to the ceiling."""
    kept, level = gated(type_, data, ceiling)
    return Emission(type_, kept, subject, level, severity, run)


def snake_case(name: str) -> str:
    """`SomeFutureHook` -> `some_future_hook`, the vendor fallback's last segment."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"[^a-z0-9_]+", "_", words.lower()).strip("_") or "unknown"


def vendor_fallback(vendor: str, hook: str) -> Emission:
    """An unknown hook, on its vendor type (AEP-0001 §6 mechanical fallback, `session`).

    The payload stays empty: an unknown hook's fields have no capture annotation, so none
    of them may leave at a `metadata` ceiling.
    """
    return Emission(f"x.{vendor}.session.{snake_case(hook)}", {})


_H = TypeVar("_H")


def map_named(
    payload: Any,
    vendor: str,
    handlers: Mapping[str, _H],
    call: Callable[[_H, dict[str, Any]], list[Emission]],
) -> list[Emission]:
    """The events one hook payload stands for: `call` its handler (by `hook_event_name`),
    the vendor fallback for a hook without one, none for a malformed payload."""
    if not isinstance(payload, dict):
        return []
    name = text_of(payload.get("hook_event_name"))
    if name is None:
        return []
    handler = handlers.get(name)
    if handler is None:
        return [vendor_fallback(vendor, name)]
    return call(handler, payload)


def text_of(value: Any) -> str | None:
    """`value` when it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


# -- what both agents' hooks share: the tool events and the permission prompt ---------------

#: Annex A's permission options (the daemon adds the "for this session" ones, grants.py)
PERMISSION_OPTIONS: Final = ({"id": ALLOW, "label": "Allow"}, {"id": DENY, "label": "Deny"})
#: the tool input field that says what a call does, in the order looked for
_SUMMARY_KEYS: Final = ("command", "file_path", "notebook_path", "url", "pattern", "query", "path")


def tool_name(payload: dict[str, Any]) -> str:
    """The tool's name; `tool.name` is required by the schemas, so a junk payload gets one."""
    return text_of(payload.get("tool_name")) or "unknown"


def tool_of(payload: dict[str, Any]) -> dict[str, Any]:
    """The `tool` object of a tool event: its name and the call's id when given."""
    tool: dict[str, Any] = {"name": tool_name(payload)}
    call_id = text_of(payload.get("tool_use_id"))
    if call_id is not None:
        tool["call_id"] = call_id
    return tool


def tool_event(
    type_: str, payload: dict[str, Any], ceiling: Ceiling, *, run: str | None = None
) -> Emission:
    """`tool.requested` (from `tool_input`) or `tool.completed` (from `tool_response`).

    The digest is over the original value (§9.3); the value itself goes at `full`, and its
    redacted copy at `redacted` (at `full` the original says it all, so no copy)."""
    part, key = ("args", "tool_input") if type_ == "tool.requested" else ("result", "tool_response")
    data: dict[str, Any] = {"tool": tool_of(payload)}
    if key in payload:
        value = payload[key]
        data[f"{part}_digest"] = digest(value)
        if part == "result" and value is not None and not isinstance(value, dict | str):
            value = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        if isinstance(value, dict) or (part == "result" and isinstance(value, str)):
            data[part] = value  # the schemas take an object of args, a result of any shape
            if ceiling.of(type_) == "redacted":
                data[f"{part}_redacted"] = value
    return emission(type_, data, ceiling, subject=data["tool"]["name"], run=run)


def permission_prompt(tool: str | None, tool_input: Any) -> str:
    """`Permission requested: Bash — npm test (run the tests)`: the words at `redacted`+."""
    args = tool_input if isinstance(tool_input, dict) else {}
    summary = next((args[k] for k in _SUMMARY_KEYS if text_of(args.get(k))), None)
    prompt = f"Permission requested: {tool or 'a tool'}"
    if summary is not None:
        prompt += f" — {summary}"
    description = text_of(args.get("description"))
    return f"{prompt} ({description})" if description else prompt


def permission_request(
    agent: str, payload: dict[str, Any], ceiling: Ceiling, *, run: str | None = None
) -> Emission:
    """A permission prompt as `attention.requested`: the tool and what it would do, in
    words at a `redacted` ceiling, as structure below it (AEP-0003 §9.2: never the agent's
    words at `metadata`)."""
    tool = text_of(payload.get("tool_name"))
    words = CAPTURE_RANK[ceiling.of("attention.requested")] >= _REDACTED
    data: dict[str, Any] = {
        "kind": "permission",
        "prompt": (
            permission_prompt(tool, payload.get("tool_input"))
            if words
            else synthesize_prompt(agent, "permission", tool)
        ),
        "options": [dict(option) for option in PERMISSION_OPTIONS],
        "respond_via": ["control"],
    }
    context = {
        key: value
        for key, value in (
            ("tool_name", tool),
            ("tool_input", payload.get("tool_input")),
            ("cwd", text_of(payload.get("cwd"))),
        )
        if value is not None
    }
    if context:
        data["context"] = context
    return emission("attention.requested", data, ceiling, subject=tool, severity="notice", run=run)


__all__ = [
    "ALLOW",
    "ALLOW_SESSION",
    "DEFAULT_CEILING",
    "DENY",
    "DENY_MESSAGE",
    "PERMISSION_OPTIONS",
    "Ceiling",
    "Emission",
    "Verdict",
    "digest",
    "emission",
    "gated",
    "permission_prompt",
    "permission_request",
    "snake_case",
    "text_of",
    "tool_event",
    "tool_name",
    "tool_of",
    "vendor_fallback",
]
