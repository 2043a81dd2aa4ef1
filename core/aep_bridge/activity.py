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
  its own line there.
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

from .markup import Blocks, Details, Paragraph, Span, plain
from .tools import ToolView
from .types import OutgoingKind

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
#: A reply longer than this is not extended by a footer (it may be split on its way out).
TAIL_ROOM: Final = 3_000

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

    def blocks(self, *, durations: bool) -> Blocks:
        """The message: a line per call (its state, what it does, what came of it), each
        followed by what can be unfolded (a diff, a failure's last lines)."""
        out: list[Any] = []
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
        extra = len(plain((Paragraph(spans=view.title), *view.details))) + 40
        return len(plain(self.blocks(durations=True))) + extra <= ACTIVITY_ROOM


@dataclass
class Tail:
    """The thread's last bubble, which a later event may extend instead of adding one."""

    kind: str  # "header" (the session's first message), "reply" or "footer" (a run's end)
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

    def place(self, call_key: str, view: ToolView, opener: str) -> Activity:
        """The activity a new call goes in: the open one if it has room, else a new one
        keyed by `opener` (the id of the event that opens it: rendering is per event)."""
        activity = self.activity
        if activity is None or not activity.has_room_for(view):
            activity = self.activity = Activity(key=f"activity:{opener}")
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
