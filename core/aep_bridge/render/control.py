"""`control.*`: the commands a controller sent the agent, and its replies to them."""

from __future__ import annotations

from ..aep.payloads import ControlAttentionRespond, ControlCancel, ControlRejected
from .base import RendererBase
from .draft import Draft
from .helpers import MEDIUM, NORMAL, VERBOSE, _typed


class ControlMixin(RendererBase):
    """`control.attention.respond`, `.cancel`, `.pause`, `.resume`, `.accepted`, `.rejected`."""

    def _respond(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, ControlAttentionRespond)
        text = f"{self._line(ev.agent, 60)} answered the request"
        answer = self._answer_text(p.answer) if p is not None else ""
        if answer:
            text += f": {answer}"
        d.add(VERBOSE, "system_message", text)

    def _cancel(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, ControlCancel)
        scope = p.scope if p is not None else "run"
        text = f"{self._line(ev.agent, 60)} asked to cancel the {scope}"
        if p is not None and p.reason:
            text += ": " + self._line(p.reason, MEDIUM)
        d.add(NORMAL, "system_message", text)

    def _pause(self, d: Draft) -> None:
        d.add(NORMAL, "system_message", f"{self._line(d.event.agent, 60)} asked the agent to pause")

    def _resume(self, d: Draft) -> None:
        d.add(
            NORMAL, "system_message", f"{self._line(d.event.agent, 60)} asked the agent to resume"
        )

    def _accepted(self, d: Draft) -> None:
        d.add(VERBOSE, "system_message", f"{self._line(d.event.agent, 60)} accepted the command")

    def _rejected(self, d: Draft) -> None:
        p = _typed(d.event, ControlRejected)
        text = f"{self._line(d.event.agent, 60)} rejected the command"
        if p is not None:
            text += f": {p.reason}"
            if p.detail:
                text += f" ({self._line(p.detail)})"
        d.add(VERBOSE, "system_message", text)
