"""`session.*`: the session's header, its end and its compactions."""

from __future__ import annotations

from .. import tools
from ..aep.payloads import SessionEnded, SessionStarted
from ..aep.payloads.optional import SessionCompacted
from ..markup import Blocks, Paragraph, Span
from .activity import Tail, duration
from .base import MAX_THREADS, RendererBase
from .draft import Draft
from .helpers import NORMAL, QUIET, SHORT, _number, _typed


class SessionMixin(RendererBase):
    """`session.started`, `session.ended`, `session.compacted`."""

    def _session_started(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, SessionStarted)
        head = "Session started"
        details: list[str] = []
        if p is not None:
            if p.label:
                head += ": " + self._line(p.label, SHORT)
            if p.client is not None:
                details.append(self._line(f"{p.client.name} {p.client.version or ''}"))
            if p.model:
                details.append(self._line(p.model))
            if p.cwd:
                # kept as the agent wrote it, to match the paths in its tool calls (what is
                # shown is redacted on the way out, as everything)
                self._cwds[(ev.source, ev.session or "", d.ceiling)] = p.cwd.strip()
                while len(self._cwds) > MAX_THREADS:
                    self._cwds.popitem(last=False)
                details.append(self._line(tools.display_path(p.cwd.strip(), None)))
            if p.parent is not None:
                who = f"{p.parent.agent} " if p.parent.agent else ""
                details.append(f"subagent of {self._line(who + p.parent.session)}")
        if not details:
            details.append(self._line(ev.agent))
        facts = " · ".join(x for x in details if x)
        blocks: Blocks = (
            Paragraph(spans=(Span(text=head, bold=True),)),
            Paragraph(spans=(Span(text=facts, italic=True),)),
        )
        key = f"session:{ev.id}"
        metadata = {"agent": ev.agent, "model": p.model if p else None}
        d.add(QUIET, "system_message", "", key=key, metadata=metadata, blocks=blocks)
        if d.edits:  # the first prompt joins it
            d.tail = Tail("header", key, "system_message", blocks, metadata)

    def _session_ended(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, SessionEnded)
        self._release_held(d, None)
        reason = p.reason if p is not None else None
        text = f"Session ended ({reason})" if reason else "Session ended"
        tail = []
        if p is not None and p.duration_ms is not None:
            tail.append(f"after {duration(p.duration_ms)}")
        if p is not None and p.runs is not None:
            tail.append(f"{p.runs} run" + ("" if p.runs == 1 else "s"))
        if tail:
            text += " " + ", ".join(tail)
        text += "."
        rings = "session_end" in d.ring
        if not self._extend_tail(d, text, level=QUIET):
            d.add(
                QUIET,
                "session_end",
                text,
                key=f"end:{ev.id}",
                notify=rings,
                metadata={"reason": reason},
            )
        agent = self._line(ev.agent)
        if reason == "error":
            if "final_replies" in d.ring or rings:
                d.notify("error", f"{agent}: the session ended with an error")
        elif rings:
            d.notify("completed", f"{agent}: session ended" + (f" ({reason})" if reason else ""))

    def _session_compacted(self, d: Draft) -> None:
        p = _typed(d.event, SessionCompacted)
        text = "The agent compacted its context"
        if p is not None:
            how = ", ".join(self._line(x) for x in (p.trigger, p.strategy) if x)
            if how:
                text += f" ({how})"
            facts = []
            if p.forgotten is not None:
                facts.append(f"{_number(p.forgotten)} items dropped")
            if p.estimated_token_count is not None:
                facts.append(f"about {_number(p.estimated_token_count)} tokens before")
            if facts:
                text += ": " + ", ".join(facts)
        d.add(NORMAL, "system_message", text + ".")
