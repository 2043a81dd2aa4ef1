"""Payloads of the fourteen mandatory types (AEP-0002 §4.1, §5.3)."""

from __future__ import annotations

from typing import Any, Literal

from .._types import DateTime, NonNegInt, Opt, gated, opt
from .common import Accounted, Answer, ErrorInfo, FieldSpec, Option, Payload, SessionRef, ToolRef


class ClientInfo(Payload):
    name: str
    version: Opt[str] = None


class SessionStarted(Payload):
    """A session began: its title, lineage, client, model and working directory."""

    label: Opt[str] = gated("redacted")
    parent: Opt[SessionRef] = None
    client: Opt[ClientInfo] = None
    model: Opt[str] = opt(alias="gen_ai.request.model")
    cwd: Opt[str] = gated("redacted")


class SessionEnded(Payload):
    reason: Opt[Literal["normal", "error", "timeout", "killed", "compaction"]] = None
    duration_ms: Opt[NonNegInt] = None
    runs: Opt[NonNegInt] = None


class RunStarted(Accounted):
    trigger: Opt[Literal["user", "schedule", "agent", "control", "resume"]] = None
    prompt: Opt[str] = gated("redacted")


class RunFinished(Accounted):
    duration_ms: Opt[NonNegInt] = None
    summary: Opt[str] = gated("redacted")


class RunFailed(Payload):
    reason: str
    error: Opt[ErrorInfo] = None
    duration_ms: Opt[NonNegInt] = None


class RunCancelled(Payload):
    by: Opt[Literal["user", "control", "policy", "shutdown"]] = None
    reason: Opt[str] = gated("redacted")
    duration_ms: Opt[NonNegInt] = None


class ToolRequested(Payload):
    """A tool is about to run; its arguments travel only at `redacted`/`full`."""

    tool: ToolRef
    args_digest: Opt[str] = None
    args_redacted: Opt[dict[str, Any]] = gated("redacted")
    args: Opt[dict[str, Any]] = gated("full")


class ToolCompleted(Accounted):
    tool: ToolRef
    duration_ms: Opt[NonNegInt] = None
    status: Opt[str] = None
    result_digest: Opt[str] = None
    result_redacted: Opt[dict[str, Any] | str] = gated("redacted")
    result: Opt[dict[str, Any] | str] = gated("full")


class ToolFailed(Payload):
    tool: ToolRef
    error: ErrorInfo
    duration_ms: Opt[NonNegInt] = None


class ToolDenied(Payload):
    tool: ToolRef
    by: Literal["policy", "user_setting", "runtime"]
    rule: Opt[str] = None


class AttentionRequested(Payload):
    """The agent needs a human: a prompt, and options, form fields or free text to answer with.

    `prompt` and the labels are `[metadata*]`: at capture `metadata` they are synthesized from
    structure, never model-written text (AEP-0003 §9.2).
    """

    kind: Literal["permission", "input", "auth", "review", "form", "other"]
    prompt: str
    options: Opt[list[Option]] = None
    fields: Opt[list[FieldSpec]] = None
    expires_at: Opt[DateTime] = None
    respond_via: Opt[list[Literal["control", "oob"]]] = None
    context: Opt[dict[str, Any]] = gated("full")


class AttentionAnswered(Payload):
    answer: Answer
    by: Opt[str] = None
    via: Opt[Literal["control", "oob"]] = None


class AttentionResolved(Payload):
    resolution: Literal["answered", "auto", "dismissed"]
    latency_ms: Opt[NonNegInt] = None


class AttentionTimeout(Payload):
    after_ms: Opt[NonNegInt] = None
