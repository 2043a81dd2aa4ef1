"""The delivery record: the dedupe window (`seen`) and the resume positions (`positions`).

What a consumer has handled, per stream: an event is new once (its `(source, id)` enters
the window, as a digest with the stream: `seen_key`), and each session's position only moves
forward. A position is coalesced in
memory for the open transaction and written once a session by its commit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .database import _MAX_INT, Database
from .seen_key import seen_key

if TYPE_CHECKING:
    from ..aep.envelope import Event

log = logging.getLogger(__name__)

#: an event's place in its session's stream: `(epoch, seq)`
Position = tuple[int, int]
#: `(source, session)` -> the last position handled (see `Store.floors`)
Floors = dict[tuple[str, str], Position]

_FORGET = "DELETE FROM seen WHERE key = ?"


def floor_of(
    floors: Mapping[tuple[str, str], Position], source: str, session: str
) -> Position | None:
    """The position handled for `session` of `source`: its own, else one recorded for the
    session name alone (source '': written before sources were kept, or by a caller that
    knows no source), else None."""
    return floors.get((source, session)) or floors.get(("", session))


class DeliveryTables(Database):
    """`seen` and `positions`."""

    # -- resume positions ------------------------------------------------------------------

    def position(self, stream: str, session: str) -> tuple[int, int] | None:
        """The last `(epoch, seq)` processed for `session` on `stream`, or None; with several
        sources of that session name, the least advanced (see `positions`)."""
        return self.positions(stream).get(session)

    def positions(self, stream: str) -> dict[str, tuple[int, int]]:
        """Every session name's position on `stream`: what a resuming subscription sends
        (AEP `from` names sessions, not sources). Where several sources share a name, the
        least advanced: resuming from it loses nothing, and the dedupe window drops what
        comes twice. A position recorded without a source counts only for a name no source
        has recorded."""
        sourced: dict[str, Position] = {}
        unsourced: dict[str, Position] = {}
        for (source, session), position in self.floors(stream).items():
            mine = sourced if source else unsourced
            known = mine.get(session)
            mine[session] = position if known is None else min(known, position)
        return {**unsourced, **sourced}  # a source's own position supersedes a nameless one

    def floors(self, stream: str) -> Floors:
        """Every `(source, session)`'s position on `stream`: what was handled already. Read
        them with `floor_of`."""
        rows = self._conn.execute(
            "SELECT source, session, epoch, seq FROM positions WHERE stream = ?", (stream,)
        )
        floors = {(str(a), str(s)): (int(e), int(q)) for a, s, e, q in rows}
        for (of, source, session), position in self._pending_positions.items():
            if of == stream:
                known = floors.get((source, session))
                if known is None or position > known:
                    floors[(source, session)] = position
        return floors

    def set_position(
        self, stream: str, session: str, epoch: int, seq: int, *, source: str = ""
    ) -> None:
        """Record a position; it only moves forward, `(epoch, seq)` compared lexicographically.

        A redelivered or backfilled event (AEP-0003 §7) must not pull the resume point back.
        `source` is the emitter's; without one, the position bounds every source of the name.
        Inside a transaction it is written by the outermost commit (once a session).
        """
        if not (0 <= epoch <= _MAX_INT and 0 <= seq <= _MAX_INT):
            raise ValueError(f"position ({epoch}, {seq}) is outside 0..2**63-1")
        key = (stream, source, session)
        if not self._depth:
            with self.transaction():  # written by its commit
                self._pending_positions[key] = (epoch, seq)
            return
        pending = self._pending_positions
        old = pending.get(key)
        if old is not None and (epoch, seq) <= old:
            return
        pending[key] = (epoch, seq)
        if self._frames:

            def undo() -> None:
                if old is None:
                    pending.pop(key, None)
                else:
                    pending[key] = old

            self._undo_memory(undo)

    # -- the dedupe window -----------------------------------------------------------------

    def remember(self, stream: str, source: str, event_id: str) -> bool:
        """Add `(source, id)` to `stream`'s window: True if it was new, False if seen (or
        if its digest is a remembered key's: see `seen_key` for the odds)."""
        key = (seen_key(stream, source, event_id),)
        cursor = self._conn.execute("INSERT OR IGNORE INTO seen (key) VALUES (?)", key)
        if cursor.rowcount != 1:
            return False
        self._undo_sql(_FORGET, key)
        return True

    def seen(self, stream: str, source: str, event_id: str) -> bool:
        """Whether `(source, id)` is in `stream`'s window."""
        row = self._conn.execute(
            "SELECT 1 FROM seen WHERE key = ?", (seen_key(stream, source, event_id),)
        ).fetchone()
        return row is not None

    def prune_seen(self, keep: int) -> int:
        """Keep the `keep` most recently remembered keys; return how many were dropped."""
        if keep < 0:
            raise ValueError(f"keep must be >= 0, not {keep}")
        self._no_undo()
        cursor = self._conn.execute(
            "DELETE FROM seen WHERE n <= (SELECT n FROM seen ORDER BY n DESC LIMIT 1 OFFSET ?)",
            (keep,),
        )
        return max(cursor.rowcount, 0)

    def record_delivery(self, stream: str, event: Event) -> bool:
        """Dedupe `event` and advance its session's position on `stream`, atomically.

        True when the event is new. For exactly-once effects, make your own writes in the
        same transaction::

            with store.transaction():
                if store.record_delivery(stream, event):
                    ...  # write effects

        Foreign events (commands, `attention.routed`) carry no position and move none.
        """
        with self.transaction(savepoint=False):
            source, event_id = event.dedupe_key
            if not self.remember(stream, source, event_id):
                return False
            position = event.position
            if position is not None and event.session is not None:
                epoch, seq = position
                if epoch <= _MAX_INT and seq <= _MAX_INT:
                    self.set_position(stream, event.session, epoch, seq, source=event.source)
                else:
                    log.warning(
                        "event %s from %s: position (%d, %d) is too large to store; "
                        "the resume point for %s stays where it was",
                        event_id,
                        source,
                        epoch,
                        seq,
                        event.session,
                    )
            return True
