"""The embedded relay's replay buffer (`relay_buffer`, `relay_evicted`): a restart of the
bridge loses no event an emitter was acknowledged for."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .database import _MAX_INT, Database

if TYPE_CHECKING:
    from ..aep.envelope import Event


def _event_id(raw: object) -> str | None:
    """The `id` of a stored event's bytes, or None if they are not a JSON object."""
    try:
        value = json.loads(bytes(raw) if isinstance(raw, (bytes, memoryview)) else str(raw))
    except ValueError:
        return None
    event_id = value.get("id") if isinstance(value, dict) else None
    return event_id if isinstance(event_id, str) else None


class ReplayTables(Database):
    """`relay_buffer` and `relay_evicted`."""

    def buffer_events(self, events: Iterable[Event], keep: int) -> None:
        """Add positioned events to the persisted replay buffer, keeping `keep` per session."""
        touched: dict[tuple[str, str], None] = {}
        rows: list[tuple[str, str, int, int, bytes]] = []
        for event in events:
            key, position = event.session_key, event.position
            if key is None or position is None or max(position) > _MAX_INT:
                continue
            rows.append((key[0], key[1], position[0], position[1], event.raw))
            touched[key] = None
        with self.transaction():
            self._no_undo()
            self._conn.executemany(
                "INSERT OR IGNORE INTO relay_buffer VALUES (?, ?, ?, ?, ?)", rows
            )
            for source, session in touched:
                cut = self._conn.execute(
                    "SELECT epoch, seq FROM relay_buffer WHERE source = ? AND session = ? "
                    "ORDER BY epoch DESC, seq DESC LIMIT 1 OFFSET ?",
                    (source, session, keep),
                ).fetchone()
                if cut is None:
                    continue
                self._conn.execute(
                    "DELETE FROM relay_buffer WHERE source = ? AND session = ? "
                    "AND (epoch, seq) <= (?, ?)",
                    (source, session, cut[0], cut[1]),
                )
                self._conn.execute(
                    "INSERT INTO relay_evicted VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (source, session) DO UPDATE SET epoch = excluded.epoch, "
                    "seq = excluded.seq "
                    "WHERE (excluded.epoch, excluded.seq) "
                    "> (relay_evicted.epoch, relay_evicted.seq)",
                    (source, session, cut[0], cut[1]),
                )

    def drop_buffer(self, source: str, session: str) -> None:
        """Forget one session's persisted replay buffer."""
        with self.transaction():
            self._no_undo()
            for table in ("relay_buffer", "relay_evicted"):
                self._conn.execute(
                    f"DELETE FROM {table} WHERE source = ? AND session = ?",
                    (source, session),
                )

    def buffered_keys(self) -> Iterator[tuple[str, str, int, int, str]]:
        """`(source, session, epoch, seq, id)` of every persisted buffered event, per session
        in position order, without validating the events (a restart may face a million).

        SQLite's JSON functions read the ids; a build without them (before 3.38 they were
        optional) gets them from Python's json module.
        """
        order = " ORDER BY source, session, epoch, seq"
        rows: Iterable[tuple[Any, ...]]
        try:
            rows = self._conn.execute(
                "SELECT source, session, epoch, seq, json_extract(json, '$.id') FROM "
                "(SELECT source, session, epoch, seq, CAST(raw AS TEXT) AS json "
                "FROM relay_buffer) WHERE json_valid(json)" + order
            )
        except sqlite3.OperationalError:  # no such function: json_extract
            rows = (
                (source, session, epoch, seq, _event_id(raw))
                for source, session, epoch, seq, raw in self._conn.execute(
                    "SELECT source, session, epoch, seq, raw FROM relay_buffer" + order
                )
            )
        for source, session, epoch, seq, event_id in rows:
            if isinstance(event_id, str):
                yield source, session, epoch, seq, event_id

    def evicted_positions(self) -> dict[tuple[str, str], tuple[int, int]]:
        """The newest evicted position of each buffer that has lost events."""
        rows = self._conn.execute("SELECT source, session, epoch, seq FROM relay_evicted")
        return {(str(a), str(b)): (int(c), int(d)) for a, b, c, d in rows}

    def buffered(self, source: str, session: str, size: int) -> list[tuple[int, int, bytes]]:
        """The newest `size` buffered events of one session, `(epoch, seq, raw)` in position
        order."""
        rows = self._conn.execute(
            "SELECT epoch, seq, raw FROM relay_buffer WHERE source = ? AND session = ? "
            "ORDER BY epoch DESC, seq DESC LIMIT ?",
            (source, session, size),
        ).fetchall()
        return [(int(e), int(q), bytes(r)) for e, q, r in reversed(rows)]

    def evicted(self, source: str, session: str) -> tuple[int, int] | None:
        """The newest position eviction dropped from one session's buffer, or None."""
        row = self._conn.execute(
            "SELECT epoch, seq FROM relay_evicted WHERE source = ? AND session = ?",
            (source, session),
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))
