"""Payloads of the optional core types (AEP-0002 §4.2, §5.4), `experimental` ones included."""

from __future__ import annotations

from typing import Any, Literal

from .._types import NonNegInt, Opt, Percent, gated, opt
from .common import (
    ChildRef,
    Citation,
    Document,
    ErrorInfo,
    Guardrail,
    Payload,
    TaskRef,
    Usage,
)


class SessionCompacted(Usage):
    trigger: Opt[str] = None
    strategy: Opt[str] = None
    estimated_token_count: Opt[NonNegInt] = None
    forgotten: Opt[NonNegInt] = None


class RunStepStarted(Payload):
    name: Opt[str] = gated("redacted")
    initial_num_steps: Opt[NonNegInt] = None


class RunStepFinished(Payload):
    status: Opt[str] = None


class ProgressStatus(Payload):
    message: Opt[str] = gated("redacted")
    phase: Opt[str] = None
    percent: Opt[Percent] = None


class ProgressTaskPlanned(Payload):
    task: Opt[TaskRef] = None
    parent: Opt[str] = None


class ProgressTaskCompleted(Payload):
    task: Opt[TaskRef] = None
    status: Opt[str] = None


class Artifact(Payload):
    id: Opt[str] = None
    name: Opt[str] = gated("redacted")
    mime: Opt[str] = None
    bytes: Opt[NonNegInt] = None
    uri: Opt[str] = gated("redacted")


class ProgressArtifactProduced(Payload):
    artifact: Opt[Artifact] = None


class DelegationSubagentStarted(Payload):
    child: Opt[ChildRef] = None
    agent_type: Opt[str] = None
    role: Opt[str] = None


class DelegationSubagentStopped(Payload):
    child: Opt[ChildRef] = None
    agent_type: Opt[str] = None
    status: Opt[str] = None
    duration_ms: Opt[NonNegInt] = None


class AttentionRouted(Payload):
    """Emitted by a consumer (such as this bridge) that put a request in front of a human."""

    to: Opt[str] = None
    via: Opt[str] = None


class AgentPresence(Payload):
    state: Literal["online", "offline", "busy"]


class AgentIdle(Payload):
    since_ms: Opt[NonNegInt] = None
    reason: Opt[str] = None


class AgentHealth(Payload):
    status: Literal["ok", "degraded", "failing"]
    detail: Opt[str] = gated("redacted")


class AgentHeartbeat(Payload):
    tick: Opt[NonNegInt] = None
    interval_ms: Opt[NonNegInt] = None


class ErrorRaised(Payload):
    error: Opt[ErrorInfo] = None
    code: Opt[str] = None
    fatal: Opt[bool] = None


class StateSnapshot(Payload):
    state: Opt[dict[str, Any]] = gated("redacted")
    key: Opt[str] = None
    rev: Opt[NonNegInt] = None


class StateDelta(Payload):
    delta: Opt[list[dict[str, Any]]] = gated("redacted")
    key: Opt[str] = None
    rev: Opt[NonNegInt] = None


class ResourceRetrievalRequested(Payload):
    query: Opt[str] = gated("redacted")
    query_digest: Opt[str] = None
    corpus: Opt[str] = None
    top_k: Opt[NonNegInt] = None


class ResourceRetrievalReturned(Payload):
    documents: Opt[list[Document]] = None
    count: Opt[NonNegInt] = None
    corpus: Opt[str] = None
    duration_ms: Opt[NonNegInt] = None


class ResourceRetrievalReranked(Payload):
    query: Opt[str] = gated("redacted")
    query_digest: Opt[str] = None
    model: Opt[str] = None
    top_k: Opt[NonNegInt] = None
    input_documents: Opt[list[Document]] = None
    output_documents: Opt[list[Document]] = None
    count: Opt[NonNegInt] = None
    duration_ms: Opt[NonNegInt] = None


class ResourceCitationRecorded(Payload):
    citations: Opt[list[Citation]] = None
    count: Opt[NonNegInt] = None


class AssessmentEvaluationRecorded(Payload):
    name: Opt[str] = opt(alias="gen_ai.evaluation.name")
    score_value: Opt[float] = opt(alias="gen_ai.evaluation.score.value")
    score_label: Opt[str] = opt(alias="gen_ai.evaluation.score.label")
    explanation: Opt[str] = gated("redacted", alias="gen_ai.evaluation.explanation")
    evaluator: Opt[str] = None


class AssessmentFeedbackReceived(Payload):
    rating: Opt[float] = None
    label: Opt[str] = None
    comment: Opt[str] = gated("redacted")
    correction: Opt[str] = gated("redacted")
    source: Opt[str] = None


class AssessmentGuardrailRecorded(Payload):
    guardrail: Opt[Guardrail] = None
