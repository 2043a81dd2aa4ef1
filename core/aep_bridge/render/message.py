"""`message.*`: the agent's replies (held at quiet until the run's end) and the user's prompts."""

from __future__ import annotations

from typing import Any, Final

from ..aep.envelope import Event
from ..aep.payloads import MessageAgentReplied, MessageUserSubmitted
from ..aep.payloads.message import MessageFact
from ..markup import Blocks, Paragraph, Span, parse_markdown
from .activity import TAIL_ROOM, Held, Tail, marked_size
from .base import RendererBase
from .draft import Draft
from .helpers import MEDIUM, NORMAL, QUIET, VERBOSE, _clip, _number, _said_by, _typed

_THOUGHT_ROLES: Final = frozenset({"reasoning", "thinking", "thought"})


class MessageMixin(RendererBase):
    """`message.agent.replied`, `message.user.submitted`."""

    def _message_text(self, ev: Event, model: type[MessageFact]) -> tuple[str, MessageFact | None]:
        p = _typed(ev, model)
        if p is not None:
            return self._text(p.text), p
        data = ev.data or {}
        text = data.get("text")
        return (self._text(text) if isinstance(text, str) else ""), None

    def _agent_replied(self, d: Draft) -> None:
        ev = d.event
        text, p = self._message_text(ev, MessageAgentReplied)
        role = p.role if p is not None and p.role else "assistant"
        # the agent's markdown, parsed after its strings were redacted: a secret split by
        # markup (`sk-**live**...`) was still whole when the pipeline saw it
        blocks = parse_markdown(text) if text else ()
        if role.lower() in _THOUGHT_ROLES:
            d.add(VERBOSE, "thought", text or "(thinking)", metadata={"role": role}, blocks=blocks)
            return
        if not text:
            text = f"{self._line(ev.agent, 60)} replied"
            if p is not None and p.chars is not None:
                text += f" ({_number(p.chars)} characters)"
            blocks = (Paragraph(spans=(Span(text=text),)),)
        # a reply that may be split on its way out has no key (a keyed message is one
        # message, cut at the limit); only a short one can take the run's footer
        short = marked_size(blocks) <= TAIL_ROOM
        key = f"reply:{ev.id}" if short else None
        metadata: dict[str, Any] = {"role": role}
        if d.verbosity == QUIET and d.edits:
            # only the run's last reply is shown at quiet: held until the run says so
            d.thread.held = Held(key, blocks, metadata)
            return
        d.add(
            QUIET,
            "text",
            text,
            key=key,
            notify="replies" in d.ring,
            metadata=metadata,
            blocks=blocks,
        )
        if d.edits and key is not None:
            d.tail = Tail("reply", key, "text", blocks, metadata)

    def _user_submitted(self, d: Draft) -> None:
        ev = d.event
        text, p = self._message_text(ev, MessageUserSubmitted)
        role = p.role if p is not None and p.role else "user"
        self._release_held(d, None)
        blocks: Blocks = ()
        if text:
            d.thread.prompted(_clip(text, MEDIUM))
            blocks = _said_by("User:", parse_markdown(text))
        else:
            shown = "The user sent a message"
            if p is not None and p.chars is not None:
                shown += f" ({_number(p.chars)} characters)"
            blocks = (Paragraph(spans=(Span(text=shown, italic=True),)),)
        tail = d.thread.tail
        if d.verbosity >= NORMAL and tail is not None and tail.kind == "header":
            # the session's first prompt joins its header: who, where, and what was asked
            joined = (*tail.blocks, *blocks)
            d.add(NORMAL, "system_message", "", key=tail.key, metadata=tail.metadata, blocks=joined)
            d.thread.tail = None
            return
        d.add(NORMAL, "text", "", metadata={"role": role}, blocks=blocks)
