"""Typed `data` for every registered type that has a payload schema, and AEP-0007 messages.

`PAYLOAD_MODELS` maps a type to its model. Types with no entry (unknown members of a known
category, vendor `x.*` types) keep their `data` as the plain dict it arrived as.
"""

from __future__ import annotations

from typing import Final

from . import control, core, message, optional
from .common import (
    Accounted,
    Answer,
    Citation,
    Cost,
    Document,
    ErrorInfo,
    FieldSpec,
    Guardrail,
    Option,
    Payload,
    ToolRef,
    Usage,
)
from .control import (
    ControlAccepted,
    ControlAttentionRespond,
    ControlCancel,
    ControlPause,
    ControlRejected,
    ControlResume,
)
from .core import (
    AttentionAnswered,
    AttentionRequested,
    AttentionResolved,
    AttentionTimeout,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    SessionEnded,
    SessionStarted,
    ToolCompleted,
    ToolDenied,
    ToolFailed,
    ToolRequested,
)
from .message import MessageAgentReplied, MessageUserSubmitted
from .optional import (
    AgentHealth,
    AgentHeartbeat,
    AgentIdle,
    AgentPresence,
    AttentionRouted,
    DelegationSubagentStarted,
    DelegationSubagentStopped,
    ErrorRaised,
    ProgressArtifactProduced,
    ProgressStatus,
    ProgressTaskCompleted,
    ProgressTaskPlanned,
)

#: Models that carry a registered payload schema: the validator enforces these.
PAYLOAD_MODELS: Final[dict[str, type[Payload]]] = {
    "session.started": core.SessionStarted,
    "session.ended": core.SessionEnded,
    "run.started": core.RunStarted,
    "run.finished": core.RunFinished,
    "run.failed": core.RunFailed,
    "run.cancelled": core.RunCancelled,
    "tool.requested": core.ToolRequested,
    "tool.completed": core.ToolCompleted,
    "tool.failed": core.ToolFailed,
    "tool.denied": core.ToolDenied,
    "attention.requested": core.AttentionRequested,
    "attention.answered": core.AttentionAnswered,
    "attention.resolved": core.AttentionResolved,
    "attention.timeout": core.AttentionTimeout,
    "session.compacted": optional.SessionCompacted,
    "run.step.started": optional.RunStepStarted,
    "run.step.finished": optional.RunStepFinished,
    "progress.status": optional.ProgressStatus,
    "progress.task.planned": optional.ProgressTaskPlanned,
    "progress.task.completed": optional.ProgressTaskCompleted,
    "progress.artifact.produced": optional.ProgressArtifactProduced,
    "delegation.subagent.started": optional.DelegationSubagentStarted,
    "delegation.subagent.stopped": optional.DelegationSubagentStopped,
    "attention.routed": optional.AttentionRouted,
    "agent.presence": optional.AgentPresence,
    "agent.idle": optional.AgentIdle,
    "agent.health": optional.AgentHealth,
    "agent.heartbeat": optional.AgentHeartbeat,
    "error.raised": optional.ErrorRaised,
    "state.snapshot": optional.StateSnapshot,
    "state.delta": optional.StateDelta,
    "resource.retrieval.requested": optional.ResourceRetrievalRequested,
    "resource.retrieval.returned": optional.ResourceRetrievalReturned,
    "resource.retrieval.reranked": optional.ResourceRetrievalReranked,
    "resource.citation.recorded": optional.ResourceCitationRecorded,
    "assessment.evaluation.recorded": optional.AssessmentEvaluationRecorded,
    "assessment.feedback.received": optional.AssessmentFeedbackReceived,
    "assessment.guardrail.recorded": optional.AssessmentGuardrailRecorded,
    "control.attention.respond": control.ControlAttentionRespond,
    "control.cancel": control.ControlCancel,
    "control.pause": control.ControlPause,
    "control.resume": control.ControlResume,
    "control.accepted": control.ControlAccepted,
    "control.rejected": control.ControlRejected,
}

#: Models for types the 0.1 registry reserves without a schema (read leniently, never enforced).
RESERVED_MODELS: Final[dict[str, type[Payload]]] = {
    "message.user.submitted": message.MessageUserSubmitted,
    "message.agent.replied": message.MessageAgentReplied,
}


def payload_model(type_: str) -> type[Payload] | None:
    """The model for `type_`'s `data`, or None when the type has no known payload shape."""
    return PAYLOAD_MODELS.get(type_) or RESERVED_MODELS.get(type_)


__all__ = [
    "PAYLOAD_MODELS",
    "RESERVED_MODELS",
    "Accounted",
    "AgentHealth",
    "AgentHeartbeat",
    "AgentIdle",
    "AgentPresence",
    "Answer",
    "AttentionAnswered",
    "AttentionRequested",
    "AttentionResolved",
    "AttentionRouted",
    "AttentionTimeout",
    "Citation",
    "ControlAccepted",
    "ControlAttentionRespond",
    "ControlCancel",
    "ControlPause",
    "ControlRejected",
    "ControlResume",
    "Cost",
    "DelegationSubagentStarted",
    "DelegationSubagentStopped",
    "Document",
    "ErrorInfo",
    "ErrorRaised",
    "FieldSpec",
    "Guardrail",
    "MessageAgentReplied",
    "MessageUserSubmitted",
    "Option",
    "Payload",
    "ProgressArtifactProduced",
    "ProgressStatus",
    "ProgressTaskCompleted",
    "ProgressTaskPlanned",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "SessionEnded",
    "SessionStarted",
    "ToolCompleted",
    "ToolDenied",
    "ToolFailed",
    "ToolRef",
    "ToolRequested",
    "Usage",
    "payload_model",
]
