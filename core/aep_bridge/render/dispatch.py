"""The renderer's entry: `Renderer.render` finds the handler of an event's type, runs it on a
`Draft` and finishes what it drafted; `Renderer.thread_name` names a session's thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Final

from ..aep.envelope import Event
from ..aep.payloads import SessionStarted
from ..aep.registry import Capture
from ..contract.types import NotificationMessage
from .agent import AgentMixin
from .attention import AttentionMixin
from .cards import CardsMixin
from .control import ControlMixin
from .draft import DEFAULT_NOTIFY, Draft, Rendered, Verbosity
from .helpers import _MARKERS, LEVELS, MAX_SUMMARY, MAX_THREAD_NAME, VERBOSE, _last_folder, _typed
from .message import MessageMixin
from .records import RecordsMixin
from .run import RunMixin
from .session import SessionMixin
from .tool import ToolMixin
from .vendor import VendorMixin

#: renderings kept so that rendering one event again for the same look repeats it
_RENDERINGS_KEPT: Final = 64
_UUID: Final = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


class Renderer(
    SessionMixin,
    RunMixin,
    ToolMixin,
    AttentionMixin,
    MessageMixin,
    AgentMixin,
    RecordsMixin,
    ControlMixin,
    VendorMixin,
    CardsMixin,
):
    """Turns AEP events into what a channel shows, gated and redacted for that channel.

    Each event family is a mixin (`session`, `run`, `tool`, ...) over `RendererBase`;
    `_HANDLERS` maps each type to its handler."""

    def render(
        self,
        event: Event,
        *,
        ceiling: Capture,
        verbosity: Verbosity,
        notify: Collection[str] = DEFAULT_NOTIFY,
        edits: bool = True,
    ) -> Rendered:
        """`event` as messages, a notification and a thread name for a channel.

        `notify` says what may ring (`ChannelConfig.notify`); `edits`, whether the channel
        edits messages in place (its capability). The renderer keeps each thread's
        conversation per look (ceiling, verbosity, notify, edits): call it once per event and
        look, in the order of the events; the same event again for the same look gives the
        same rendering.
        """
        level = LEVELS.get(verbosity)
        if level is None:
            raise ValueError(f"verbosity must be quiet, normal or verbose, not {verbosity!r}")
        ring = frozenset(notify)
        look = (ceiling, verbosity, tuple(sorted(ring)), edits)
        again = self._renderings.get((event.id, *look))
        if again is not None:
            return again
        gated = self._gate(event, ceiling)
        thread = self._thread(gated, look)
        draft = Draft(gated, ceiling, level, ring, edits, thread)
        hidden = event.severity == "debug" and level < VERBOSE
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, draft)  # runs even when hidden: plans and cards keep their state
        elif not hidden:
            self._vendor(draft, verbosity)
        if gated.type == "session.started":
            draft.rename = self.thread_name(event, ceiling=ceiling)
        if hidden:
            rendered = Rendered(rename=draft.rename)
        else:
            self._settle(draft)
            messages = tuple(self._finish(m) for need, m in draft.items if need <= level)
            notification = None
            if draft.notification is not None:
                kind, summary = draft.notification
                notification = NotificationMessage(
                    session_id="", type=kind, summary=self._line(summary, MAX_SUMMARY)
                )
            rendered = Rendered(messages=messages, notification=notification, rename=draft.rename)
        if gated.type == "session.ended" and gated.session is not None:
            self._forget(gated.source, gated.session)
        self._renderings[(event.id, *look)] = rendered
        while len(self._renderings) > _RENDERINGS_KEPT:
            self._renderings.popitem(last=False)
        return rendered

    def thread_name(self, event: Event, *, ceiling: Capture) -> str:
        """The name of a session's thread: its label, else its folder, else agent and id.

        Read from `session.started` (other events give the agent and session id). Always
        redacted, one line, at most 100 characters.
        """
        gated = self._gate(event, ceiling)
        payload = _typed(gated, SessionStarted)
        if payload is not None and payload.label:
            name = self._line(payload.label, MAX_THREAD_NAME)
            if _MARKERS.sub("", name).strip(" .,:;-"):  # not a label that was all secret
                return name
        if payload is not None and payload.cwd:
            folder = _last_folder(self._t(payload.cwd))
            if folder:
                return self._line(folder, MAX_THREAD_NAME)
        session = gated.session
        if session is not None and _UUID.fullmatch(session):
            session = session[:8]  # Claude Code's ids: the first 8 tell sessions apart
        who = " ".join(x for x in (gated.agent, session) if x)
        return self._line(who, MAX_THREAD_NAME) or "session"


_Handler = Callable[[Renderer, Draft], None]
#: Every registered AEP 0.1 type and AEP-0007's messages; anything else is "unknown".
_HANDLERS: Final[dict[str, _Handler]] = {
    "session.started": Renderer._session_started,
    "session.ended": Renderer._session_ended,
    "session.compacted": Renderer._session_compacted,
    "run.started": Renderer._run_started,
    "run.finished": Renderer._run_finished,
    "run.failed": Renderer._run_failed,
    "run.cancelled": Renderer._run_cancelled,
    "run.step.started": Renderer._step_started,
    "run.step.finished": Renderer._step_finished,
    "tool.requested": Renderer._tool_requested,
    "tool.completed": Renderer._tool_completed,
    "tool.failed": Renderer._tool_failed,
    "tool.denied": Renderer._tool_denied,
    "attention.requested": Renderer._attention_requested,
    "attention.answered": Renderer._attention_answered,
    "attention.resolved": Renderer._attention_resolved,
    "attention.timeout": Renderer._attention_timeout,
    "attention.routed": Renderer._attention_routed,
    "progress.status": Renderer._progress_status,
    "progress.task.planned": Renderer._task_planned,
    "progress.task.completed": Renderer._task_completed,
    "progress.artifact.produced": Renderer._artifact,
    "delegation.subagent.started": Renderer._subagent_started,
    "delegation.subagent.stopped": Renderer._subagent_stopped,
    "agent.presence": Renderer._presence,
    "agent.idle": Renderer._idle,
    "agent.health": Renderer._health,
    "agent.heartbeat": Renderer._nothing,
    "error.raised": Renderer._error_raised,
    "state.snapshot": Renderer._state_snapshot,
    "state.delta": Renderer._state_delta,
    "resource.retrieval.requested": Renderer._retrieval_requested,
    "resource.retrieval.returned": Renderer._retrieval_returned,
    "resource.retrieval.reranked": Renderer._retrieval_reranked,
    "resource.citation.recorded": Renderer._citations,
    "assessment.evaluation.recorded": Renderer._evaluation,
    "assessment.feedback.received": Renderer._feedback,
    "assessment.guardrail.recorded": Renderer._guardrail,
    "message.agent.replied": Renderer._agent_replied,
    "message.user.submitted": Renderer._user_submitted,
    "control.attention.respond": Renderer._respond,
    "control.cancel": Renderer._cancel,
    "control.pause": Renderer._pause,
    "control.resume": Renderer._resume,
    "control.accepted": Renderer._accepted,
    "control.rejected": Renderer._rejected,
}
#: The types the renderer maps itself; everything else goes to the vendor renderer.
RENDERED_TYPES: Final = frozenset(_HANDLERS)
