"""The eight measures of the realistic session, defined once for every channel.

A channel's reader (bench/realistic.py) turns what a person sees into a `Shown`: the
session's thread as read (bubbles in order, each with every text it showed), the messages
that rang, and the permission card as first shown (its text, the parts in the platform's code
format, its options). `measure` counts the same eight things on every channel, against the
rendering issue's goals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from aep_bridge.aep.registry import REGISTERED_TYPES

#: the goals (issue 16's, for every channel): at most, except `yes`/`all`
GOALS: Final = {"bubbles": 8, "pings": 2, "markdown": 0, "internal": 0, "order": 0, "card": 0}

#: a raw markdown marker left in the visible text (tests/reference_session.py's, without the
#: JSON and internal names, which `INTERNAL` counts; `**` as a bold pair, so that a glob such
#: as `invoices/**/*.py` is not one)
MARKDOWN: Final[dict[str, re.Pattern[str]]] = {
    "**": re.compile(r"\*\*[^\s*][^*\n]*\*\*"),
    "## ": re.compile(r"(?m)^#{1,6} |## "),
    "](http": re.compile(r"\]\(http"),
    "| table row": re.compile(r"(?m)^\|.* \| "),
}
_TYPES = "|".join(re.escape(t) for t in sorted(REGISTERED_TYPES, key=len, reverse=True))
#: JSON, an event type's name, an id, a python repr or an internal field name in the text
INTERNAL: Final[dict[str, re.Pattern[str]]] = {
    '{" or [{': re.compile(r'\{"|\[\{'),
    "event type": re.compile(rf"(?<![\w.])(?:{_TYPES})(?![\w.])"),
    "id": re.compile(
        r"\b(?:evt|ses|run|msg)_\w+|\btoolu_\w+|\b[0-9A-HJKMNP-TV-Z]{26}\b"
        r"|\brun-\d+-[0-9a-z]{26}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
        r"[0-9a-f]{12}\b|\b[0-9a-f]{32}\b"
    ),
    "python repr": re.compile(
        r"\{'\w+':|\['\w|\bobject at 0x|\b\w+: (?:None|True|False)\b|=None\b"
    ),
    "field name": re.compile(
        r"\b(?:structuredPatch|originalFile|userModified|replaceAll|exit_code|args_redacted|"
        r"result_redacted|args_digest|result_digest|call_id|tool_use_id|respond_via|"
        r"expires_at|hook_event_name)\b"
    ),
}


@dataclass
class Bubble:
    """One message in the session's thread: every text it showed, the current one last."""

    versions: list[str]
    card: bool = False


@dataclass
class Card:
    """The permission card as first shown."""

    text: str
    #: the texts shown in the platform's code format (a code span, a code block)
    code: list[str]
    #: the labels of the options it offers
    options: list[str]


@dataclass
class Shown:
    """What a person sees of the session on one channel."""

    channel: str
    #: the session's thread as read, top to bottom
    bubbles: list[Bubble]
    #: the first line of each message that rang
    pings: list[str]
    card: Card | None
    notes: list[str] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return [text for bubble in self.bubbles for text in bubble.versions]


@dataclass(frozen=True)
class Facts:
    """What the session is, for the measures: read off its events (tests/sessions)."""

    failing: str
    #: (what, its new text) of every edit: an Edit's new string, a Write's content
    edits: list[tuple[str, str]]
    #: (what, words only it shows) of what the session sent before the question
    before: list[tuple[str, str]]
    agent: tuple[str, ...]
    label: str
    folder: str
    command: str
    reason: str
    options: list[str]


def _flat(text: str) -> str:
    return " ".join(text.split())


def shows(texts: list[str], wanted: str) -> bool:
    """Whether `wanted` appears, whitespace aside, in one of `texts`."""
    flat = _flat(wanted)
    return any(flat in _flat(t) for t in texts)


def edit_shown(texts: list[str], new_text: str) -> bool:
    """An edit's change is visible when every non-blank line of its new text is."""
    lines = [line.strip() for line in new_text.splitlines() if line.strip()]
    return all(shows(texts, line) for line in lines)


def _counted(texts: list[str], patterns: dict[str, re.Pattern[str]]) -> dict[str, int]:
    return {name: sum(1 for t in texts if p.search(t)) for name, p in patterns.items()}


def out_of_order(shown: Shown, facts: Facts) -> list[str]:
    """What the session sent before the question that is not above the card: below it, or
    nowhere in the thread (everything, when no card is in it)."""
    where = next((i for i, b in enumerate(shown.bubbles) if b.card), None)
    wrong = []
    for what, words in facts.before:
        first = next((i for i, b in enumerate(shown.bubbles) if shows(b.versions, words)), None)
        if first is None:
            wrong.append(f"{what} (not shown)")
        elif where is None or first > where:
            wrong.append(f"{what} (below the card)")
    return wrong


def card_missing(card: Card | None, facts: Facts) -> list[str]:
    """What the card lacks of what a person judges it by."""
    wanted = ["agent", "session name", "folder", "command as code", "reason"]
    wanted += [f"option {o}" for o in facts.options]
    if card is None:
        return wanted
    text = _flat(card.text)
    missing = []
    if not any(name.lower() in text.lower() for name in facts.agent):
        missing.append("agent")
    if _flat(facts.label) not in text:
        missing.append("session name")
    if _flat(facts.folder) not in text:
        missing.append("folder")
    if not any(_flat(facts.command) in _flat(code) for code in card.code):
        missing.append("command as code")
    if _flat(facts.reason) not in text:
        missing.append("reason")
    labels = [_flat(o).lower() for o in card.options]
    missing += [f"option {o}" for o in facts.options if _flat(o).lower() not in labels]
    return missing


def measure(shown: Shown, facts: Facts) -> dict[str, Any]:
    """The eight measures of one channel, with what lies behind each."""
    texts = shown.texts
    markdown = _counted(texts, MARKDOWN)
    internal = _counted(texts, INTERNAL)
    edits = [(what, edit_shown(texts, new)) for what, new in facts.edits]
    order = out_of_order(shown, facts)
    card = card_missing(shown.card, facts)
    return {
        "channel": shown.channel,
        "bubbles": len(shown.bubbles),
        "pings": len(shown.pings),
        "markdown": sum(1 for t in texts if any(p.search(t) for p in MARKDOWN.values())),
        "internal": sum(1 for t in texts if any(p.search(t) for p in INTERNAL.values())),
        "tool output": shows(texts, facts.failing),
        "diffs": sum(1 for _, ok in edits if ok),
        "order": len(order),
        "card": len(card),
        "texts": len(texts),
        "by_markdown": {k: n for k, n in markdown.items() if n},
        "by_internal": {k: n for k, n in internal.items() if n},
        "edits": edits,
        "out_of_order": order,
        "card_missing": card,
        "rang": shown.pings,
        "notes": shown.notes,
    }


#: channels the bubbles goal is not for: the issue sets it for chat channels and the web page;
#: a terminal log cannot edit a stretch of calls into one message, so its count is shown only
NO_BUBBLE_GOAL: Final = frozenset({"console"})


def met(name: str, figures: dict[str, Any]) -> bool:
    """Whether one measure meets its goal (the bubbles of a terminal have none: always met)."""
    value = figures[name]
    if name == "bubbles" and figures.get("channel") in NO_BUBBLE_GOAL:
        return True
    if name == "tool output":
        return bool(value)
    if name == "diffs":
        return bool(value == len(figures["edits"]))
    return bool(value <= GOALS[name])


MEASURES: Final = (
    "bubbles",
    "pings",
    "markdown",
    "internal",
    "tool output",
    "diffs",
    "order",
    "card",
)
