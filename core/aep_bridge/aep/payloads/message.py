"""AEP-0007 message facts: what the user asked and what the agent replied.

The 0.1 registry still lists these names as `reserved` with no schema, so a consumer must
accept any `data` for them (AEP-0002 §4.3); the validator therefore never rejects an event
for its message payload. These models are how the bridge reads them when they fit AEP-0007.
"""

from __future__ import annotations

from .._types import NonNegInt, Opt, gated, opt
from .common import Usage


class MessageFact(Usage):
    message_id: str
    role: Opt[str] = None
    text: Opt[str] = gated("redacted")
    text_digest: Opt[str] = None
    chars: Opt[NonNegInt] = None
    truncated: Opt[bool] = None
    model: Opt[str] = opt(alias="gen_ai.request.model")


class MessageUserSubmitted(MessageFact):
    """A user-authored message entered the session."""


class MessageAgentReplied(MessageFact):
    """An agent-authored message completed."""
