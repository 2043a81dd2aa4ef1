"""Instructions from the chat (issue 33): a request marked `aepbridgesteer` (the daemon's held
Stop, "claude-code finished: what next?") takes a text answer that becomes the agent's next
instruction, as powerful as the agent itself. What marks such a request, and how the person's
words show in the session's thread once the agent took them.
"""

from __future__ import annotations

from typing import Final

from ..aep.envelope import Event
from ..contract.types import OutgoingMessage, PermissionRequest
from ..markup import Paragraph, Span, plain

#: the envelope extension attribute (AEP-0001 §5.4) that marks a request whose text answer is
#: an instruction; its value says what is held (`"stop"`: the agent's Stop hook)
STEER_ATTRIBUTE: Final = "aepbridgesteer"
#: what a person whose channel does not allow instructions is told (the card stays open)
INSTRUCTIONS_OFF: Final = (
    "instructions are off in this channel: only Done can be pressed here (set "
    '"allow_instructions": true in its config to allow them)'
)


def is_instruction_request(event: Event) -> bool:
    """Whether a text answer to `event` is an instruction. Any value of the attribute marks
    it, a false one included: an unknown value is taken as the stronger meaning (fail
    closed), never as an ordinary answer that skips the instruction check."""
    return STEER_ATTRIBUTE in event.extensions


#: how a held Stop's card says it is answered, where instructions are allowed and where not
REPLY_HINT: Final = "Reply with the agent's next instruction, or press Done to let it stop."
DONE_HINT: Final = "Press Done to let it stop (instructions are off in this channel)."


def steer_card(card: PermissionRequest, allowed: bool) -> PermissionRequest:
    """A held Stop's card in one channel, with a last line saying how to answer there. It
    still takes words where instructions are off, so that words sent anyway reach the core,
    which refuses them, logs it, and tells the person why (a card without a text box would
    leave them to a channel's generic hint)."""
    if card.informational:
        return card
    hint = Paragraph(spans=(Span(text=REPLY_HINT if allowed else DONE_HINT, italic=True),))
    details = (*card.details, hint)
    return card.model_copy(
        update={"details": details, "description": plain(details), "says_how_to_answer": True}
    )


def instruction_message(by: str, words: str) -> OutgoingMessage:
    """The person's instruction as their own message in the thread: "alice: run the tests
    again". `words` are already redacted; they are shown as typed (no markdown)."""
    blocks = (Paragraph(spans=(Span(text=f"{by}:", bold=True), Span(text=" "), Span(text=words))),)
    return OutgoingMessage(
        type="text", text=plain(blocks), blocks=blocks, metadata={"role": "user", "by": by}
    )


__all__ = [
    "DONE_HINT",
    "INSTRUCTIONS_OFF",
    "REPLY_HINT",
    "STEER_ATTRIBUTE",
    "instruction_message",
    "is_instruction_request",
    "steer_card",
]
