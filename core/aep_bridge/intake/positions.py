"""A position `(epoch, seq)` packed into one int, as the hub keeps what it keeps a lot of.

A store-backed session keeps only this of its newest position, and a subscription this of
what it delivered last per session: an int (a small one is shared) costs less than a tuple
of two.
"""

from __future__ import annotations

from typing import Final

from ..store import Position

#: SQLite integers are signed 64-bit: the store does not keep a position beyond this.
MAX_STORED: Final = (1 << 63) - 1


def rank(position: Position) -> int:
    """`position` as one int, ordered as positions are, while its seq is below 2**63."""
    return (position[0] << 63) | position[1]


def unrank(packed: int) -> Position:
    """The position `rank` packed."""
    return (packed >> 63, packed & MAX_STORED)


def storable(position: Position) -> bool:
    """Whether the store can hold `position` (both parts fit a signed 64-bit integer)."""
    return position[0] <= MAX_STORED and position[1] <= MAX_STORED


__all__ = ["MAX_STORED", "rank", "storable", "unrank"]
