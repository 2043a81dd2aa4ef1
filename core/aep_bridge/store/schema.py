"""The store's schema: numbered migrations, recorded in `PRAGMA user_version`.

To add tables, append a script to `MIGRATIONS`; never edit one that has shipped.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from .kv_owner import key_id
from .seen_key import seen_key

log = logging.getLogger(__name__)

#: The schema, one script per version: `MIGRATIONS[n - 1]` takes version n-1 to n.
#: Append only. Each script runs in its own transaction, one statement per `;`.
MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: resume positions, the dedupe window, log offsets, channel key-value state
    """
    CREATE TABLE positions (
        stream  TEXT    NOT NULL,
        session TEXT    NOT NULL,
        epoch   INTEGER NOT NULL CHECK (epoch >= 0),
        seq     INTEGER NOT NULL CHECK (seq >= 0),
        PRIMARY KEY (stream, session)
    ) WITHOUT ROWID;

    -- n orders the window: pruning drops the lowest (oldest) first
    CREATE TABLE seen (
        n      INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        id     TEXT NOT NULL,
        UNIQUE (source, id)
    );

    CREATE TABLE file_offsets (
        path   TEXT    PRIMARY KEY,
        inode  INTEGER NOT NULL,
        byte_offset INTEGER NOT NULL CHECK (byte_offset >= 0)
    ) WITHOUT ROWID;

    CREATE TABLE kv (
        namespace TEXT NOT NULL,
        key       TEXT NOT NULL,
        value     TEXT NOT NULL,
        PRIMARY KEY (namespace, key)
    ) WITHOUT ROWID;
    """,
    # 2: the embedded relay's replay buffer, so a restart of the bridge loses no event
    """
    CREATE TABLE relay_buffer (
        source  TEXT    NOT NULL,
        session TEXT    NOT NULL,
        epoch   INTEGER NOT NULL,
        seq     INTEGER NOT NULL,
        raw     BLOB    NOT NULL,
        PRIMARY KEY (source, session, epoch, seq)
    ) WITHOUT ROWID;

    -- the newest position eviction has dropped, per buffer: replay-exhausted survives a restart
    CREATE TABLE relay_evicted (
        source  TEXT    NOT NULL,
        session TEXT    NOT NULL,
        epoch   INTEGER NOT NULL,
        seq     INTEGER NOT NULL,
        PRIMARY KEY (source, session)
    ) WITHOUT ROWID;
    """,
    # 3: the dedupe window per stream, like positions: two consumers of one store (the
    # console view and the core) must each see every event. The old window is a cache of
    # recent keys; dropping it costs at most one redelivery, which consumers dedupe.
    """
    DROP TABLE seen;

    CREATE TABLE seen (
        n      INTEGER PRIMARY KEY,
        stream TEXT NOT NULL,
        source TEXT NOT NULL,
        id     TEXT NOT NULL,
        UNIQUE (stream, source, id)
    );
    """,
    # 4: the core loop: sessions and their threads, requests and their cards, the outbox.
    # Everything that must be exactly-once is decided here before it is acted on.
    """
    CREATE TABLE sessions (
        id      TEXT PRIMARY KEY,
        source  TEXT NOT NULL,
        session TEXT NOT NULL,
        stream  TEXT NOT NULL,
        agent   TEXT NOT NULL,
        name    TEXT NOT NULL,
        state   TEXT NOT NULL DEFAULT 'open',
        created REAL NOT NULL,
        updated REAL NOT NULL,
        UNIQUE (source, session)
    );

    CREATE TABLE threads (
        session_id TEXT NOT NULL REFERENCES sessions (id),
        channel    TEXT NOT NULL,
        thread_id  TEXT,
        name       TEXT,
        state      TEXT NOT NULL DEFAULT 'creating',
        PRIMARY KEY (session_id, channel)
    ) WITHOUT ROWID;

    CREATE TABLE requests (
        id         TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id),
        event_id   TEXT NOT NULL,
        raw        BLOB NOT NULL,
        options    TEXT NOT NULL,
        status     TEXT NOT NULL,
        answer     TEXT,
        answered_by TEXT,
        command_id TEXT,
        command_raw BLOB,
        expires_at REAL,
        updated    REAL NOT NULL,
        UNIQUE (session_id, event_id)
    );

    CREATE TABLE cards (
        request_id TEXT NOT NULL REFERENCES requests (id),
        channel    TEXT NOT NULL,
        PRIMARY KEY (request_id, channel)
    ) WITHOUT ROWID;

    CREATE TABLE outbox (
        id        INTEGER PRIMARY KEY,
        channel   TEXT    NOT NULL,
        op        TEXT    NOT NULL,
        session_id TEXT,
        payload   TEXT    NOT NULL,
        priority  INTEGER NOT NULL,
        coalesce  TEXT,
        droppable INTEGER NOT NULL DEFAULT 0,
        created   REAL    NOT NULL
    );

    CREATE INDEX outbox_by_channel ON outbox (channel, id);
    """,
    # 5: positions per (source, session): session identity is emitter-scoped (AEP-0001
    # §5.2), and two agents may name their sessions alike. Older rows keep source '': they
    # bound every source of that session name, as they did.
    """
    CREATE TABLE positions_by_source (
        stream  TEXT    NOT NULL,
        source  TEXT    NOT NULL,
        session TEXT    NOT NULL,
        epoch   INTEGER NOT NULL CHECK (epoch >= 0),
        seq     INTEGER NOT NULL CHECK (seq >= 0),
        PRIMARY KEY (stream, source, session)
    ) WITHOUT ROWID;

    INSERT INTO positions_by_source SELECT stream, '', session, epoch, seq FROM positions;

    DROP TABLE positions;

    ALTER TABLE positions_by_source RENAME TO positions;
    """,
    # 6: every answer sent for a request, by its command id: an agent that acknowledges an
    # answer late (after the ack window reopened the request) is still credited to its author
    """
    CREATE TABLE answers (
        command_id  TEXT PRIMARY KEY,
        request_id  TEXT NOT NULL REFERENCES requests (id),
        answer      TEXT NOT NULL,
        answered_by TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
    # 7: until when an answer waits for its agent to reconnect (`attention.answer_hold`),
    # fixed when it is given, so a restart while it waits keeps the same deadline
    """
    ALTER TABLE requests ADD COLUMN hold_until REAL;
    """,
    # 8: what a request's cards show of its fate (an `Outcome` as JSON), so a press on a card
    # whose question closed is told what became of it, after a restart too
    """
    ALTER TABLE requests ADD COLUMN outcome TEXT;
    """,
    # 9: the replay buffers' byte budget and the retention of ended sessions' buffers: per
    # buffer, when it last took an event (the least recently active go first; written
    # lazily, see `ReplayTables.save_activity`) and when its session ended (NULL while it
    # lives). Their bytes are not kept: the store sums them once, then keeps a running total.
    # The one-time VACUUM that lets the file give pages back is `Database.compact`'s, at start.
    """
    CREATE TABLE relay_sessions (
        source  TEXT    NOT NULL,
        session TEXT    NOT NULL,
        active  REAL    NOT NULL,
        ended   REAL,
        PRIMARY KEY (source, session)
    ) WITHOUT ROWID;

    INSERT INTO relay_sessions (source, session, active)
        SELECT DISTINCT source, session, CAST(strftime('%s', 'now') AS REAL) FROM relay_buffer;

    -- the buffers of sessions the core saw end: their retention counts from that end
    UPDATE relay_sessions SET ended = (
        SELECT updated FROM sessions AS s
        WHERE s.source = relay_sessions.source AND s.session = relay_sessions.session
        AND s.state = 'ended'
    );
    """,
    # 10: the dedupe window as 64-bit digests of `(stream, source, id)` (`seen_key`), in the
    # order they came: some 36 bytes a key where the strings and their index took 200. The
    # window is carried over, its order kept; `aep_seen_key` is `seen_key`, registered on
    # the connection for the migrations (`_migrate`).
    """
    CREATE TABLE seen_keys (
        n   INTEGER PRIMARY KEY,
        key INTEGER NOT NULL UNIQUE
    );

    INSERT OR IGNORE INTO seen_keys (n, key)
        SELECT n, aep_seen_key(stream, source, id) FROM seen ORDER BY n;

    DROP TABLE seen;

    ALTER TABLE seen_keys RENAME TO seen;
    """,
    # 11: which session a channel's key is about (`kv_owner`): it goes with the session's
    # records past `store.session_retention_days`. The keys written before are told by the
    # same rule; `aep_kv_key_id` is `kv_owner.key_id`, registered for the migrations.
    """
    ALTER TABLE kv ADD COLUMN session_id TEXT;

    UPDATE kv SET session_id = coalesce(
        (SELECT id FROM sessions WHERE id = aep_kv_key_id(kv.key)),
        (SELECT session_id FROM requests WHERE id = aep_kv_key_id(kv.key)),
        (SELECT id FROM sessions WHERE id = kv.value),
        (SELECT session_id FROM requests WHERE id = kv.value)
    ) WHERE namespace LIKE 'channel:%';

    CREATE INDEX kv_by_session ON kv (session_id) WHERE session_id IS NOT NULL;
    """,
    # 12: the audit trail (`audit.py`): append only. No statement may change a row, and a
    # row may be deleted only when it is older than the cut the retention sets in
    # `audit_cut` (`audit.retention_days`), so no other clean-up can take one by mistake.
    """
    CREATE TABLE audit (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        time        REAL NOT NULL,
        kind        TEXT NOT NULL,
        session_id  TEXT,
        session     TEXT,
        principal   TEXT,
        channel     TEXT,
        message_id  TEXT,
        actor_id    TEXT,
        actor_name  TEXT,
        request_id  TEXT,
        answer      TEXT,
        command_id  TEXT,
        ack         TEXT,
        data        TEXT NOT NULL,
        envelope    BLOB
    );

    CREATE INDEX audit_by_time ON audit (time);

    CREATE INDEX audit_by_session ON audit (session_id);

    CREATE TABLE audit_cut (
        one    INTEGER PRIMARY KEY CHECK (one = 1),
        before REAL NOT NULL
    );

    CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
    BEGIN
        SELECT RAISE(ABORT, 'the audit trail is append-only');
    END;

    CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
    WHEN OLD.time >= coalesce((SELECT before FROM audit_cut WHERE one = 1), 0)
    BEGIN
        SELECT RAISE(ABORT, 'the audit trail is append-only: only retention deletes');
    END;
    """,
    # 13: the two-person rule (issue 34, `quorum.py`): how many distinct approvers a request
    # needs, fixed when it opens, and the approvals given so far, so a restart neither loses
    # one nor counts one twice (one row per approver and request)
    """
    ALTER TABLE requests ADD COLUMN approvals_needed INTEGER NOT NULL DEFAULT 1;

    CREATE TABLE approvals (
        request_id   TEXT    NOT NULL,
        approver     TEXT    NOT NULL,
        display      TEXT    NOT NULL,
        option_index INTEGER NOT NULL,
        at           REAL    NOT NULL,
        PRIMARY KEY (request_id, approver)
    ) WITHOUT ROWID;
    """,
    # 14: named bearer tokens (`aep-bridge token create`), kept as their sha256 only; and the
    # principal whose connection emitted each session first (no other agent may take it over)
    """
    CREATE TABLE tokens (
        name TEXT PRIMARY KEY,
        role TEXT NOT NULL,
        digest TEXT NOT NULL,
        created REAL NOT NULL,
        revoked REAL
    ) WITHOUT ROWID;

    CREATE TABLE session_owners (
        session TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        at REAL NOT NULL
    );

    CREATE INDEX session_owners_by_age ON session_owners (at);
    """,
    # 15: each session's owner as the bridge shows it (`sessions.Owner`, JSON): its principal,
    # and the OS user and host its daemon reported, set once at its first event
    """
    ALTER TABLE sessions ADD COLUMN owner TEXT;
    """,
    # 16: where on its channel a session's thread goes, when a route placed it (`routes[].places`:
    # a Slack channel, a Discord text channel); NULL is the channel's own default
    """
    ALTER TABLE threads ADD COLUMN place TEXT;
    """,
)


class StoreError(RuntimeError):
    """The store cannot be opened as it is (for example, a newer bridge wrote it)."""


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration script: `sqlite3.complete_statement` finds the ends.

    Executing them one by one (not `executescript`, which commits on its own) keeps each
    migration inside the transaction that also bumps `user_version`.
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    rest = [ln for ln in buffer.splitlines() if ln.strip() and not ln.strip().startswith("--")]
    if rest:
        raise ValueError(f"a migration ends inside a statement: {buffer.strip()!r}")


def _user_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def _too_new(path: Path, version: int) -> StoreError:
    return StoreError(
        f"{path} has schema version {version}, but this aep-bridge knows only versions up to "
        f"{len(MIGRATIONS)}: it was written by a newer aep-bridge. Upgrade aep-bridge, or point "
        "state_dir at another directory (the newer file is left untouched)."
    )


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the schema up to `len(MIGRATIONS)`, one transaction per version.

    The version is read again under the write lock, so two processes opening a fresh
    directory at once apply each migration once.
    """
    known = len(MIGRATIONS)
    current = _user_version(conn)
    if current < known:  # what a migration's SQL cannot compute itself
        conn.create_function("aep_seen_key", 3, seen_key, deterministic=True)
        conn.create_function("aep_kv_key_id", 1, key_id, deterministic=True)
    if current > known:
        raise _too_new(path, current)
    while current < known:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = _user_version(conn)
            if current > known:
                raise _too_new(path, current)
            if current < known:
                for statement in _statements(MIGRATIONS[current]):
                    conn.execute(statement)
                current += 1
                conn.execute(f"PRAGMA user_version = {current}")
                log.info("store %s: schema migrated to version %d", path, current)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
