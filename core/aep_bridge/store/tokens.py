"""`tokens` (the named bearer tokens, `aep-bridge token create`) and `session_owners` (the
principal whose connection emitted each session first).

A token is kept as its sha256 only (`intake.principals.digest`); a revoked one keeps its row
(the list says when it was revoked) until a token of the same name is made again.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass
from typing import Final

from .database import Database

#: sessions whose owner the store remembers; the least recently claimed beyond go first
MAX_OWNED_SESSIONS: Final = 100_000


@dataclass(frozen=True, slots=True)
class TokenRow:
    """One named token as `token list` shows it (never the token itself)."""

    name: str
    role: str
    created: float
    revoked: float | None


class TokenExists(ValueError):
    """`create_token` for a name whose token is not revoked."""


class TokenTables(Database):
    """`tokens` and `session_owners`."""

    _owners_written = 0

    # -- tokens ----------------------------------------------------------------------------

    def create_token(self, name: str, role: str, token_digest: str, now: float | None) -> None:
        """Keep a new token's digest under `name`; a revoked token of that name is replaced,
        a live one is not (`TokenExists`)."""
        now = time.time() if now is None else now
        with self.transaction():
            row = self._conn.execute(
                "SELECT revoked FROM tokens WHERE name = ?", (name,)
            ).fetchone()
            if row is not None and row[0] is None:
                raise TokenExists(name)
            self._no_undo()
            self._conn.execute(
                "INSERT INTO tokens (name, role, digest, created, revoked) "
                "VALUES (?, ?, ?, ?, NULL) ON CONFLICT (name) DO UPDATE SET "
                "role = excluded.role, digest = excluded.digest, "
                "created = excluded.created, revoked = NULL",
                (name, role, token_digest, now),
            )

    def revoke_token(self, name: str, now: float | None = None) -> bool:
        """Revoke `name`'s token; False when there is no live token of that name."""
        now = time.time() if now is None else now
        with self.transaction():
            self._no_undo()
            changed = self._conn.execute(
                "UPDATE tokens SET revoked = ? WHERE name = ? AND revoked IS NULL", (now, name)
            ).rowcount
        return bool(changed)

    def tokens(self) -> list[TokenRow]:
        rows = self._conn.execute(
            "SELECT name, role, created, revoked FROM tokens ORDER BY name"
        ).fetchall()
        return [
            TokenRow(str(n), str(r), float(c), None if v is None else float(v))
            for n, r, c, v in rows
        ]

    def token_named(self, token_digest: str) -> tuple[str, str] | None:
        """`(name, role)` of the live token whose digest is `token_digest`, compared in
        constant time against every live one (a handful: one a person)."""
        found = None
        for name, role, known in self._conn.execute(
            "SELECT name, role, digest FROM tokens WHERE revoked IS NULL"
        ):
            if hmac.compare_digest(str(known).encode(), token_digest.encode()):
                found = (str(name), str(role))
        return found

    def token_live(self, name: str) -> bool:
        row = self._conn.execute(
            "SELECT 1 FROM tokens WHERE name = ? AND revoked IS NULL", (name,)
        ).fetchone()
        return row is not None

    # -- session owners --------------------------------------------------------------------

    def session_owner(self, session: str) -> str | None:
        row = self._conn.execute(
            "SELECT principal FROM session_owners WHERE session = ?", (session,)
        ).fetchone()
        return None if row is None else str(row[0])

    def set_session_owners(self, owners: dict[str, str], now: float | None = None) -> None:
        """Remember each session's owner (the first wins: an existing row is kept), and keep
        at most `MAX_OWNED_SESSIONS` rows."""
        if not owners:
            return
        now = time.time() if now is None else now
        with self.transaction():
            self._no_undo()
            self._conn.executemany(
                "INSERT OR IGNORE INTO session_owners (session, principal, at) VALUES (?, ?, ?)",
                [(session, principal, now) for session, principal in owners.items()],
            )
            self._owners_written += len(owners)
            if self._owners_written >= 1000:
                self._owners_written = 0
                self._conn.execute(
                    "DELETE FROM session_owners WHERE session IN (SELECT session FROM "
                    "session_owners ORDER BY at DESC LIMIT -1 OFFSET ?)",
                    (MAX_OWNED_SESSIONS,),
                )


__all__ = ["MAX_OWNED_SESSIONS", "TokenExists", "TokenRow", "TokenTables"]
