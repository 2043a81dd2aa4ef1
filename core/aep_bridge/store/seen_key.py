"""The dedupe window's key on disk: a 64-bit digest of `(stream, source, id)`.

The window (`seen`) held the three strings and a unique index over them: some 200 bytes a
key, 40 MB at its bound of 200,000 keys. A digest in an INTEGER column costs some 36 (the
row and its index): 7 MB at the bound (`tests/test_store_disk.py` measures it).

Stable across processes and versions (it is stored), unlike Python's salted `hash`: BLAKE2b
cut to 8 bytes, over each part with its length so that no two triples make the same bytes.
The price is the intake window's (`intake/dedupe.py`): two keys with one digest make the
later event count as handled, and it would not be shown. With W keys in the window, a new
key collides with one of them with odds W / 2**64: 1 in 9e13 at the default 200,000, below
one in ten thousand over a billion events.
"""

from __future__ import annotations

from hashlib import blake2b


def seen_key(stream: str, source: str, event_id: str) -> int:
    """The digest `seen.key` holds for `(stream, source, id)`: a signed 64-bit integer, as
    SQLite's INTEGER is. Also the SQL function `aep_seen_key` of the migration that made it."""
    data = f"{len(stream)}:{stream}{len(source)}:{source}{event_id}".encode(
        "utf-8", "surrogatepass"
    )
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little", signed=True)


__all__ = ["seen_key"]
