"""`agent.*`, `delegation.*` and `error.raised`: the agent's presence and health, its
subagents and its errors.
"""

from __future__ import annotations

from typing import Final

from ..aep.envelope import Event
from ..aep.payloads import (
    AgentHealth,
    AgentIdle,
    AgentPresence,
    DelegationSubagentStarted,
    DelegationSubagentStopped,
    ErrorRaised,
)
from ..aep.registry import SEVERITY_RANK
from .activity import duration
from .base import RendererBase
from .draft import Draft
from .helpers import NORMAL, QUIET, SHORT, VERBOSE, _typed

_ERROR_RANK: Final = SEVERITY_RANK["error"]


class AgentMixin(RendererBase):
    """`agent.presence`, `.idle`, `.health`, `.heartbeat`; `delegation.subagent.*`;
    `error.raised`."""

    def _subagent(
        self,
        ev: Event,
        p: DelegationSubagentStarted | DelegationSubagentStopped | None,
        *,
        start: bool,
    ) -> tuple[str, str]:
        """A subagent's name as shown (`Subagent Explore`, `A subagent`), and the key of its
        line: its stop's line replaces its start's."""
        child = p.child if p is not None else None
        agent_type = p.agent_type if p is not None else None
        name = self._line(agent_type, 60) if agent_type else ""
        if not name and child is not None and child.agent:
            name = self._line(child.agent, 60)
        ident = None
        if child is not None:
            ident = child.session or child.run or child.agent
        ident = ident or agent_type
        if ident:
            key = f"subagent:{ident}"
        elif start or not ev.cause:
            key = f"subagent:@{ev.id}"
        else:
            key = f"subagent:@{ev.cause}"
        return (f"Subagent {name}" if name else "A subagent"), key

    def _subagent_started(self, d: Draft) -> None:
        p = _typed(d.event, DelegationSubagentStarted)
        name, key = self._subagent(d.event, p, start=True)
        text = name + " started"
        if p is not None and p.role:
            text += f" ({self._line(p.role, 60)})"
        d.add(NORMAL, "system_message", text, key=key, metadata={"status": "running"})

    def _subagent_stopped(self, d: Draft) -> None:
        p = _typed(d.event, DelegationSubagentStopped)
        name, key = self._subagent(d.event, p, start=False)
        text = name + " finished"
        facts = [self._line(p.status, 40) if p is not None and p.status else ""]
        if p is not None and p.duration_ms is not None:
            facts.append(f"after {duration(p.duration_ms)}")
        if any(facts):
            text += ": " + ", ".join(x for x in facts if x)
        status = p.status if p is not None and p.status else "finished"
        d.add(NORMAL, "system_message", text, key=key, metadata={"status": status})

    def _presence(self, d: Draft) -> None:
        p = _typed(d.event, AgentPresence)
        agent = self._line(d.event.agent, 60)
        if p is None:
            d.add(VERBOSE, "system_message", f"{agent} changed presence")
            return
        d.add(
            NORMAL if p.state == "offline" else VERBOSE, "system_message", f"{agent} is {p.state}"
        )
        if p.state == "offline":
            d.notify("error", f"{agent} went offline")

    def _idle(self, d: Draft) -> None:
        p = _typed(d.event, AgentIdle)
        text = f"{self._line(d.event.agent, 60)} is idle"
        if p is not None and p.reason:
            text += f" ({self._line(p.reason, 60)})"
        d.add(VERBOSE, "system_message", text)

    def _health(self, d: Draft) -> None:
        p = _typed(d.event, AgentHealth)
        agent = self._line(d.event.agent, 60)
        status = p.status if p is not None else "unknown"
        text = f"{agent} health: {status}"
        if p is not None and p.detail:
            text += " (" + self._line(p.detail, SHORT) + ")"
        bad = status in ("degraded", "failing")
        d.add(NORMAL if bad else VERBOSE, "system_message", text)
        if bad:
            d.notify("error", text)

    def _nothing(self, d: Draft) -> None:
        return

    def _error_raised(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, ErrorRaised)
        fatal = bool(p is not None and p.fatal)
        detail = self._error_info(p.error) if p is not None and p.error is not None else ""
        text = "Fatal error" if fatal else "Error"
        if detail:
            text += f": {detail}"
        if p is not None and p.code:
            text += f" ({self._line(p.code, 60)})"
        notify = fatal or SEVERITY_RANK[ev.severity] >= _ERROR_RANK
        d.add(QUIET, "error", text, notify=notify, metadata={"fatal": fatal})
        if fatal:
            d.notify("error", f"{self._line(ev.agent, 60)}: {text}")
