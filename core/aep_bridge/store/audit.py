"""The audit trail's table (`audit`): rows are appended, read in order, and deleted only by
retention (the schema's triggers refuse anything else, see migration 12)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, cast

from .database import Database

#: `(id, time, kind, session_id, session, principal, channel, message_id, actor_id,
#: actor_name, request_id, answer, command_id, ack, data, envelope)`
AuditRow = tuple[
    int,
    float,
    str,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    str,
    bytes | None,
]
#: the keys of a record's `data` that are also columns of their own (`loop/audit.py`)
DATA_COLUMNS: Final = (
    "channel",
    "message_id",
    "actor_id",
    "actor_name",
    "request_id",
    "answer",
    "command_id",
    "ack",
)
#: the columns a record fills, in `add_audit`'s order
AUDIT_COLUMNS: Final = (
    "time",
    "kind",
    "session_id",
    "session",
    "principal",
    *DATA_COLUMNS,
    "data",
    "envelope",
)
_SELECT = "SELECT id, " + ", ".join(AUDIT_COLUMNS) + " FROM audit"
_INSERT = (
    f"INSERT INTO audit ({', '.join(AUDIT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in AUDIT_COLUMNS)})"
)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _audit_row(row: tuple[object, ...]) -> AuditRow:
    texts = tuple(_text(value) for value in row[3:14])
    envelope = row[15]
    return cast(
        AuditRow,
        (
            int(cast(int, row[0])),
            float(cast(float, row[1])),
            str(row[2]),
            *texts,
            str(row[14]),
            None if envelope is None else bytes(cast(bytes, envelope)),
        ),
    )


class AuditTables(Database):
    """`audit`: append (`add_audit`), read (`audit_rows`), and retention (`prune_audit`)."""

    def add_audit(self, values: tuple[object, ...]) -> None:
        """Append one record (`values` in `AUDIT_COLUMNS` order), in the caller's transaction
        (one of its own otherwise). It is written by that transaction's commit, with the
        records appended before it in one statement (`_write_audit`): durable with what it
        records, and no savepoint for its undo (the table refuses a DELETE of a recent row)."""
        if not self._depth:
            with self.transaction():
                self._pending_audit.append(values)
            return
        pending = self._pending_audit
        pending.append(values)
        if self._frames:

            def undo() -> None:
                for index in range(len(pending) - 1, -1, -1):
                    if pending[index] is values:
                        del pending[index]
                        return

            self._undo_memory(undo)

    def _write_audit(self, rows: list[tuple[object, ...]]) -> None:
        self._conn.executemany(_INSERT, rows)

    def audit_rows(
        self, *, since: float | None = None, session: str | None = None, batch: int = 500
    ) -> Iterator[AuditRow]:
        """The records in the order they were written, from `since` (wall clock) on, of one
        session (the bridge's id or the agent's AEP session id); read `batch` at a time.
        Inside a transaction, its own records too (written first)."""
        if self._pending_audit:
            self._no_undo()
            self._flush()
        where: list[str] = ["id > ?"]
        params: list[object] = []
        if since is not None:
            where.append("time >= ?")
            params.append(since)
        if session is not None:
            where.append("(session_id = ? OR session = ?)")
            params += [session, session]
        last = 0
        while True:
            rows = self._conn.execute(
                f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY id LIMIT ?",
                (last, *params, batch),
            ).fetchall()
            for row in rows:
                yield _audit_row(row)
            if len(rows) < batch:
                return
            last = int(rows[-1][0])

    def prune_audit(self, before: float, batch: int) -> int:
        """Delete at most `batch` records written before `before` (the retention's cut, which
        the table's trigger checks); returns how many went."""
        with self.transaction():
            self._no_undo()
            self._conn.execute(
                "INSERT INTO audit_cut (one, before) VALUES (1, ?) "
                "ON CONFLICT (one) DO UPDATE SET before = excluded.before",
                (before,),
            )
            return self._conn.execute(
                "DELETE FROM audit WHERE id IN "
                "(SELECT id FROM audit WHERE time < ? ORDER BY id LIMIT ?)",
                (before, batch),
            ).rowcount


__all__ = ["AUDIT_COLUMNS", "DATA_COLUMNS", "AuditRow", "AuditTables"]
