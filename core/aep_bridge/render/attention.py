"""`attention.*`: the heads-up of a request (its card is `cards`) and what came of it."""

from __future__ import annotations

from ..aep.payloads import (
    AttentionAnswered,
    AttentionRequested,
    AttentionResolved,
    AttentionRouted,
    AttentionTimeout,
)
from .activity import duration
from .base import RendererBase
from .draft import Draft
from .helpers import VERBOSE, _typed


class AttentionMixin(RendererBase):
    """`attention.requested` (the notification), `attention.answered`, `.resolved`, `.timeout`,
    `.routed`."""

    def _attention_requested(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, AttentionRequested)
        self._release_held(d, None)  # what the agent said before it asked is the context
        # the card is a new bubble (the core posts it): what comes next goes below it
        d.thread.activity = None
        d.thread.tail = None
        if "questions" not in d.ring:
            return
        kind = p.kind if p is not None else "other"
        summary = self._request_title(ev, kind)
        if p is not None and p.respond_via is not None and "control" not in p.respond_via:
            summary += " (answer it in the agent's own terminal)"
        d.notify(
            "permission" if kind in ("permission", "auth", "review") else "input_required", summary
        )

    def _attention_answered(self, d: Draft) -> None:
        p = _typed(d.event, AttentionAnswered)
        text = "Answered"
        if p is not None:
            extra = [f"by {self._line(p.by, 60)}" if p.by else "", f"via {p.via}" if p.via else ""]
            if any(extra):
                text += " " + ", ".join(x for x in extra if x)
            answer = self._answer_text(p.answer)
            if answer:
                text += f": {answer}"
        d.add(VERBOSE, "system_message", text)

    def _attention_resolved(self, d: Draft) -> None:
        p = _typed(d.event, AttentionResolved)
        text = f"Request resolved ({p.resolution})" if p is not None else "Request resolved"
        if p is not None and p.latency_ms is not None:
            text += f" after {duration(p.latency_ms)}"
        d.add(VERBOSE, "system_message", text)

    def _attention_timeout(self, d: Draft) -> None:
        p = _typed(d.event, AttentionTimeout)
        text = "Request expired without an answer"
        if p is not None and p.after_ms is not None:
            text += f" after {duration(p.after_ms)}"
        d.add(VERBOSE, "system_message", text)

    def _attention_routed(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, AttentionRouted)
        text = f"{self._line(ev.agent, 60)} routed the request"
        if p is not None and p.to:
            text += " to " + self._line(p.to, 60)
        if p is not None and p.via:
            text += " via " + self._line(p.via, 60)
        d.add(VERBOSE, "system_message", text)
