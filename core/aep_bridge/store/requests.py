"""Requests for attention and their cards and answers (`requests`, `cards`, `answers`):
everything that must happen once is decided here before it is acted on."""

from __future__ import annotations

import time
from collections.abc import Collection

from .database import Database

#: `(id, session_id, event_id, raw, options, status, answer, answered_by, command_id,
#: command_raw, expires_at, hold_until)`, as stored
RequestRow = tuple[object, ...]

_COLUMNS = (
    "id, session_id, event_id, raw, options, status, answer, answered_by, command_id, "
    "command_raw, expires_at, hold_until"
)


def _among(statuses: Collection[str]) -> str:
    return "(" + ", ".join("?" for _ in statuses) + ")"


class RequestTables(Database):
    """`requests`, `cards` and `answers`."""

    def request(self, request_id: str) -> RequestRow | None:
        row: RequestRow | None = self._conn.execute(
            f"SELECT {_COLUMNS} FROM requests WHERE id = ?", (request_id,)
        ).fetchone()
        return row

    def request_of_event(self, session_id: str, event_id: str) -> RequestRow | None:
        """The request an `attention.requested` (by its AEP id) opened in a session."""
        row: RequestRow | None = self._conn.execute(
            f"SELECT {_COLUMNS} FROM requests WHERE session_id = ? AND event_id = ?",
            (session_id, event_id),
        ).fetchone()
        return row

    def requests_in(
        self, statuses: Collection[str], session_id: str | None = None
    ) -> list[RequestRow]:
        """The requests in one of `statuses` (of one session, or all), oldest change first."""
        where = f"status IN {_among(statuses)}"
        parameters: tuple[object, ...] = tuple(sorted(statuses))
        if session_id is not None:
            where = f"session_id = ? AND {where}"
            parameters = (session_id, *parameters)
        return list(
            self._conn.execute(
                f"SELECT {_COLUMNS} FROM requests WHERE {where} ORDER BY updated", parameters
            )
        )

    def add_request(
        self,
        request_id: str,
        session_id: str,
        event_id: str,
        raw: bytes,
        options: str,
        status: str,
        expires_at: float | None,
    ) -> bool:
        """Record a new request; False when its id is taken (draw another)."""
        cursor = self._conn.execute(
            "INSERT INTO requests (id, session_id, event_id, raw, options, status, "
            "expires_at, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (request_id, session_id, event_id, raw, options, status, expires_at, time.time()),
        )
        if cursor.rowcount != 1:
            return False
        self._undo_sql("DELETE FROM requests WHERE id = ?", (request_id,))
        return True

    def update_request(
        self,
        request_id: str,
        status: str,
        answer: str | None,
        answered_by: str | None,
        command_id: str | None,
        command_raw: bytes | None,
    ) -> None:
        self._no_undo()
        self._conn.execute(
            "UPDATE requests SET status = ?, answer = ?, answered_by = ?, command_id = ?, "
            "command_raw = ?, updated = ? WHERE id = ?",
            (status, answer, answered_by, command_id, command_raw, time.time(), request_id),
        )

    def set_request_outcome(self, request_id: str, outcome: str) -> None:
        """Record what the request's cards show now (an outcome, as JSON)."""
        self._no_undo()
        self._conn.execute("UPDATE requests SET outcome = ? WHERE id = ?", (outcome, request_id))

    def request_outcome(self, request_id: str) -> str | None:
        """What the request's cards were last told to show (`set_request_outcome`), or None."""
        row = self._conn.execute(
            "SELECT outcome FROM requests WHERE id = ?", (request_id,)
        ).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def claim_request(
        self,
        request_id: str,
        answer: str,
        answered_by: str,
        command_id: str,
        command_raw: bytes,
        hold_until: float,
    ) -> bool:
        """Claim an open request for an answer (state `sending`) and record who gave it; False
        when it was not open (someone else's answer got there first)."""
        self._no_undo()
        claimed = self._conn.execute(
            "UPDATE requests SET status = 'sending', answer = ?, answered_by = ?, "
            "command_id = ?, command_raw = ?, hold_until = ?, updated = ? "
            "WHERE id = ? AND status = 'open'",
            (answer, answered_by, command_id, command_raw, hold_until, time.time(), request_id),
        ).rowcount
        if claimed != 1:
            return False
        self._conn.execute(
            "INSERT INTO answers (command_id, request_id, answer, answered_by) VALUES (?, ?, ?, ?)",
            (command_id, request_id, answer, answered_by),
        )
        return True

    def answer_author(self, request_id: str, command_id: str) -> str | None:
        """Who gave answer `command_id` to the request; None if it is not one of ours."""
        row = self._conn.execute(
            "SELECT answered_by FROM answers WHERE command_id = ? AND request_id = ?",
            (command_id, request_id),
        ).fetchone()
        return None if row is None else str(row[0])

    def add_card(self, request_id: str, channel: str) -> None:
        """Record that the request has a card in `channel`."""
        cursor = self._conn.execute(
            "INSERT OR IGNORE INTO cards (request_id, channel) VALUES (?, ?)",
            (request_id, channel),
        )
        if cursor.rowcount == 1:
            self._undo_sql(
                "DELETE FROM cards WHERE request_id = ? AND channel = ?", (request_id, channel)
            )

    def card_channels(self, request_id: str) -> list[str]:
        """The channels the request has a card in."""
        rows = self._conn.execute("SELECT channel FROM cards WHERE request_id = ?", (request_id,))
        return [str(r[0]) for r in rows]
