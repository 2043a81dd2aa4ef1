"""The renderer's base: gating, redacted text, and the bounded state kept per session and
look, shared by every event family's mixin.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from typing import Any, Final

from .. import tools
from ..aep.capture import downlevel, held_to_declared
from ..aep.envelope import Event
from ..aep.payloads import Answer, ErrorInfo
from ..aep.redaction import Redactor, digest
from ..aep.registry import Capture
from ..contract.types import OutgoingMessage
from ..markup import map_text, plain
from ..tools import ToolCall, ToolOutcome, ToolView
from .activity import Tail, Thread, first_line, with_footer
from .draft import Draft, Rendered, ToolRenderer, VendorRenderer
from .helpers import MAX_TEXT, NORMAL, QUIET, SHORT, VERBOSE, _clip, _clip_blocks, _compact

log = logging.getLogger(__name__)

#: Bounds on the renderer's memory: sessions with a plan, remembered step names (the tasks
#: per plan are `progress.MAX_TASKS`).
MAX_PLANS: Final = 512
MAX_HEADS: Final = 4096
#: threads whose conversation state is kept (per look), tool calls kept for their cards
MAX_THREADS: Final = 256
MAX_CALLS: Final = 2048
#: card keys whose safe form is remembered
MAX_SAFE_KEYS: Final = 4096
#: A card key is kept as is when it is short and plain; anything else becomes a digest.
_SAFE_KEY: Final = re.compile(r"[A-Za-z0-9_.:@#/-]{1,128}")
_KIND_TITLES: Final[dict[str, str]] = {
    "permission": "asks permission",
    "input": "asks for input",
    "auth": "asks you to sign in",
    "review": "asks for a review",
    "form": "asks you to fill in a form",
    "other": "needs your attention",
}


class RendererBase:
    """The renderer's state and the steps every event family shares: the gate, redacted
    text, the bounded memory per session and look, and the conversation's held reply and
    tail. The event families (`session`, `run`, `tool`, ...) are mixins over this."""

    def __init__(
        self,
        redactor: Redactor,
        *,
        vendor: VendorRenderer | None = None,
        tool: ToolRenderer | None = None,
    ) -> None:
        self.redactor = redactor
        self.vendor = vendor
        self.tool = tool
        #: (source, session, ceiling, verbosity, ring, edits) -> the thread as a conversation
        self._threads: OrderedDict[tuple[Any, ...], Thread] = OrderedDict()
        #: (source, session, ceiling, event id or call key) -> the tool call (for cards)
        self._calls: OrderedDict[tuple[str, str, str, str], ToolCall] = OrderedDict()
        #: (source, session, ceiling) -> the session's working folder
        self._cwds: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        #: the last renderings, by (event id, look)
        self._renderings: OrderedDict[tuple[Any, ...], Rendered] = OrderedDict()
        #: (source, session, ceiling) -> task key -> entry; the plan card of each session
        self._plans: OrderedDict[tuple[str, str, str], OrderedDict[str, dict[str, Any]]] = (
            OrderedDict()
        )
        #: (source, session, ceiling, card key) -> the card's first line
        self._heads: OrderedDict[tuple[str, str, str, str], str] = OrderedDict()
        #: card key -> the key as sent (`_safe_key`)
        self._safe_keys: dict[str, str] = {}
        #: ids of the events whose card could not be rendered (logged once each)
        self._failed_cards: OrderedDict[str, None] = OrderedDict()

    # -- gating and text -------------------------------------------------------------------

    def _gate(self, event: Event, ceiling: Capture) -> Event:
        """`event` down-levelled to `ceiling` and held to its own declared capture."""
        return held_to_declared(downlevel(event, ceiling, redactor=self.redactor))

    def _t(self, value: str | None) -> str:
        """A string from the event, redacted (always before it is cut or composed)."""
        return self.redactor.text(value) if value else ""

    def _text(self, value: str | None, limit: int = MAX_TEXT) -> str:
        """Redacted multi-line text, trimmed and shortened."""
        return _clip(self._t(value).strip(), limit)

    def _line(self, value: str | None, limit: int = SHORT) -> str:
        """Redacted text on one line, shortened."""
        return _clip(" ".join(self._t(value).split()), limit)

    def _finish(self, message: OutgoingMessage) -> OutgoingMessage:
        """The last gate: the whole text and metadata through the pipeline, a safe key.

        A message with blocks has every string of them through the pipeline too (a plugin's
        blocks included), and its text is their plain rendering again."""
        blocks = message.blocks
        if blocks:
            blocks = _clip_blocks(map_text(blocks, self.redactor.text), MAX_TEXT)
            text = plain(blocks)
        else:
            text = _clip(self.redactor.text(message.text), MAX_TEXT)
        metadata = self.redactor.value(message.metadata) if message.metadata else {}
        attachment = message.attachment
        if attachment is not None:
            attachment = attachment.model_copy(
                update={"file_name": self.redactor.text(attachment.file_name)}
            )
        return message.model_copy(
            update={
                "text": text,
                "blocks": blocks,
                "metadata": metadata,
                "key": self._safe_key(message.key),
                "attachment": attachment,
            }
        )

    def _safe_key(self, key: str | None) -> str | None:
        """Keys built from producer ids stay readable when plain, else become a digest.

        A key recurs (a card and its updates, every look): its answer is remembered."""
        if key is None:
            return key
        safe = self._safe_keys.get(key)
        if safe is None:
            if _SAFE_KEY.fullmatch(key) and self.redactor.text(key) == key:
                safe = key
            else:
                safe = "#" + digest(key)[:24]
            if len(self._safe_keys) >= MAX_SAFE_KEYS:
                self._safe_keys.clear()
            self._safe_keys[key] = safe
        return safe

    # -- state -----------------------------------------------------------------------------

    def _remember(self, event: Event, ceiling: Capture, key: str, head: str) -> None:
        slot = (event.source, event.session or "", ceiling, key)
        self._heads[slot] = head
        self._heads.move_to_end(slot)
        while len(self._heads) > MAX_HEADS:
            self._heads.popitem(last=False)

    def _recall(self, event: Event, ceiling: Capture, key: str) -> str | None:
        return self._heads.get((event.source, event.session or "", ceiling, key))

    def _plan(self, event: Event, ceiling: Capture) -> OrderedDict[str, dict[str, Any]]:
        slot = (event.source, event.session or "", ceiling)
        plan = self._plans.get(slot)
        if plan is None:
            plan = self._plans[slot] = OrderedDict()
            while len(self._plans) > MAX_PLANS:
                self._plans.popitem(last=False)
        self._plans.move_to_end(slot)
        return plan

    def _forget(self, source: str, session: str) -> None:
        """A session ended: its plans, cards, calls and conversation are done with."""
        for table in (self._plans, self._heads, self._threads, self._calls, self._cwds):
            for slot in [s for s in table if s[1] == session and s[0] == source]:
                del table[slot]

    def _thread(self, event: Event, look: tuple[Any, ...]) -> Thread:
        """The conversation state of `event`'s thread, for one look."""
        slot = (event.source, event.session or "", *look)
        thread = self._threads.get(slot)
        if thread is None:
            thread = self._threads[slot] = Thread()
            while len(self._threads) > MAX_THREADS:
                self._threads.popitem(last=False)
        self._threads.move_to_end(slot)
        return thread

    def _settle(self, d: Draft) -> None:
        """What the shown messages do to the thread: a new bubble closes the open activity
        (unless it is that activity) and ends the tail (unless it is the new tail)."""
        thread = d.thread
        for need, message in d.items:
            if need > d.verbosity:
                continue
            if not thread.saw(message.key):
                continue  # an edit: the thread's last bubble is still its last
            if thread.activity is None or message.key != thread.activity.key:
                thread.activity = None
            thread.tail = None
        if d.tail is not None and any(
            need <= d.verbosity and m.key == d.tail.key for need, m in d.items
        ):
            thread.tail = d.tail

    def _keep_call(self, event: Event, ceiling: Capture, name: str, call: ToolCall) -> None:
        slot = (event.source, event.session or "", ceiling, name)
        self._calls[slot] = call
        self._calls.move_to_end(slot)
        while len(self._calls) > MAX_CALLS:
            self._calls.popitem(last=False)

    def _call(self, event: Event, ceiling: Capture, name: str) -> ToolCall | None:
        return self._calls.get((event.source, event.session or "", ceiling, name))

    def _cwd(self, event: Event, ceiling: Capture) -> str | None:
        return self._cwds.get((event.source, event.session or "", ceiling))

    def _view(self, call: ToolCall, outcome: ToolOutcome | None, level: int) -> ToolView:
        """How a tool call reads: a plugin's `render_tool`, else the default (`tools`); the
        default too if the plugin fails."""
        verbosity = {QUIET: "quiet", NORMAL: "normal", VERBOSE: "verbose"}[level]
        if self.tool is not None:
            try:
                view = self.tool(call, outcome, verbosity)
            except Exception:
                log.exception("rendering the tool %s: the render_tool hook failed", call.name)
                view = None
            if view is not None and isinstance(view, ToolView):
                return tools.bound_view(view)  # a plugin's view, held to the same bounds
        return tools.render_tool(call, outcome, verbose=level >= VERBOSE)

    # -- what several families say -------------------------------------------------------

    def _release_held(self, d: Draft, footer: str | None) -> str:
        """At `quiet`, the reply held back: shown now (the run's last), with `footer` under
        it. Returns its first line ("" when none was held)."""
        held = d.thread.held
        if held is None:
            return ""
        d.thread.held = None
        if footer and held.key is None:  # too long to take it: the footer on its own
            d.add(QUIET, "text", "", metadata=held.metadata, blocks=held.blocks)
            d.add(QUIET, "system_message", footer)
            return first_line(held.blocks) or "…"
        blocks = with_footer(held.blocks, footer) if footer else held.blocks
        d.add(QUIET, "text", "", key=held.key, metadata=held.metadata, blocks=blocks)
        if d.edits and held.key is not None:
            kind = "answer" if footer else "reply"  # with the run's footer: its last word
            d.tail = Tail(kind, held.key, "text", blocks, held.metadata)
        return first_line(held.blocks) or "…"

    def _extend_tail(self, d: Draft, line: str, *, level: int) -> str:
        """Put `line` under the thread's last bubble (a reply, or a run's footer) instead of
        adding one. Returns that bubble's first line, or "" when there is none to extend."""
        tail = d.thread.tail
        if not d.edits or tail is None or tail.kind == "header":
            return ""
        blocks = with_footer(tail.blocks, line)
        d.add(level, tail.message_type, "", key=tail.key, metadata=tail.metadata, blocks=blocks)
        kind = "answer" if tail.kind == "reply" else tail.kind  # the run's last word
        d.tail = Tail(kind, tail.key, tail.message_type, blocks, tail.metadata)
        return first_line(tail.blocks) or "…"

    def _error_info(self, error: ErrorInfo) -> str:
        parts = [self._line(x, SHORT) for x in (error.type, error.message) if x]
        return ": ".join(x for x in parts if x)

    def _request_title(self, ev: Event, kind: str) -> str:
        title = f"{self._line(ev.agent, 60)} {_KIND_TITLES.get(kind, 'needs your attention')}"
        if ev.subject:
            title += ": " + self._line(ev.subject, 80)
        return _clip(title, SHORT)

    def _answer_text(self, answer: Answer) -> str:
        """The option, the words (a reason beside an option, AEP-0008), or the form values."""
        parts = []
        if answer.option:
            parts.append(self._line(answer.option, 80))
        if answer.text:
            parts.append("“" + self._line(answer.text, SHORT) + "”")
        if answer.values and not parts:
            pairs = [f"{k}={_compact(v)}" for k, v in answer.values.items()]
            parts.append(self._line(", ".join(pairs)))
        return " — ".join(parts)
