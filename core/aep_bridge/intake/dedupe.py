"""The dedupe window of intake: the newest `(source, id)` keys, remembered in little memory.

One type for both places intake dedupes in memory: the hub's admission (which events enter
the replay buffer) and the relay client's record of what one `events()` iteration has handed
out. Both hold up to 100,000 keys by default, so a key costs about 20 bytes here, where the
tuples of strings it replaces cost some 230.

The price is a digest in place of the key: two keys with one digest make the later one count
as seen. At 2**-60 a pair that is below one in a billion over a whole window of 100,000 keys;
what it would cost is each user's to say (`Hub.admit`, `RelayClient.events`).
"""

from __future__ import annotations

from array import array
from typing import Final

#: the digest's width
_DIGEST_MASK: Final = (1 << 60) - 1


class KeyWindow:
    """The newest `size` `(source, id)` keys, oldest out first.

    A key is remembered as a 60-bit digest, its hash (SipHash of the strings, keyed per
    process), kept as 8 bytes in one of a few thousand small `bytearray`s (picked by the
    digest's low bits) and in a ring of arrival order: about 20 bytes a key, where a set of
    ints costs 75.
    """

    __slots__ = ("_buckets", "_head", "_mask", "_order", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        count = 1 << max(4, (size // 64).bit_length())  # about 64 digests a bucket when full
        self._mask = count - 1
        self._buckets: list[bytearray | None] = [None] * count
        #: digests in arrival order; the live ones start at `_head`
        self._order = array("Q")
        self._head = 0

    def __len__(self) -> int:
        return len(self._order) - self._head

    def __contains__(self, key: tuple[str, str]) -> bool:
        digest = hash(key) & _DIGEST_MASK
        bucket = self._buckets[digest & self._mask]
        return bucket is not None and _find(bucket, digest.to_bytes(8, "little")) >= 0

    def add(self, key: tuple[str, str], *, trim: bool = True) -> bool:
        """Remember `key`: True when it is new. Past `size`, the oldest key is forgotten
        (one a call: `trim=False` lets a restart take up more, as many as the store held)."""
        digest = hash(key) & _DIGEST_MASK
        needle = digest.to_bytes(8, "little")
        buckets = self._buckets
        index = digest & self._mask
        bucket = buckets[index]
        if bucket is None:
            bucket = buckets[index] = bytearray()
        elif _find(bucket, needle) >= 0:
            return False
        bucket += needle
        order = self._order
        order.append(digest)
        if trim and len(order) - self._head > self.size:
            self._forget_oldest()
        return True

    def _forget_oldest(self) -> None:
        order = self._order
        digest = order[self._head]
        self._head += 1
        if self._head >= 1024 and 2 * self._head >= len(order):
            del order[: self._head]
            self._head = 0
        bucket = self._buckets[digest & self._mask]
        assert bucket is not None
        at = _find(bucket, digest.to_bytes(8, "little"))
        assert at >= 0
        del bucket[at : at + 8]


def _find(bucket: bytearray, needle: bytes) -> int:
    """Where the 8-byte `needle` is in `bucket` as one whole digest, or -1."""
    at = bucket.find(needle)
    while at > 0 and at % 8:  # a match across two digests: look on
        at = bucket.find(needle, at + 1)
    return at


__all__ = ["KeyWindow"]
