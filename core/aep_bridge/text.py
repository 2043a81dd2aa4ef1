"""Measuring and splitting text the way platforms count it.

Platforms limit messages in different units: Discord and Slack count characters, ntfy counts
UTF-8 bytes, Telegram counts UTF-16 code units. `split_text` cuts long text into pieces under
a limit in the right unit, preferring paragraph, then line, then word boundaries, and never
cutting a character in half.
"""

from __future__ import annotations

from typing import Literal

LengthUnit = Literal["chars", "bytes", "utf16"]


def measure(text: str, unit: LengthUnit = "chars") -> int:
    """The length of `text` as a platform counting in `unit` sees it."""
    if unit == "chars":
        return len(text)
    if unit == "bytes":
        return len(text.encode("utf-8"))
    return len(text.encode("utf-16-le")) // 2


def _fit(text: str, limit: int, unit: LengthUnit) -> int:
    """How many characters of `text` fit in `limit` units (at least one)."""
    if unit == "chars":
        return max(1, min(len(text), limit))
    low, high = 1, len(text)
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
        end = _fit(rest, limit, unit)
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
