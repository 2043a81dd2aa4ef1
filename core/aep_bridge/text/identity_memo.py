"""Answers remembered by the identity of immutable values: for work asked of the same tuple
of frozen models several times (the plain text of a message's blocks), where hashing the
value would cost as much as the work.
"""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """The last answers, by `id` of a tuple. The tuple is kept with its answer, so its id is
    not reused while the entry lives; at `size` entries all are dropped. Only tuples are
    kept: the caller promises that what they hold does not change (frozen models)."""

    __slots__ = ("_kept", "_size")

    def __init__(self, size: int) -> None:
        self._kept: dict[int, tuple[tuple[object, ...], V]] = {}
        self._size = size

    def get(self, key: object) -> V | None:
        kept = self._kept.get(id(key))
        return kept[1] if kept is not None and kept[0] is key else None

    def put(self, key: object, value: V) -> V:
        """Keep `value` for `key` (if a tuple), and return it."""
        if type(key) is tuple:
            if len(self._kept) >= self._size:
                self._kept.clear()
            self._kept[id(key)] = (key, value)
        return value
