"""`run.*`: a run's start, its end (the reply's footer) and its steps."""

from __future__ import annotations

from ..aep.envelope import Event
from ..aep.payloads import RunCancelled, RunFailed, RunFinished, RunStarted
from ..aep.payloads.optional import RunStepFinished, RunStepStarted
from ..markup import Paragraph, Span, parse_markdown
from .activity import TAIL_ROOM, Tail, duration, first_line, marked_size, with_footer
from .base import RendererBase
from .draft import Draft
from .helpers import MEDIUM, NORMAL, QUIET, VERBOSE, _typed, _usage_text


class RunMixin(RendererBase):
    """`run.started`, `run.finished`, `run.failed`, `run.cancelled`, `run.step.*`."""

    def _run_started(self, d: Draft) -> None:
        p = _typed(d.event, RunStarted)
        prompt = self._text(p.prompt, MEDIUM) if p is not None and p.prompt else ""
        text = "Run started"
        if p is not None and p.trigger:
            text += f" ({p.trigger})"
        if prompt and prompt not in d.thread.prompts:  # a prompt not shown yet: once
            d.thread.prompted(prompt)
            line = f"{text}: {' '.join(prompt.split())}"
            tail = d.thread.tail
            if d.verbosity >= NORMAL and tail is not None and tail.kind == "header":
                # the session's first prompt joins its header, as a submitted one does
                said = (Paragraph(spans=(Span(text=line),)),)
                joined = (*tail.blocks, *said)
                d.add(
                    NORMAL,
                    tail.message_type,
                    "",
                    key=tail.key,
                    metadata=tail.metadata,
                    blocks=joined,
                )
                d.thread.tail = None
                return
            d.add(NORMAL, "system_message", line)
        else:  # the prompt is just above: only the verbose say a run started
            d.add(VERBOSE, "system_message", text)

    def _run_finished(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, RunFinished)
        took = f" in {duration(p.duration_ms)}" if p is not None and p.duration_ms else ""
        usage = _usage_text(p) if p is not None else ""
        summary = self._text(p.summary) if p is not None else ""
        footer = " · ".join(x for x in (f"Finished{took}", usage) if x)
        gist = ""
        if summary:
            self._release_held(d, None)
            text = f"{summary}\n\n{footer}"
            blocks = with_footer(parse_markdown(summary), footer)  # the agent's words
            metadata = {"role": "assistant"}
            if marked_size(blocks) <= TAIL_ROOM:  # else it may be split: no key, no tail
                key = f"reply:{ev.id}"
                d.add(QUIET, "text", text, key=key, metadata=metadata, blocks=blocks)
                if d.edits:
                    d.tail = Tail("answer", key, "text", blocks, metadata)
            else:
                d.add(QUIET, "text", text, metadata=metadata, blocks=blocks)
            gist = first_line(blocks)
        else:
            gist = self._release_held(d, footer) or self._extend_tail(d, footer, level=QUIET)
            if not gist:
                key = f"end:{ev.id}"
                blocks = (Paragraph(spans=(Span(text=footer, italic=True),)),)
                d.add(QUIET, "system_message", footer, key=key, blocks=blocks)
                if d.edits:
                    d.tail = Tail("footer", key, "system_message", blocks)
        if "final_replies" in d.ring:
            agent = self._line(ev.agent, 60)
            d.notify("completed", f"{agent} finished" + (f": {gist}" if gist else ""))

    def _run_failed(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, RunFailed)
        self._release_held(d, None)
        reason = self._line(p.reason) if p is not None else ""
        agent = self._line(ev.agent)
        ring = "final_replies" in d.ring
        if reason == "budget_exceeded":
            text = "Run stopped: the budget is exceeded"
            if ring:
                d.notify("budget_warning", f"{agent}: run stopped, budget exceeded")
        else:
            text = f"Run failed: {reason}" if reason else "Run failed"
            if ring:
                d.notify("error", f"{agent}: run failed" + (f" ({reason})" if reason else ""))
        if p is not None and p.error is not None:
            detail = self._error_info(p.error)
            if detail:
                text += f" ({detail})"
        if p is not None and p.duration_ms is not None:
            text += f" after {duration(p.duration_ms)}"
        d.add(QUIET, "error", text, metadata={"reason": reason or None})

    def _run_cancelled(self, d: Draft) -> None:
        p = _typed(d.event, RunCancelled)
        text = "Run cancelled"
        if p is not None and p.by:
            text += f" by {p.by}"
        if p is not None and p.reason:
            text += ": " + self._line(p.reason, MEDIUM)
        d.add(NORMAL, "system_message", text)

    def _step_started(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, RunStepStarted)
        head = f"Step {self._line(ev.step)}" if ev.step else "Step"
        if p is not None and p.name:
            head += ": " + self._line(p.name)
        key = _step_key(ev)
        self._remember(ev, d.ceiling, key, head)
        text = head
        if p is not None and p.initial_num_steps is not None:
            text += f" (of {p.initial_num_steps})"
        d.add(VERBOSE, "system_message", text, key=key)

    def _step_finished(self, d: Draft) -> None:
        ev = d.event
        p = _typed(ev, RunStepFinished)
        key = _step_key(ev)
        head = self._recall(ev, d.ceiling, key) or (
            f"Step {self._line(ev.step)}" if ev.step else "Step"
        )
        status = self._line(p.status) if p is not None and p.status else "done"
        d.add(VERBOSE, "system_message", f"{head} ({status})", key=key)


def _step_key(ev: Event) -> str:
    return f"step:{ev.run or ''}:{ev.step or ev.id}"
