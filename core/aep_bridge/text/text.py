"""Measuring and splitting text the way platforms count it.

Platforms limit messages in different units: Discord and Slack count characters, ntfy counts
UTF-8 bytes, Telegram counts UTF-16 code units. `split_text` cuts long text into pieces under
a limit in the right unit, preferring paragraph, then line, then word boundaries, and never
cutting a character in half. `split_markdown` and `truncate_markdown` do the same for the
outbox's messages without breaking a fenced code block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

LengthUnit = Literal["chars", "bytes", "utf16"]
#: What a cut-down text ends with.
ELLIPSIS: Final = "…"


def measure(text: str, unit: LengthUnit = "chars") -> int:
    """The length of `text` as a platform counting in `unit` sees it."""
    if unit == "chars":
        return len(text)
    if unit == "bytes":
        return len(text.encode("utf-8"))
    return len(text.encode("utf-16-le")) // 2


def _fit(text: str, limit: int, unit: LengthUnit) -> int:
    """How many characters of `text` fit in `limit` units (0 if not even one)."""
    if unit == "chars":
        return max(0, min(len(text), limit))
    if measure(text, unit) <= limit:
        return len(text)
    low, high = 0, min(len(text), limit)  # every character is at least one unit
    while low < high:  # binary search: the longest prefix within the limit
        mid = (low + high + 1) // 2
        if measure(text[:mid], unit) <= limit:
            low = mid
        else:
            high = mid - 1
    return low


def split_text(text: str, limit: int, unit: LengthUnit = "chars") -> list[str]:
    """Pieces of `text`, each at most `limit` units, that join back to `text`.

    Cuts fall after a blank line, else after a newline, else after a space, within the last
    third of each piece; only a run with no such place is cut mid-word.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    pieces: list[str] = []
    rest = text
    while measure(rest, unit) > limit:
        end = max(1, _fit(rest, limit, unit))  # a character too wide still goes
        window = rest[:end]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            position = window.rfind(separator)
            if position >= end // 3:
                cut = position + len(separator)
                break
        if cut <= 0:
            cut = end
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest or not pieces:
        pieces.append(rest)
    return pieces


# -- markdown: fenced code stays fenced ------------------------------------------------


#: A CommonMark fence line: up to three spaces, then three or more backticks or tildes.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})([^\n]*)")


@dataclass(frozen=True, slots=True)
class _OpenFence:
    marker: str  # the fence characters that opened it: "```", "````", "~~~"
    info: str  # the info string (the language tag)
    start: int  # where its opening line starts


def _open_fence(text: str) -> _OpenFence | None:
    """The fenced code block still open at the end of `text`, if any."""
    opened: _OpenFence | None = None
    position = 0
    for line in text.split("\n"):
        match = _FENCE.fullmatch(line)
        if match is not None:
            marker, info = match.group(1), match.group(2)
            if opened is None:
                if not (marker[0] == "`" and "`" in info):  # a backtick fence's info has none
                    opened = _OpenFence(marker, info.strip(), position)
            elif (
                marker[0] == opened.marker[0]
                and len(marker) >= len(opened.marker)
                and not info.strip()  # a closing fence has no info string
            ):
                opened = None
        position += len(line) + 1
    return opened


def _cut(text: str, budget: int, unit: LengthUnit, keep: int) -> int:
    """Where the piece of `text` within `budget` units ends, past the first `keep` characters.

    `split_text` chooses the place (a paragraph, line or word boundary); a place inside a
    fence line moves to the start of that line, so a marker is never cut in half.
    """
    prefix = text[: budget + 1]  # every character is at least one unit: this is over budget
    cut = len(split_text(prefix, budget, unit)[0])
    if cut <= keep:  # the natural place leaves nothing but a reopened fence: cut hard
        cut = max(_fit(text, budget, unit), keep + 1)
    line_start = text.rfind("\n", 0, cut) + 1
    if line_start < cut:
        line_end = text.find("\n", cut)
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if _FENCE.fullmatch(line) is not None and line_start > keep:
            cut = line_start
    return cut


def split_markdown(text: str, limit: int, unit: LengthUnit = "chars") -> list[str]:
    """Pieces of `text`, each at most `limit` units, in order, fenced code kept fenced.

    Built on `split_text` (which prefers paragraph, line, then word boundaries). When a cut
    falls inside a fenced code block, the piece gets a closing fence and the next piece
    reopens the block with the same marker and language tag, so every piece renders as code
    where the original did. The added fence characters are counted in the limit. A limit
    too small to hold a reopened fence line and some content falls back to plain splitting.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    pieces: list[str] = []
    rest = text
    keep = 0  # length of the reopened fence line at the start of `rest`
    while measure(rest, unit) > limit:
        budget = limit
        cut = 0
        fence: _OpenFence | None = None
        for _ in range(4):  # a shorter piece may end in another block, with a longer marker
            if budget <= keep:
                return [*pieces, *split_text(rest, limit, unit)]
            cut = _cut(rest, budget, unit, keep)
            fence = _open_fence(rest[:cut])
            closing = 0 if fence is None else 1 + len(fence.marker)  # ASCII: 1 unit each
            if measure(rest[:cut], unit) + closing <= limit:
                break
            budget = limit - closing
        else:
            return [*pieces, *split_text(rest, limit, unit)]
        if fence is not None and fence.start > keep:
            opener_end = rest.find("\n", fence.start)
            if opener_end < 0 or not rest[opener_end + 1 : cut].strip():
                # the piece would end with the block's opening line alone: open the block
                # in the next piece instead
                cut, fence = fence.start, None
        piece = rest[:cut]
        if fence is None:
            pieces.append(piece)
            rest, keep = rest[cut:], 0
            continue
        close = fence.marker if piece.endswith("\n") else "\n" + fence.marker
        reopen = f"{fence.marker}{fence.info}\n"
        pieces.append(piece + close)
        rest, keep = reopen + rest[cut:], len(reopen)
    if rest or not pieces:
        pieces.append(rest)
    return pieces


def truncate_markdown(text: str, limit: int, unit: LengthUnit = "chars") -> str:
    """`text` cut to at most `limit` units, ending with "…" (and a closing fence if needed).

    For an edit of one card, which must stay one message.
    """
    if measure(text, unit) <= limit:
        return text
    room = limit - measure(ELLIPSIS, unit)
    if room < 1:
        return text[: _fit(text, limit, unit)]
    head = text[: _fit(text, room, unit)]
    fence = _open_fence(head)
    if fence is None:
        return head + ELLIPSIS
    for _ in range(2):  # the shorter head may end in another block, with a longer marker
        closing = "\n" + fence.marker
        if room - len(closing) < 1:
            break
        head = text[: _fit(text, room - len(closing), unit)]
        fence = _open_fence(head)
        if fence is None:
            return head + ELLIPSIS
        cut = head + ELLIPSIS + "\n" + fence.marker
        if measure(cut, unit) <= limit:
            return cut
    return text[: _fit(text, room, unit)] + ELLIPSIS
