"""Payloads of the control profile: commands and their acknowledgements (AEP-0004 §3, §5)."""

from __future__ import annotations

from typing import Literal

from .._types import Opt, gated
from .common import Answer, Payload


class ControlAttentionRespond(Payload):
    """The answer to an `attention.requested`: an option, free text, or form values."""

    answer: Answer


class ControlCancel(Payload):
    scope: Literal["run", "session"]
    reason: Opt[str] = gated("redacted")


class ControlPause(Payload):
    pass


class ControlResume(Payload):
    pass


class ControlAccepted(Payload):
    """The target will attempt the command named by the envelope's `cause`."""


class ControlRejected(Payload):
    reason: Literal["unsupported", "unauthorized", "busy", "refused", "invalid"]
    detail: Opt[str] = gated("redacted")
