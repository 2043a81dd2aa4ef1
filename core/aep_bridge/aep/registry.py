"""The AEP 0.1 registries (AEP-0002 §3, §4, §6; AEP-0001 §8; AEP-0004 §3) as Python data.

The bridge cannot read the specification's JSON files at run time (they are not part of an
installed package), so the closed sets live here; `tests/aep/test_registry.py` checks them
against `tests/aep_data/registry/` so they can never drift from the specification.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

AEP_VERSION: Final = "0.1"
SUPPORTED_MAJOR: Final = 0

Severity = Literal["debug", "info", "notice", "warning", "error", "critical"]
Capture = Literal["none", "metadata", "redacted", "full"]
TypeStatus = Literal["mandatory", "optional", "reserved"]
TypeScope = Literal["session", "agent", "command"]

SEVERITY_ORDER: Final[tuple[Severity, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
)
CAPTURE_ORDER: Final[tuple[Capture, ...]] = ("none", "metadata", "redacted", "full")
DEFAULT_SEVERITY: Final[Severity] = "info"
DEFAULT_CAPTURE: Final[Capture] = "metadata"
DEFAULT_EPOCH: Final = 0

SEVERITY_RANK: Final[dict[str, int]] = {name: i for i, name in enumerate(SEVERITY_ORDER)}
CAPTURE_RANK: Final[dict[str, int]] = {name: i for i, name in enumerate(CAPTURE_ORDER)}

NACK_REASONS: Final = ("unsupported", "unauthorized", "busy", "refused", "invalid")

#: AEP-0002 §3: the closed category set, with each category's scope.
CATEGORIES: Final[dict[str, str]] = {
    "agent": "agent",
    "session": "session",
    "run": "session",
    "progress": "session",
    "tool": "session",
    "delegation": "session",
    "attention": "session",
    "resource": "session",
    "error": "session",
    "state": "session",
    "assessment": "session",
    "message": "session",
    "control": "session",
    "x": "any",
}


@dataclass(frozen=True, slots=True)
class RegisteredType:
    """One row of `registry/types.json`."""

    type: str
    status: TypeStatus
    scope: TypeScope
    has_schema: bool


def _row(type_: str, status: TypeStatus, scope: TypeScope = "session") -> RegisteredType:
    return RegisteredType(type_, status, scope, has_schema=status != "reserved")


#: AEP-0002 §4: every registered core type.
REGISTERED_TYPES: Final[dict[str, RegisteredType]] = {
    r.type: r
    for r in (
        _row("session.started", "mandatory"),
        _row("session.ended", "mandatory"),
        _row("run.started", "mandatory"),
        _row("run.finished", "mandatory"),
        _row("run.failed", "mandatory"),
        _row("run.cancelled", "mandatory"),
        _row("tool.requested", "mandatory"),
        _row("tool.completed", "mandatory"),
        _row("tool.failed", "mandatory"),
        _row("tool.denied", "mandatory"),
        _row("attention.requested", "mandatory"),
        _row("attention.answered", "mandatory"),
        _row("attention.resolved", "mandatory"),
        _row("attention.timeout", "mandatory"),
        _row("session.compacted", "optional"),
        _row("run.step.started", "optional"),
        _row("run.step.finished", "optional"),
        _row("progress.status", "optional"),
        _row("progress.task.planned", "optional"),
        _row("progress.task.completed", "optional"),
        _row("progress.artifact.produced", "optional"),
        _row("delegation.subagent.started", "optional"),
        _row("delegation.subagent.stopped", "optional"),
        _row("attention.routed", "optional"),
        _row("agent.presence", "optional", "agent"),
        _row("agent.idle", "optional", "agent"),
        _row("agent.health", "optional", "agent"),
        _row("agent.heartbeat", "optional", "agent"),
        _row("error.raised", "optional"),
        _row("state.snapshot", "optional"),
        _row("state.delta", "optional"),
        _row("resource.retrieval.requested", "optional"),
        _row("resource.retrieval.returned", "optional"),
        _row("resource.retrieval.reranked", "optional"),
        _row("resource.citation.recorded", "optional"),
        _row("assessment.evaluation.recorded", "optional"),
        _row("assessment.feedback.received", "optional"),
        _row("assessment.guardrail.recorded", "optional"),
        _row("message.user.submitted", "reserved"),
        _row("message.agent.replied", "reserved"),
        _row("control.attention.respond", "optional", "command"),
        _row("control.cancel", "optional", "command"),
        _row("control.pause", "optional", "command"),
        _row("control.resume", "optional", "command"),
        _row("control.accepted", "optional"),
        _row("control.rejected", "optional"),
    )
}

MANDATORY_TYPES: Final = frozenset(
    t for t, r in REGISTERED_TYPES.items() if r.status == "mandatory"
)

#: AEP-0001 §6 and the envelope schema's `type` pattern: a registered category followed by
#: dot-separated `[a-z0-9_]` tokens, or `x.{vendor}.{category}.{rest}` (vendor may hold `-`).
#: The category list is the schema's, which (unlike CATEGORIES) has no `x` entry.
TYPE_PATTERN: Final = re.compile(
    r"(?:(?:agent|session|run|progress|tool|delegation|attention|resource|error|state"
    r"|assessment|message|control)(?:\.[a-z0-9_]+)+"
    r"|x\.[a-z0-9_-]+\.[a-z0-9_]+(?:\.[a-z0-9_]+)+)"
)

#: Foreign-emitter session events: carry `session`, never `seq` (AEP-0001 §5.2, AEP-0004 §2.2).
FOREIGN_EMITTER_PATTERN: Final = re.compile(
    r"control\.attention\.respond|control\.cancel|control\.pause|control\.resume"
    r"|x\.[a-z0-9_-]+\.control\..+|attention\.routed",
    re.DOTALL,
)

#: The sixteen context attributes plus `data` (AEP-0001 §5.1), in specification order.
CORE_ATTRIBUTES: Final[tuple[str, ...]] = (
    "aep",
    "id",
    "type",
    "subject",
    "time",
    "source",
    "agent",
    "session",
    "run",
    "step",
    "seq",
    "epoch",
    "cause",
    "traceparent",
    "severity",
    "capture",
    "data",
)

#: AEP-0001 §5.4: extension attribute names (the CloudEvents extension-name constraint).
EXTENSION_NAME_PATTERN: Final = re.compile(r"[a-z0-9]{1,20}")


@lru_cache(maxsize=1024)
def is_command_type(type_: str) -> bool:
    """True for inbound commands (`control.{verb}` and `x.{vendor}.control.*`), not their acks."""
    return type_ != "attention.routed" and FOREIGN_EMITTER_PATTERN.fullmatch(type_) is not None


def category_of(type_: str) -> str:
    """The category of a type: its first segment, or the third for vendor `x.*` types."""
    parts = type_.split(".")
    if parts[0] == "x" and len(parts) > 2:
        return parts[2]
    return parts[0]
