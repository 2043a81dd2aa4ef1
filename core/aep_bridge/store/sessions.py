"""Sessions and their threads (`sessions`, `threads`): which AEP session is which bridge
session, and the platform thread it lives in per channel."""

from __future__ import annotations

import time
from collections.abc import Iterator

from .replay import ReplayTables

#: `(id, source, session, stream, agent, name, state)`
SessionRow = tuple[str, str, str, str, str, str, str]
#: `(session_id, channel, thread_id, state, name)`
ThreadRow = tuple[str, str, str | None, str, str, str | None]

_SESSION = "SELECT id, source, session, stream, agent, name, state FROM sessions"


def _session_row(row: tuple[object, ...]) -> SessionRow:
    id_, source, session, stream, agent, name, state = (str(v) for v in row)
    return id_, source, session, stream, agent, name, state


class SessionTables(ReplayTables):
    """`sessions` and `threads` (and, when a session is forgotten, every record of it)."""

    def session_rows(self) -> Iterator[SessionRow]:
        """Every session the store knows."""
        for row in self._conn.execute(_SESSION):
            yield _session_row(row)

    def thread_rows(self) -> Iterator[ThreadRow]:
        """Every thread binding the store knows."""
        for session_id, channel, thread_id, state, name, place in self._conn.execute(
            "SELECT session_id, channel, thread_id, state, name, place FROM threads"
        ):
            yield (
                str(session_id),
                str(channel),
                None if thread_id is None else str(thread_id),
                str(state),
                str(name or ""),
                None if place is None else str(place),
            )

    def session_owner_rows(self) -> Iterator[tuple[str, str]]:
        """`(id, owner)` of every session with an owner (`sessions.Owner` as JSON)."""
        for id_, owner in self._conn.execute(
            "SELECT id, owner FROM sessions WHERE owner IS NOT NULL"
        ):
            yield str(id_), str(owner)

    def add_session(
        self,
        id_: str,
        source: str,
        session: str,
        stream: str,
        agent: str,
        name: str,
        owner: str | None = None,
    ) -> SessionRow:
        """Record a new session (state `open`) unless `(source, session)` has one; return
        the stored one (this one, or the one recorded first). `owner`: as JSON."""
        now = time.time()
        cursor = self._conn.execute(
            "INSERT OR IGNORE INTO sessions (id, source, session, stream, agent, name, state, "
            "created, updated, owner) VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?)",
            (id_, source, session, stream, agent, name, now, now, owner),
        )
        if cursor.rowcount == 1:
            self._undo_sql("DELETE FROM sessions WHERE id = ?", (id_,))
            return id_, source, session, stream, agent, name, "open"
        row = self._conn.execute(
            _SESSION + " WHERE source = ? AND session = ?", (source, session)
        ).fetchone()
        return _session_row(row)

    def set_session_name(self, id_: str, name: str) -> None:
        self._no_undo()
        self._conn.execute(
            "UPDATE sessions SET name = ?, updated = ? WHERE id = ?", (name, time.time(), id_)
        )

    def forget_ended_sessions(self, ended_before: float, limit: int) -> list[str]:
        """Delete every record of up to `limit` sessions that ended before `ended_before`,
        the earliest ended first: the session, its threads, its requests with their cards
        and answers, the channels' state about it (`kv_owner`), its resume positions and
        any replay buffer still held. Returns their
        ids (the caller forgets them in memory: `Sessions.forget`).

        One transaction of a bounded batch (`retention.py` calls it again until none is
        left), so the write lock is never held long. A session with platform calls still
        queued (a channel down for the whole retention) waits for them. Its positions go
        with it: by then no source should hold its events (the hub drops an ended session's
        buffer within hours, a followed log keeps its offset in `file_offsets`); an
        external relay still holding one would have it mirrored again.
        """
        rows = self._conn.execute(
            "SELECT id, source, session FROM sessions WHERE state = 'ended' AND updated < ? "
            "AND id NOT IN (SELECT session_id FROM outbox WHERE session_id IS NOT NULL) "
            "ORDER BY updated LIMIT ?",
            (ended_before, limit),
        ).fetchall()
        if not rows:
            return []
        ids = [str(id_) for id_, _, _ in rows]
        keys = [(str(source), str(session)) for _, source, session in rows]
        among = "(" + ", ".join("?" * len(ids)) + ")"  # one statement a table for the batch
        asked = f"SELECT id FROM requests WHERE session_id IN {among}"
        pairs = "(VALUES " + ", ".join(["(?, ?)"] * len(keys)) + ")"
        with self.transaction():
            self._no_undo()
            conn = self._conn
            conn.execute(f"DELETE FROM cards WHERE request_id IN ({asked})", ids)
            conn.execute(f"DELETE FROM answers WHERE request_id IN ({asked})", ids)
            conn.execute(f"DELETE FROM approvals WHERE request_id IN ({asked})", ids)
            conn.execute(f"DELETE FROM requests WHERE session_id IN {among}", ids)
            conn.execute(f"DELETE FROM threads WHERE session_id IN {among}", ids)
            conn.execute(f"DELETE FROM kv WHERE session_id IN {among}", ids)  # channels'
            flat = [part for key in keys for part in key]
            conn.execute(f"DELETE FROM positions WHERE (source, session) IN {pairs}", flat)
            self._drop_whole(keys)  # and out of the replay buffers' running total
            conn.execute(f"DELETE FROM sessions WHERE id IN {among}", ids)
        return ids

    def end_session(self, id_: str) -> None:
        """The session ended (state `ended`)."""
        self._no_undo()
        self._conn.execute(
            "UPDATE sessions SET state = 'ended', updated = ? WHERE id = ?", (time.time(), id_)
        )

    def add_thread(
        self, session_id: str, channel: str, name: str, place: str | None = None
    ) -> None:
        """Record that the session gets a thread in `channel` (state `creating`), at `place`
        when a route placed it."""
        cursor = self._conn.execute(
            "INSERT OR IGNORE INTO threads (session_id, channel, name, state, place) "
            "VALUES (?, ?, ?, 'creating', ?)",
            (session_id, channel, name, place),
        )
        if cursor.rowcount == 1:
            self._undo_sql(
                "DELETE FROM threads WHERE session_id = ? AND channel = ?", (session_id, channel)
            )

    def bind_thread(self, session_id: str, channel: str, thread_id: str) -> None:
        """The platform created the thread: its id, state `open`."""
        self._no_undo()
        self._conn.execute(
            "UPDATE threads SET thread_id = ?, state = 'open' WHERE session_id = ? AND channel = ?",
            (thread_id, session_id, channel),
        )

    def set_thread_name(self, session_id: str, channel: str, name: str) -> None:
        self._no_undo()
        self._conn.execute(
            "UPDATE threads SET name = ? WHERE session_id = ? AND channel = ?",
            (name, session_id, channel),
        )

    def close_thread(self, session_id: str, channel: str) -> None:
        """The session ended: its thread is done (state `closed`)."""
        self._no_undo()
        self._conn.execute(
            "UPDATE threads SET state = 'closed' WHERE session_id = ? AND channel = ?",
            (session_id, channel),
        )
