"""The two-person rule's records (`approvals`, `requests.approvals_needed`): how many distinct
approvers a request needs and who has approved it so far, one row per approver."""

from __future__ import annotations

import time

from .database import Database

#: `(approver, display, option_index)`, oldest first
ApprovalRow = tuple[str, str, int]


class ApprovalTables(Database):
    """`approvals`, and the count a request needs."""

    def set_approvals_needed(self, request_id: str, needed: int) -> None:
        """Fix how many distinct approvers the request needs (when it opens)."""
        self._no_undo()
        self._conn.execute(
            "UPDATE requests SET approvals_needed = ? WHERE id = ?", (needed, request_id)
        )

    def approvals_needed(self, request_id: str) -> int:
        """How many distinct approvers the request needs (1 for an unknown one)."""
        row = self._conn.execute(
            "SELECT approvals_needed FROM requests WHERE id = ?", (request_id,)
        ).fetchone()
        return 1 if row is None else max(1, int(row[0]))

    def add_approval(self, request_id: str, approver: str, display: str, option_index: int) -> bool:
        """Record `approver`'s approval of an open request; False when they approved it
        already (the same person counts once) or it is not open any more."""
        self._no_undo()
        cursor = self._conn.execute(
            "INSERT INTO approvals (request_id, approver, display, option_index, at) "
            "SELECT ?, ?, ?, ?, ? WHERE EXISTS "
            "(SELECT 1 FROM requests WHERE id = ? AND status = 'open') "
            "ON CONFLICT (request_id, approver) DO NOTHING",
            (request_id, approver, display, option_index, time.time(), request_id),
        )
        return cursor.rowcount == 1

    def approvals(self, request_id: str) -> list[ApprovalRow]:
        """The approvals given to the request so far, oldest first."""
        rows = self._conn.execute(
            "SELECT approver, display, option_index FROM approvals WHERE request_id = ? "
            "ORDER BY at, approver",
            (request_id,),
        )
        return [(str(a), str(d), int(i)) for a, d, i in rows]

    def clear_approvals(self, request_id: str) -> None:
        """Forget the request's approvals: its answer went (or must be given afresh)."""
        self._no_undo()
        self._conn.execute("DELETE FROM approvals WHERE request_id = ?", (request_id,))
