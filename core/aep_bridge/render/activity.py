"""A session's thread as a conversation: what the renderer remembers of it between events.

A chat thread reads well when a stretch of tool calls is one message, edited in place as the
calls run and finish, and when the lines a run ends with (how long it took, what it cost, that
the session ended) sit under the reply they close instead of arriving as bubbles of their own.
This module keeps what that takes, per thread and per look (capture ceiling and verbosity, as
the core renders once per look, in event order):

- the open **activity**: the tool calls since the thread's last bubble, in the order they were
  made, each with how it reads (`tools.ToolView`). A new bubble of anything else (a reply, a
  card, the plan's first showing) closes it; the next call opens another, so the thread keeps
  the order things happened in. A call that finishes after its activity closed still updates
  its own line there. When the thread's last bubble is a short reply (the agent saying what
  it is about to do), the activity opens in that reply's message, under its words, so the
  narration heads the work it announces (`COMBINED_ROOM` bounds the whole message).
- the **tail**: the thread's last bubble when a later event may extend it (the session's
  header, which the first prompt joins; a reply, which the run's footer and the session's end
  join). Anything shown after it clears it.
- at `quiet`, the reply **held** until the run says whether it was the last.

Everything is bounded: threads (least recently used first), calls per activity (a full one
closes), and the calls remembered for their late updates.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from ..contract.types import OutgoingKind
from ..markup import Blocks, Details, Paragraph, Span, plain
from ..tools import ToolView

#: An activity message closes when its plain text would pass this many characters (platforms
#: cut messages at 2,000 to 4,096; the outbox cuts an edited message that outgrows its limit).
ACTIVITY_ROOM: Final = 3_000
#: ... or when it holds this many calls.
ACTIVITY_CALLS: Final = 30
#: Calls remembered per thread for their late updates (a call finishing after its activity
#: closed), and bubble keys remembered per thread.
CALLS_KEPT: Final = 64
#: Keys of a thread's bubbles remembered (a message with one of them is an edit).
KEYS_KEPT: Final = 256
#: A reply longer than this, as long as its markup may be (`marked_size`), is not extended by
#: a footer: it goes unkeyed, split whole on its way out, since a keyed message is one
#: message that the outbox cuts at the limit. With the footer and the session's end under
#: it, a reply within it stays within the smallest platform limit (Discord's 1,900).
TAIL_ROOM: Final = 1_500
#: A reply and the call lines under it, as long as their markup may be (`marked_size`),
#: what unfolds (a diff, output) aside: well within the smallest platform limit (Discord's
#: 1,900, counted on its markdown, what unfolds going to its embeds), so a reply that opens
#: an activity is never cut; the whole message stays within `ACTIVITY_ROOM` (Telegram's
#: 4,096 counts all of it). Should escaping push it past a limit anyway, the outbox cuts an
#: edit at its end: the last calls' lines, never the reply above them.
COMBINED_ROOM: Final = 1_500
#: What unfolds, kept apart from the text by the platform that keeps most apart (Discord's
#: ten embeds a message); more is counted as text.
FOLDS_APART: Final = 10

#: How a call's state reads at the start of its line.
ICONS: Final[dict[str, str]] = {
    "running": "⏳",
    "success": "✅",
    "failed": "❌",
    "denied": "🚫",
    "other": "⚠️",
}


@dataclass
class ToolLine:
    """One tool call in an activity message."""

    call_id: str
    view: ToolView
    status: str = "running"
    duration_ms: int | None = None
    tool: str = ""


@dataclass
class Activity:
    """One activity message: a stretch of tool calls, shown as one edited message."""

    key: str
    lines: OrderedDict[str, ToolLine] = field(default_factory=OrderedDict)
    #: the reply the calls are shown under (empty for an activity of its own), and what its
    #: message is and says of itself
    head: Blocks = ()
    message_type: OutgoingKind = "tool_update"
    head_metadata: dict[str, Any] = field(default_factory=dict)

    def blocks(self, *, durations: bool) -> Blocks:
        """The message: the reply it heads, if any, then a line per call (its state, what it
        does, what came of it), each followed by what can be unfolded (a diff, a failure's
        last lines)."""
        out: list[Any] = list(self.head)
        run: list[Span] = []  # lines without details read as one paragraph, a line each
        for line in self.lines.values():
            if run:
                run.append(Span(text="\n"))
            run += [Span(text=ICONS.get(line.status, "•") + " "), *line.view.title]
            facts = [line.view.summary] if line.view.summary else []
            if durations and line.duration_ms is not None:
                facts.append(duration(line.duration_ms))
            if facts:
                run.append(Span(text=" — " + " · ".join(facts), italic=True))
            if line.view.details:
                out.append(Paragraph(spans=tuple(run)))
                out.extend(line.view.details)
                run = []
        if run:
            out.append(Paragraph(spans=tuple(run)))
        return tuple(out)

    def metadata(self) -> dict[str, Any]:
        """The structure behind the text, for channels that render richly."""
        return {
            **self.head_metadata,
            "activity": True,
            "tools": [
                {
                    "tool": line.tool,
                    "call_id": line.call_id,
                    "status": line.status,
                    "duration_ms": line.duration_ms,
                }
                for line in self.lines.values()
            ],
        }

    def has_room_for(self, view: ToolView) -> bool:
        if len(self.lines) >= ACTIVITY_CALLS:
            return False
        title = len(plain((Paragraph(spans=view.title),))) + 40
        extra = title + len(plain(view.details))
        blocks = self.blocks(durations=True)
        if len(plain(blocks)) + extra > ACTIVITY_ROOM:
            return False
        if not self.head:
            return True
        # under a reply: the text outside what unfolds within `COMBINED_ROOM` (what unfolds
        # is apart where a platform counts it apart, Discord's embeds; all of it is within
        # ACTIVITY_ROOM, under the limits that count it)
        shown = [b for b in blocks if not isinstance(b, Details)]
        folds = [b for b in blocks if isinstance(b, Details)]
        inline = folds[FOLDS_APART:]  # past the folds a platform keeps apart: in the text
        return marked_size((*shown, *inline)) + title <= COMBINED_ROOM


@dataclass
class Tail:
    """The thread's last bubble, which a later event may extend instead of adding one."""

    #: "header" (the session's first message), "reply", "answer" (a reply with its run's
    #: footer: the calls of a later run do not go under it) or "footer" (a run's end)
    kind: str
    key: str
    message_type: OutgoingKind
    blocks: Blocks
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Held:
    """At `quiet`: a reply not shown yet, until the run says whether it was the last."""

    key: str | None  # None for a long one (it may be split; no footer joins it)
    blocks: Blocks
    metadata: dict[str, Any]


@dataclass
class Thread:
    """What the renderer remembers of one thread, for one look."""

    activity: Activity | None = None
    #: call key -> the activity that shows it (for updates after it closed)
    calls: OrderedDict[str, Activity] = field(default_factory=OrderedDict)
    tail: Tail | None = None
    held: Held | None = None
    #: keys of the bubbles already in the thread (a message with one of them is an edit)
    shown: OrderedDict[str, None] = field(default_factory=OrderedDict)
    #: the prompts already shown, so a run started with the same one does not repeat it
    prompts: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def place(self, call_key: str, view: ToolView, opener: str, *, under: bool) -> Activity:
        """The activity a new call goes in: the open one if it has room, else a new one: in
        the tail's message when `under` is allowed and the tail is a reply with room for the
        call (the reply then is no longer the tail: a footer would drop the calls), else one
        keyed by `opener` (the id of the event that opens it: rendering is per event)."""
        activity = self.activity
        if activity is None or not activity.has_room_for(view):
            activity = None
            tail = self.tail
            if under and tail is not None and tail.kind == "reply":
                headed = Activity(
                    key=tail.key,
                    head=tail.blocks,
                    message_type=tail.message_type,
                    head_metadata=dict(tail.metadata),
                )
                if headed.has_room_for(view):
                    activity = headed
                    self.tail = None
            if activity is None:
                activity = Activity(key=f"activity:{opener}")
            self.activity = activity
        self.calls[call_key] = activity
        while len(self.calls) > CALLS_KEPT:
            self.calls.popitem(last=False)
        return activity

    def saw(self, key: str | None) -> bool:
        """Note a message shown with `key`; whether it is a new bubble (not an edit)."""
        if key is None:
            return True
        if key in self.shown:
            self.shown.move_to_end(key)  # kept while it is edited (the plan, a long activity)
            return False
        self.shown[key] = None
        while len(self.shown) > KEYS_KEPT:
            self.shown.popitem(last=False)
        return True

    def prompted(self, text: str) -> None:
        self.prompts[text] = None
        while len(self.prompts) > 16:
            self.prompts.popitem(last=False)


#: characters a platform's markup may escape with a backslash
_ESCAPED: Final = frozenset("\\*_~`|>#[]()<&")


def marked_size(blocks: Blocks) -> int:
    """At least as long as any platform's markup of `blocks` (within a few characters a
    block): their plain text, a backslash for each character markup may escape, a pair of
    markers for each style and a link's address with its brackets."""
    extra = 0
    stack: list[Any] = [block.model_dump() for block in blocks]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("text"), str) and "bold" in item:  # a span
                text: str = item["text"]
                extra += sum(1 for c in text if c in _ESCAPED)
                extra += 4 * sum(1 for k in ("bold", "italic", "code", "strike") if item.get(k))
                extra += len(item["url"]) + 4 if item.get("url") else 0
            else:
                stack.extend(item.values())
                extra += 8 if item.get("kind") == "code" else 0  # a code block's fences
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return len(plain(blocks)) + extra


def with_footer(blocks: Blocks, line: str) -> Blocks:
    """`blocks` with `line` in italics under them (the run's or the session's last word)."""
    return (*blocks, Paragraph(spans=(Span(text=line, italic=True),)))


def first_line(blocks: Blocks) -> str:
    """The first non-blank line of `blocks`, as plain text (a reply's gist, for a heads-up)."""
    for block in blocks:
        if isinstance(block, Details):
            continue
        text = plain((block,)).strip()
        if text:
            return text.splitlines()[0].strip()
    return ""


def duration(ms: int) -> str:
    """How long something took, as a person says it: `91 ms`, `1.4 s`, `7 s`, `1m 23s`,
    `2h 05m`."""
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"
