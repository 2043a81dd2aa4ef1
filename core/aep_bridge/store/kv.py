"""Small state by key: `kv` (channel state, the bridge's own secrets) and `file_offsets`
(how far each tailed log was read).

A channel's key that is about one session is deleted with that session's records, when
`store.session_retention_days` have passed since it ended (`SessionTables.
forget_ended_sessions`): the Telegram, Discord and Slack card and message ids, thread ids
and form progress of a session would otherwise stay for good. The channel need not say which
session a key is about; the store tells it from the ids the core hands channels, which are
unique in the store: a key is a session's when the part of its name after the first `:` (up
to the next, or the whole name) or its value is the session's id or the id of one of its
cards (`card:{card}`, `open:{session}`, `key:{session}:{key}`, `thread:{thread}` holding
the session id, `cardmsg:{message}` holding the card id), as of its latest write. Any other
key (a topic's id, the list of live sessions, a plugin's keys that name no id) stays until
the channel deletes it: a key is never deleted for a session it was not told to be about.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Final

from .database import Database
from .kv_owner import MAX_ID, OWNER, key_id

if TYPE_CHECKING:
    from ..contract.adapter import ChannelState

#: The kv namespace of the bridge's own keys (`Store.secret`); channels use `channel:{name}`.
SECRETS_NAMESPACE: Final = "bridge:secrets"


class KvTables(Database):
    """`kv` and `file_offsets`."""

    # -- log offsets -----------------------------------------------------------------------

    def file_offset(self, path: str) -> tuple[int, int] | None:
        """`(inode, offset)` last committed for the log at `path`, or None."""
        row = self._conn.execute(
            "SELECT inode, byte_offset FROM file_offsets WHERE path = ?", (path,)
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def set_file_offset(self, path: str, inode: int, offset: int) -> None:
        """Record how far the log at `path` (the file with `inode`) has been consumed."""
        self._no_undo()
        self._conn.execute(
            "INSERT INTO file_offsets (path, inode, byte_offset) VALUES (?, ?, ?) "
            "ON CONFLICT (path) DO UPDATE SET inode = excluded.inode, "
            "byte_offset = excluded.byte_offset",
            (path, inode, offset),
        )

    def forget_missing_file_offsets(self, root: str) -> int:
        """Delete the offsets of logs under `root` that no longer exist (one row for every
        log ever followed would stay for good); returns how many. A log made again at the
        same path is read from its start, as any new file is."""
        prefix = root.rstrip(os.sep) + os.sep
        rows = self._conn.execute(
            "SELECT path FROM file_offsets WHERE substr(path, 1, ?) = ?", (len(prefix), prefix)
        ).fetchall()
        gone = [(str(path),) for (path,) in rows if not os.path.exists(str(path))]
        if gone:
            with self.transaction():
                self._no_undo()
                self._conn.executemany("DELETE FROM file_offsets WHERE path = ?", gone)
        return len(gone)

    # -- key-value state -------------------------------------------------------------------

    def kv_get(self, namespace: str, key: str) -> str | None:
        """The value under `key` in `namespace`, or None."""
        row = self._conn.execute(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)
        ).fetchone()
        return None if row is None else str(row[0])

    def kv_items(self, namespace: str) -> list[tuple[str, str]]:
        """Every `(key, value)` in `namespace`, by key."""
        rows = self._conn.execute(
            "SELECT key, value FROM kv WHERE namespace = ? ORDER BY key", (namespace,)
        )
        return [(str(key), str(value)) for key, value in rows]

    def kv_set(self, namespace: str, key: str, value: str) -> None:
        """Set `key` in `namespace` to `value`, replacing any earlier value."""
        self._no_undo()
        self._conn.execute(
            "INSERT INTO kv (namespace, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
            (namespace, key, value),
        )

    def channel_kv_set(self, namespace: str, key: str, value: str) -> None:
        """`kv_set` for a channel's state: the key is its session's (see the module) when the
        store can tell, and goes with the session's records. Each write tells again: a key
        whose value names another card now (the console's short ids are drawn again) is that
        card's session's, and one whose value names none is no session's, kept."""
        self._no_undo()
        owner_value = value if len(value) <= MAX_ID else None
        self._conn.execute(
            "INSERT INTO kv (namespace, key, value, session_id) "
            f"VALUES (?3, ?4, ?5, {OWNER}) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
            "session_id = excluded.session_id",
            (key_id(key), owner_value, namespace, key, value),
        )

    def secret(self, name: str) -> bytes:
        """A random 32-byte key kept under `name`: made on first use, the same after a
        restart (the bridge signs press URLs with one)."""
        known = self.kv_get(SECRETS_NAMESPACE, name)
        if known is None:
            known = secrets.token_hex(32)
            with self.transaction():
                self.kv_set(SECRETS_NAMESPACE, name, known)
            self.commit_group()
        return bytes.fromhex(known)

    def kv_delete(self, namespace: str, key: str) -> None:
        """Remove `key` from `namespace`; a missing key is not an error."""
        self._no_undo()
        self._conn.execute("DELETE FROM kv WHERE namespace = ? AND key = ?", (namespace, key))


class StoreState:
    """A channel's `ChannelState` kept in the store, under one namespace (the channel's name).

    The methods are async to fit the contract, but run inline: the store is local and fast.
    """

    def __init__(self, store: KvTables, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    async def get(self, key: str) -> str | None:
        return self.store.kv_get(self.namespace, key)

    async def set(self, key: str, value: str) -> None:
        self.store.channel_kv_set(self.namespace, key, value)
        self.store.commit_group()  # durable when it returns, as the contract says

    async def delete(self, key: str) -> None:
        self.store.kv_delete(self.namespace, key)
        self.store.commit_group()


if TYPE_CHECKING:

    def _is_channel_state(state: StoreState) -> ChannelState:
        """mypy checks here that `StoreState` satisfies the `ChannelState` protocol."""
        return state
