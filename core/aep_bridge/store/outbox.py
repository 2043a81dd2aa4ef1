"""The `outbox` table: the platform calls a channel's outbox has queued and not yet settled.

One row per persisted job; the outbox (`aep_bridge.outbox.journal`) is its only user. Every
method runs in the caller's transaction (`Store.transaction()` or an open group).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Final, NamedTuple

from .database import Database as Store  # P1: the connection class (Store composes it)

#: rows deleted in one statement at most (SQLite's variable limit is 32,766)
_DELETE_BATCH: Final = 500


class OutboxRow(NamedTuple):
    """A persisted job as the table holds it (its payload still JSON text)."""

    id: int
    op: str
    session_id: str | None
    payload: str
    priority: object  # as stored: the reader checks it
    coalesce: str | None
    droppable: bool


class OutboxTable:
    """The rows of one channel instance (`channel`) in the `outbox` table."""

    __slots__ = ("_channel", "_conn")

    def __init__(self, store: Store, channel: str) -> None:
        self._conn = store._conn
        self._channel = channel

    def insert(
        self,
        op: str,
        session_id: str | None,
        payload: str,
        priority: int,
        coalesce: str | None,
        droppable: bool,
    ) -> int:
        """Add a job; returns its row id (rows are read back in id order: submit order)."""
        rowid = self._conn.execute(
            "INSERT INTO outbox (channel, op, session_id, payload, priority, coalesce, "
            "droppable, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._channel,
                op,
                session_id,
                payload,
                priority,
                coalesce,
                int(droppable),
                time.time(),
            ),
        ).lastrowid
        assert rowid is not None
        return rowid

    def replace(self, row: int, payload: str, droppable: bool, priority: int | None = None) -> None:
        """A later job with the same key takes the row's place (its payload, now; and its
        priority, when given: a card whose question closed is no longer urgent)."""
        if priority is not None:
            self._conn.execute(
                "UPDATE outbox SET payload = ?, droppable = ?, created = ?, priority = ? "
                "WHERE id = ?",
                (payload, int(droppable), time.time(), priority, row),
            )
            return
        self._conn.execute(
            "UPDATE outbox SET payload = ?, droppable = ?, created = ? WHERE id = ?",
            (payload, int(droppable), time.time(), row),
        )

    def rekey(self, row: int, coalesce: str | None) -> None:
        """The row's job is under another key now (a merged message holding keyed parts)."""
        self._conn.execute("UPDATE outbox SET coalesce = ? WHERE id = ?", (coalesce, row))

    def merge(self, into: int, row: int, droppable: bool) -> None:
        """Row `row` replaces the payload of the earlier row `into` with its key, and goes."""
        self._conn.execute(
            "UPDATE outbox SET payload = (SELECT payload FROM outbox WHERE id = ?), "
            "droppable = ? WHERE id = ?",
            (row, int(droppable), into),
        )
        self._conn.execute("DELETE FROM outbox WHERE id = ?", (row,))

    def delete(self, rows: Iterable[int]) -> None:
        """Delete these rows (ids that are gone already are fine): one statement for up to
        `_DELETE_BATCH` of them."""
        ids = list(rows)
        for start in range(0, len(ids), _DELETE_BATCH):
            chunk = ids[start : start + _DELETE_BATCH]
            marks = ",".join("?" * len(chunk))
            self._conn.execute(f"DELETE FROM outbox WHERE id IN ({marks})", chunk)

    def rows(self) -> list[OutboxRow]:
        """The channel's rows in id order."""
        cursor = self._conn.execute(
            "SELECT id, op, session_id, payload, priority, coalesce, droppable FROM outbox "
            "WHERE channel = ? ORDER BY id",
            (self._channel,),
        )
        return [
            OutboxRow(
                int(row_id),
                str(op),
                None if session_id is None else str(session_id),
                str(payload),
                priority,
                None if coalesce is None else str(coalesce),
                bool(droppable),
            )
            for row_id, op, session_id, payload, priority, coalesce, droppable in cursor
        ]
