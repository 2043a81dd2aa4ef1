"""The bridge's embedded store: one SQLite file, `state.db`, in the state directory.

Nothing important may live only in memory (a restart must lose no button), so resume
positions, the dedupe window, log offsets and channel state are kept here. The store is
private to one bridge: the directory is created 0700 and the database files 0600, because
they hold session names, platform message ids and, later, pending requests.

SQLite runs in WAL mode with `synchronous=NORMAL`: a commit costs no fsync, and a power cut
can lose at most the last few commits, never corrupt the file. Losing a commit is safe here:
the consumer side dedupes on `(source, id)` and the emitters replay from the last position.

The schema grows by numbered migrations (`MIGRATIONS`), recorded in `PRAGMA user_version`.
To add tables, append a script; never edit one that has shipped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..adapter import ChannelState
    from ..aep.envelope import Event

log = logging.getLogger(__name__)

#: The database file's name inside the state directory.
DB_NAME: Final = "state.db"
#: The kv namespace of the bridge's own keys (`Store.secret`); channels use `channel:{name}`.
SECRETS_NAMESPACE: Final = "bridge:secrets"
#: How long a statement waits for another connection's write lock before failing, in ms.
BUSY_TIMEOUT_MS: Final = 5000
#: Seconds between WAL checkpoints (see `_Checkpointer`).
CHECKPOINT_INTERVAL: Final = 1.0
#: SQLite integers are signed 64-bit: a position beyond this cannot be stored.
_MAX_INT: Final = (1 << 63) - 1

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
)

#: an event's place in its session's stream: `(epoch, seq)`
Position = tuple[int, int]
#: `(source, session)` -> the last position handled (see `Store.floors`)
Floors = dict[tuple[str, str], Position]


def floor_of(
    floors: Mapping[tuple[str, str], Position], source: str, session: str
) -> Position | None:
    """The position handled for `session` of `source`: its own, else one recorded for the
    session name alone (source '': written before sources were kept, or by a caller that
    knows no source), else None."""
    return floors.get((source, session)) or floors.get(("", session))


def _event_id(raw: object) -> str | None:
    """The `id` of a stored event's bytes, or None if they are not a JSON object."""
    try:
        value = json.loads(bytes(raw) if isinstance(raw, (bytes, memoryview)) else str(raw))
    except ValueError:
        return None
    event_id = value.get("id") if isinstance(value, dict) else None
    return event_id if isinstance(event_id, str) else None


class StoreError(RuntimeError):
    """The store cannot be opened as it is (for example, a newer bridge wrote it)."""


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_STATE_HOME/aep-bridge`, else `~/.local/state/aep-bridge` (XDG Base Directory).

    A relative `XDG_STATE_HOME` is ignored, as the XDG specification says it must be.
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    if base and Path(base).is_absolute():
        return Path(base) / "aep-bridge"
    home = env.get("HOME")
    return (Path(home) if home else Path.home()) / ".local" / "state" / "aep-bridge"


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


def _create_private(path: Path) -> None:
    """Create `path` empty with mode 0600 if missing; SQLite gives its WAL and SHM files the
    database file's mode, so they are private too."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)  # in case the umask took the owner's own bits
    finally:
        os.close(fd)


class _Checkpointer:
    """Copies the WAL back into the database from a thread of its own.

    SQLite's default checkpoints inside the commit that crosses 1,000 WAL pages, which put
    milliseconds into an unlucky event's path to the channel (a permission card among them).
    With `wal_autocheckpoint = 0` on the bridge's connection, this thread runs a PASSIVE
    checkpoint every `CHECKPOINT_INTERVAL` seconds on a connection of its own; PASSIVE never
    blocks the writer (the sqlite3 module releases the GIL while it works).

    A checkpoint that copied the whole WAL back makes the next writer start the WAL afresh,
    and SQLite syncs the new WAL header in that writer's commit: an fdatasync (0.5 ms idle,
    far more on a busy disk) in the first event's path after every checkpoint. So this
    thread starts the WAL afresh itself, with a write that changes nothing (`_restart`), and
    checkpoints only when another connection has committed since (`PRAGMA data_version`),
    so an idle bridge neither checkpoints nor writes.
    """

    def __init__(self, path: Path, interval: float = CHECKPOINT_INTERVAL) -> None:
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(path, interval), name="aep-bridge-checkpoint", daemon=True
        )
        self._thread.start()

    def _run(self, path: Path, interval: float) -> None:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        seen = None
        try:
            while not self._stopping.wait(interval):
                try:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version == seen:
                        continue  # nothing committed since the last round
                    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    seen = version
                    if not busy and frames > 0 and copied == frames:
                        _restart(conn)
                except sqlite3.Error as exc:  # busy or I/O: the next round tries again
                    log.warning("WAL checkpoint of %s failed: %s", path, exc)
        finally:
            conn.close()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)


def _restart(conn: sqlite3.Connection) -> None:
    """Start the WAL afresh (and pay its header's sync) on the checkpointer's connection:
    one write that changes nothing, the schema version set to itself."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


class _Transaction:
    """`Store.transaction()`. A class rather than a generator context manager: it runs
    several times an event, and a generator costs five times as much to enter and leave."""

    __slots__ = ("_depth", "_savepoint", "_store")

    def __init__(self, store: Store, savepoint: bool) -> None:
        self._store = store
        self._savepoint = savepoint
        self._depth = 0  # the store's depth outside this transaction

    def __enter__(self) -> None:
        store = self._store
        depth = self._depth = store._depth
        if depth == 0:
            store._conn.execute("BEGIN IMMEDIATE")
        elif self._savepoint:
            store._conn.execute(f"SAVEPOINT sp{depth}")
        store._depth = depth + 1

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> None:
        store, depth = self._store, self._depth
        store._depth = depth
        if depth > 0 and not self._savepoint:
            return  # joined the caller's transaction, which undoes it all on an error
        conn = store._conn
        if kind is not None:
            if not conn.in_transaction:
                return  # SQLite rolled it all back itself, as it may on a full disk
            if depth == 0:
                conn.execute("ROLLBACK")
            else:
                conn.execute(f"ROLLBACK TO sp{depth}")
                conn.execute(f"RELEASE sp{depth}")
            return
        if depth > 0:
            conn.execute(f"RELEASE sp{depth}")
            return
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


class Store:
    """The bridge's state on disk. Open it with `Store.open(state_dir)`.

    One event loop thread uses a store: calls are synchronous and short (a local SQLite
    file, no fsync per commit), so they run inline rather than in an executor, and the
    connection refuses use from any other thread (`check_same_thread`). Do not `await`
    inside `transaction()`: another task's writes would join the open transaction.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        """Wrap an open, migrated connection; use `Store.open`."""
        self._conn = conn
        self._path = path
        self._depth = 0
        self._group = 0
        self._grouping = False
        self._checkpointer: _Checkpointer | None = None

    @classmethod
    def open(cls, state_dir: Path) -> Store:
        """Open (creating if needed) `state_dir/state.db` and migrate it to this version."""
        state_dir = Path(state_dir)
        if not state_dir.is_dir():
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(state_dir, 0o700)  # mkdir's mode passes through the umask
        path = state_dir / DB_NAME
        _create_private(path)
        conn = sqlite3.connect(
            path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,  # transactions are explicit: see `transaction()`
            check_same_thread=True,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{path}: SQLite refused WAL mode (journal_mode is {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpointer's thread does it
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn, path)
        except BaseException:
            conn.close()
            raise
        store = cls(conn, path)
        store._checkpointer = _Checkpointer(path)
        return store

    @classmethod
    def memory(cls) -> Store:
        """A store that lives and dies with the process (tests, benchmarks, a bare `Bridge`)."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=True)
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, Path(":memory:"))
        return cls(conn, Path(":memory:"))

    def close(self) -> None:
        """Close the connection; a second call does nothing."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def schema_version(self) -> int:
        """The schema version of the file (`PRAGMA user_version`)."""
        return _user_version(self._conn)

    def transaction(self, *, savepoint: bool = True) -> _Transaction:
        """One atomic unit: `BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` if the body raises.

        Nestable: an inner call joins the outer transaction (nothing is durable until the
        outermost one commits); if an inner body raises, its own writes are undone (a
        savepoint) and the exception goes on to the caller. `savepoint=False` skips the
        savepoint of an inner call whose caller undoes everything on an error anyway (two
        statements fewer on the hot path).
        """
        return _Transaction(self, savepoint)

    # -- group commit ----------------------------------------------------------------------

    def begin_group(self) -> bool:
        """Open a transaction that the `transaction()`s after it join, until `commit_group`.

        The bridge handles a burst of events in one group: one commit instead of one per
        event. Each `transaction()` inside is still atomic on its own (a savepoint). Call
        `commit_group` before anything written in the group is shown outside the process.
        Returns False (and does nothing) when a transaction or group is already open.
        """
        if self._depth:
            return False
        self._conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        self._group += 1
        self._grouping = True
        return True

    def group_until_idle(self) -> bool:
        """Open a group that commits when the event loop next gets control (the writes of
        everything that runs until then share one commit). Returns False when one is open."""
        if not self.begin_group():
            return False
        asyncio.get_running_loop().call_soon(self._commit_when_idle)
        return True

    def _commit_when_idle(self) -> None:
        if not self.commit_group():  # a transaction body is running: right after it
            asyncio.get_running_loop().call_soon(self._commit_when_idle)

    @property
    def group(self) -> int | None:
        """The open group's number (each group gets a new one), or None outside a group."""
        return self._group if self._grouping else None

    def commit_group(self, *, strict: bool = False) -> bool:
        """Commit the open group: what was written in it is durable when this returns.

        Returns False when it could not commit now because a `transaction()` body is running
        (call it again once that body has finished); True otherwise, group or no group. A
        failed commit (a full disk) rolls the group back and is logged; with `strict` it
        raises the `sqlite3.Error` instead, for a caller that must not act on a write that
        did not land (a claimed answer, a settled outbox row).
        """
        if not self._grouping:
            return True
        if self._depth != 1:
            return False
        self._grouping = False
        self._depth = 0
        conn = self._conn
        try:
            if not conn.in_transaction:  # SQLite rolled the group back on a failed write
                raise sqlite3.OperationalError("a write failed and the group was rolled back")
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if strict:
                raise
            log.exception("the store could not commit; the last group of writes is lost")
        return True

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
        return {(str(a), str(s)): (int(e), int(q)) for a, s, e, q in rows}

    def set_position(
        self, stream: str, session: str, epoch: int, seq: int, *, source: str = ""
    ) -> None:
        """Record a position; it only moves forward, `(epoch, seq)` compared lexicographically.

        A redelivered or backfilled event (AEP-0003 §7) must not pull the resume point back.
        `source` is the emitter's; without one, the position bounds every source of the name.
        """
        if not (0 <= epoch <= _MAX_INT and 0 <= seq <= _MAX_INT):
            raise ValueError(f"position ({epoch}, {seq}) is outside 0..2**63-1")
        self._conn.execute(
            "INSERT INTO positions (stream, source, session, epoch, seq) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (stream, source, session) DO UPDATE SET epoch = excluded.epoch, "
            "seq = excluded.seq "
            "WHERE (excluded.epoch, excluded.seq) > (positions.epoch, positions.seq)",
            (stream, source, session, epoch, seq),
        )

    # -- the dedupe window -----------------------------------------------------------------

    def remember(self, stream: str, source: str, event_id: str) -> bool:
        """Add `(source, id)` to `stream`'s window: True if it was new, False if seen."""
        cursor = self._conn.execute(
            "INSERT OR IGNORE INTO seen (stream, source, id) VALUES (?, ?, ?)",
            (stream, source, event_id),
        )
        return cursor.rowcount == 1

    def seen(self, stream: str, source: str, event_id: str) -> bool:
        """Whether `(source, id)` is in `stream`'s window."""
        row = self._conn.execute(
            "SELECT 1 FROM seen WHERE stream = ? AND source = ? AND id = ?",
            (stream, source, event_id),
        ).fetchone()
        return row is not None

    def prune_seen(self, keep: int) -> int:
        """Keep the `keep` most recently remembered keys; return how many were dropped."""
        if keep < 0:
            raise ValueError(f"keep must be >= 0, not {keep}")
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

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[tuple[object, ...]]:
        """Run one statement on the store's connection, inside the current `transaction()`.

        For code that keeps a table of its own beside the store's (a test consumer recording
        its effects), so its writes commit or roll back with `record_delivery`.
        """
        return list(self._conn.execute(sql, tuple(parameters)))

    def insert(self, sql: str, parameters: Sequence[object] = ()) -> int:
        """Run one `INSERT` like `execute` and return the new row's id.

        Cheaper than `RETURNING id`, which makes SQLite build a result set per row.
        """
        rowid = self._conn.execute(sql, tuple(parameters)).lastrowid
        if rowid is None:
            raise sqlite3.ProgrammingError(f"not an INSERT: {sql}")
        return rowid

    # -- the relay's replay buffer ------------------------------------------------------

    def buffer_events(self, events: Iterable[Event], keep: int) -> None:
        """Add positioned events to the persisted replay buffer, keeping `keep` per session."""
        touched: set[tuple[str, str]] = set()
        with self.transaction():
            for event in events:
                key, position = event.session_key, event.position
                if key is None or position is None or max(position) > _MAX_INT:
                    continue
                self._conn.execute(
                    "INSERT OR IGNORE INTO relay_buffer VALUES (?, ?, ?, ?, ?)",
                    (key[0], key[1], position[0], position[1], event.raw),
                )
                touched.add(key)
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

    # -- log offsets -----------------------------------------------------------------------

    def file_offset(self, path: str) -> tuple[int, int] | None:
        """`(inode, offset)` last committed for the log at `path`, or None."""
        row = self._conn.execute(
            "SELECT inode, byte_offset FROM file_offsets WHERE path = ?", (path,)
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def set_file_offset(self, path: str, inode: int, offset: int) -> None:
        """Record how far the log at `path` (the file with `inode`) has been consumed."""
        self._conn.execute(
            "INSERT INTO file_offsets (path, inode, byte_offset) VALUES (?, ?, ?) "
            "ON CONFLICT (path) DO UPDATE SET inode = excluded.inode, "
            "byte_offset = excluded.byte_offset",
            (path, inode, offset),
        )

    # -- key-value state -------------------------------------------------------------------

    def kv_get(self, namespace: str, key: str) -> str | None:
        """The value under `key` in `namespace`, or None."""
        row = self._conn.execute(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)
        ).fetchone()
        return None if row is None else str(row[0])

    def kv_set(self, namespace: str, key: str, value: str) -> None:
        """Set `key` in `namespace` to `value`, replacing any earlier value."""
        self._conn.execute(
            "INSERT INTO kv (namespace, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value",
            (namespace, key, value),
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
        self._conn.execute("DELETE FROM kv WHERE namespace = ? AND key = ?", (namespace, key))


class StoreState:
    """A channel's `ChannelState` kept in the store, under one namespace (the channel's name).

    The methods are async to fit the contract, but run inline: the store is local and fast.
    """

    def __init__(self, store: Store, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    async def get(self, key: str) -> str | None:
        return self.store.kv_get(self.namespace, key)

    async def set(self, key: str, value: str) -> None:
        self.store.kv_set(self.namespace, key, value)
        self.store.commit_group()  # durable when it returns, as the contract says

    async def delete(self, key: str) -> None:
        self.store.kv_delete(self.namespace, key)
        self.store.commit_group()


if TYPE_CHECKING:

    def _is_channel_state(state: StoreState) -> ChannelState:
        """mypy checks here that `StoreState` satisfies the `ChannelState` protocol."""
        return state


__all__ = [
    "DB_NAME",
    "MIGRATIONS",
    "Floors",
    "Position",
    "Store",
    "StoreError",
    "StoreState",
    "default_state_dir",
    "floor_of",
]
