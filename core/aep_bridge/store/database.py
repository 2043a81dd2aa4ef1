"""The store's connection: opening the file, transactions, group commit and their undo.

Nothing important may live only in memory (a restart must lose no button), so resume
positions, the dedupe window, log offsets and channel state are kept here. The store is
private to one bridge: the directory is created 0700 and the database files 0600, because
they hold session names, platform message ids and, later, pending requests.

SQLite runs in WAL mode with `synchronous=NORMAL`: a commit costs no fsync, and a power cut
can lose at most the last few commits, never corrupt the file. Losing a commit is safe here:
the consumer side dedupes on `(source, id)` and the emitters replay from the last position.

A nested `transaction()` is atomic without a SQLite savepoint on the hot path: the writes
made in it register how to undo them (`_undo_sql`, `_undo_memory`), and only a write that
cannot (`_no_undo`) opens a real `SAVEPOINT`, lazily. Writes deferred to the commit (the
coalesced resume positions, `_pending_positions`; the audit records, `_pending_audit`) are
flushed by the outermost commit, in the same transaction, so what a commit makes durable
is what it made durable before. The outbox's rows (`store/outbox.py`) register no undo: a
failed event leaves the jobs it queued in memory, and their rows with them, so the journal
stays what the queue holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final, Self

from .checkpoint import BUSY_TIMEOUT_MS, Checkpointer
from .schema import MIGRATIONS, StoreError, _migrate, _user_version

log = logging.getLogger(__name__)

#: The database file's name inside the state directory.
DB_NAME: Final = "state.db"
#: SQLite integers are signed 64-bit: a position beyond this cannot be stored.
_MAX_INT: Final = (1 << 63) - 1
#: statements `Database.execute` runs that write nothing
_READS = ("SELECT", "PRAGMA", "WITH", "EXPLAIN")


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


def is_damage(exc: BaseException) -> bool:
    """Whether SQLite says the file is damaged or is no database (`SQLITE_CORRUPT`,
    `SQLITE_NOTADB`; Python raises both as a bare `DatabaseError`), rather than that it cannot
    be opened, read or written (read-only, I/O, a full disk: `OperationalError`)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name:
        return name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT"))
    return type(exc) is sqlite3.DatabaseError


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


class _Frame:
    """A nested `transaction()` in progress: how to undo what was written in it."""

    __slots__ = ("memory", "savepoint", "sql")

    def __init__(self) -> None:
        #: statements that undo its writes, in the order they were made
        self.sql: list[tuple[str, tuple[object, ...]]] = []
        #: callables that undo its changes to writes deferred to the commit
        self.memory: list[Callable[[], None]] = []
        #: the SQLite savepoint opened for it by a write with no undo (`_no_undo`), if any
        self.savepoint: str | None = None


class _Transaction:
    """`Database.transaction()`. A class rather than a generator context manager: it runs
    several times an event, and a generator costs five times as much to enter and leave."""

    __slots__ = ("_depth", "_savepoint", "_store")

    def __init__(self, store: Database, savepoint: bool) -> None:
        self._store = store
        self._savepoint = savepoint
        self._depth = 0  # the store's depth outside this transaction

    def __enter__(self) -> None:
        store = self._store
        depth = self._depth = store._depth
        if depth == 0:
            store._conn.execute("BEGIN IMMEDIATE")
        elif self._savepoint:
            store._frames.append(_Frame())
        store._depth = depth + 1

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> None:
        store, depth = self._store, self._depth
        store._depth = depth
        if depth > 0:
            if self._savepoint:
                store._end_frame(store._frames.pop(), undo=kind is not None)
            return  # a join: the caller's transaction undoes it all on an error
        conn = store._conn
        if kind is not None:
            store._drop_pending()
            if conn.in_transaction:  # else SQLite rolled it all back itself (a full disk)
                conn.execute("ROLLBACK")
            return
        try:
            store._flush()
            conn.execute("COMMIT")
        except BaseException:
            store._drop_pending()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


class Database:
    """The bridge's state on disk: the connection and its transactions. `Store` adds the
    typed methods of each table family; open it with `Store.open(state_dir)`.

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
        self._checkpointer: Checkpointer | None = None
        #: the nested transactions open now, innermost last
        self._frames: list[_Frame] = []
        self._savepoints = 0
        #: `(stream, source, session)` -> the newest position recorded in the open
        #: transaction: one upsert a session at its commit, not one an event
        self._pending_positions: dict[tuple[str, str, str], tuple[int, int]] = {}
        #: audit records appended in the open transaction, in order: one `executemany` at
        #: its commit (`AuditTables.add_audit`)
        self._pending_audit: list[tuple[object, ...]] = []
        #: told once of the first damage a caller finds (`report_damage`): the server ends
        #: the bridge then; None (a test, a tool): nobody is told
        self.on_damage: Callable[[sqlite3.DatabaseError], None] | None = None
        self._damage: sqlite3.DatabaseError | None = None

    @classmethod
    def open(cls, state_dir: Path) -> Self:
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
            # before anything is written: a new file can give pages back (`compact`)
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
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
        store._checkpointer = Checkpointer(path)
        return store

    @classmethod
    def memory(cls) -> Self:
        """A store that lives and dies with the process (tests, benchmarks, a bare `Bridge`)."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=True)
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, Path(":memory:"))
        return cls(conn, Path(":memory:"))

    def report_damage(self, exc: BaseException) -> bool:
        """Whether `exc` says this store is damaged (`is_damage`), telling `on_damage` the
        first time. Code that catches an error to carry on (one event, one round) asks this
        first: carrying on with a damaged store would lose every event after it, quietly."""
        if not isinstance(exc, sqlite3.DatabaseError) or not is_damage(exc):
            return False
        if self._damage is None:
            self._damage = exc
            if self.on_damage is not None:
                self.on_damage(exc)
        return True

    def close(self) -> None:
        """Close the connection; a second call does nothing."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        self._conn.close()

    def __enter__(self) -> Self:
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

    def _pragma(self, name: str) -> int:
        return int(self._conn.execute(f"PRAGMA {name}").fetchone()[0])

    def compact(self) -> bool:
        """Make the file able to give pages back, once: True if it ran now.

        A file made before schema version 8 keeps every page it ever held (SQLite's
        `auto_vacuum` was off), and turning `auto_vacuum = INCREMENTAL` on takes effect only
        through a full VACUUM, which rewrites the whole file: it takes a few seconds a
        hundred megabytes, needs free disk for a copy (a temporary file and the WAL, each
        as large as what the file holds), and holds the write lock meanwhile. So it runs
        once, at start, after the hub has trimmed the replay buffers to their budget (the
        copy is of what is left). From then on the checkpointer's thread gives free pages
        back a few at a time (`checkpoint.give_back`). A new file is incremental from the
        start (`open`), and never needs this.
        """
        if self._path == Path(":memory:") or self._pragma("auto_vacuum") == 2:
            return False
        if self._depth:
            raise StoreError("compact() runs at start, outside any transaction")
        size = sum(self.file_bytes())
        log.warning(
            "store %s: compacting it once (%.1f MB) so that it can give disk space back; "
            "this takes a while on a large store",
            self._path,
            size / 1e6,
        )
        self._conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        self._conn.execute("VACUUM")
        log.info("store %s: compacted to %.1f MB", self._path, self.file_bytes()[0] / 1e6)
        return True

    def file_bytes(self) -> tuple[int, int]:
        """The sizes of the database file and of its WAL, in bytes (0 for a store in memory)."""
        if self._path == Path(":memory:"):
            return 0, 0
        sizes = []
        for path in (self._path, self._path.with_name(self._path.name + "-wal")):
            try:
                sizes.append(path.stat().st_size)
            except FileNotFoundError:
                sizes.append(0)
        return sizes[0], sizes[1]

    def free_bytes(self) -> int:
        """Bytes of free pages inside the file: what the checkpointer will give back."""
        return self._pragma("freelist_count") * self._pragma("page_size")

    def transaction(self, *, savepoint: bool = True) -> _Transaction:
        """One atomic unit: `BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` if the body raises.

        Nestable: an inner call joins the outer transaction (nothing is durable until the
        outermost one commits); if an inner body raises, its own writes are undone (each
        write registered its undo; a write that cannot opens a savepoint first) and the
        exception goes on to the caller. `savepoint=False` skips that bookkeeping for an
        inner call whose caller undoes everything on an error anyway.
        """
        return _Transaction(self, savepoint)

    # -- undo of nested transactions -------------------------------------------------------

    def _undo_sql(self, sql: str, parameters: tuple[object, ...]) -> None:
        """Register the statement that undoes the write just made, should its nested
        transaction fail (nothing to do outside one, or under a savepoint)."""
        frames = self._frames
        if frames and frames[-1].savepoint is None:
            frames[-1].sql.append((sql, parameters))

    def _undo_memory(self, undo: Callable[[], None]) -> None:
        """Register how to undo a change to a write deferred to the commit."""
        if self._frames:
            self._frames[-1].memory.append(undo)

    def _no_undo(self) -> None:
        """Before a write that registers no undo: a savepoint for every nested transaction
        open without one, outermost first, so a failing one still undoes it."""
        for frame in self._frames:
            if frame.savepoint is None:
                self._savepoints += 1
                frame.savepoint = f"sp{self._savepoints}"
                self._conn.execute(f"SAVEPOINT {frame.savepoint}")

    def _write_audit(self, rows: list[tuple[object, ...]]) -> None:
        """Insert deferred audit records: `AuditTables`'; never dropped unwritten here."""
        raise NotImplementedError("audit records are written by AuditTables")

    def _forget_caches(self) -> None:
        """Writes were undone: what a table family caches of its tables is read afresh
        (`ReplayTables`' running total)."""

    def _end_frame(self, frame: _Frame, *, undo: bool) -> None:
        conn = self._conn
        if undo:
            self._forget_caches()
            if conn.in_transaction:  # else SQLite rolled it all back itself (a full disk)
                if frame.savepoint is not None:
                    conn.execute(f"ROLLBACK TO {frame.savepoint}")
                    conn.execute(f"RELEASE {frame.savepoint}")
                for sql, parameters in reversed(frame.sql):
                    conn.execute(sql, parameters)
            for restore in reversed(frame.memory):
                restore()
            return
        if frame.savepoint is not None and conn.in_transaction:
            conn.execute(f"RELEASE {frame.savepoint}")
        if self._frames:  # the enclosing transaction undoes this one's writes too
            parent = self._frames[-1]
            parent.memory += frame.memory
            if parent.savepoint is None:
                parent.sql += frame.sql

    def _drop_pending(self) -> None:
        """The open transaction was rolled back: what it deferred to its commit goes too,
        and what the table families cache is read afresh."""
        self._pending_positions.clear()
        self._pending_audit.clear()
        self._forget_caches()

    def _flush(self) -> None:
        """Write what was deferred to the commit: the coalesced resume positions and the
        audit records, in the order they were appended."""
        audit = self._pending_audit
        if audit:
            self._write_audit(audit)
            audit.clear()
        pending = self._pending_positions
        if pending:
            self._conn.executemany(
                "INSERT INTO positions (stream, source, session, epoch, seq) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (stream, source, session) DO UPDATE SET epoch = excluded.epoch, "
                "seq = excluded.seq "
                "WHERE (excluded.epoch, excluded.seq) > (positions.epoch, positions.seq)",
                [(*key, *position) for key, position in pending.items()],
            )
            pending.clear()

    # -- group commit ----------------------------------------------------------------------

    def begin_group(self) -> bool:
        """Open a transaction that the `transaction()`s after it join, until `commit_group`.

        The bridge handles a burst of events in one group: one commit instead of one per
        event. Each `transaction()` inside is still atomic on its own (see `transaction`).
        Call `commit_group` before anything written in the group is shown outside the
        process. Returns False (and does nothing) when a transaction or group is already open.
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
            self._flush()
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._drop_pending()
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # a damaged file may refuse it too
                    conn.execute("ROLLBACK")
            if strict:
                raise
            if self.report_damage(exc):  # said once, and the bridge stops
                return True
            log.exception("the store could not commit; the last group of writes is lost")
        return True

    # -- statements for tests --------------------------------------------------------------

    def execute(self, sql: str, parameters: Sequence[object] = ()) -> list[tuple[object, ...]]:
        """Run one statement on the store's connection, inside the current `transaction()`.

        For tests that read the tables, or keep one of their own beside the store's (a
        test consumer recording its effects), so its writes commit or roll back with
        `record_delivery`. The core itself calls the typed methods of each table family.
        """
        if self._depth and (self._pending_positions or self._pending_audit):
            self._no_undo()
            self._flush()
        elif self._frames and not sql.lstrip().upper().startswith(_READS):
            self._no_undo()
        return list(self._conn.execute(sql, tuple(parameters)))


__all__ = ["DB_NAME", "MIGRATIONS", "Database", "StoreError", "default_state_dir", "is_damage"]
