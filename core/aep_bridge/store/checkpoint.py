"""The WAL checkpointer: copies the write-ahead log back into the database, and gives free pages
back to the disk, off the event loop."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

#: How long a statement waits for another connection's write lock before failing, in ms.
BUSY_TIMEOUT_MS: Final = 5000
#: Seconds between WAL checkpoints (see `Checkpointer`).
CHECKPOINT_INTERVAL: Final = 1.0
#: Free pages one incremental vacuum step gives back (4 KB each by default): some 5 ms of
#: holding the write lock, which the bridge's own writes wait out.
VACUUM_STEP: Final = 128
#: Steps a round at most, with a pause between them for the bridge's writes: 8 MB a second.
VACUUM_STEPS: Final = 16
#: Free pages left in the file for the next writes to reuse rather than given back.
VACUUM_KEEP: Final = 256
#: Bytes the WAL file is cut back to when the checkpointer starts it afresh: a burst of
#: writes grows it, and without a limit SQLite keeps the file at its largest for good.
WAL_KEEP_BYTES: Final = 4 * 1024 * 1024


class Checkpointer:
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

    Before checkpointing, it gives free pages back (`give_back`): the replay buffers' trims
    leave them, and a file whose `auto_vacuum` is INCREMENTAL (`Database.compact`) can
    move its last pages into them and shrink at the checkpoint. A round that leaves free
    pages over makes the next round run even with no commit in between.
    """

    def __init__(self, path: Path, interval: float = CHECKPOINT_INTERVAL) -> None:
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(path, interval), name="aep-bridge-checkpoint", daemon=True
        )
        self._thread.start()

    def _run(self, path: Path, interval: float) -> None:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA journal_size_limit = {WAL_KEEP_BYTES}")  # applied by `_restart`
        seen = None
        left = False  # free pages left over by the last round
        try:
            while not self._stopping.wait(interval):
                try:
                    version = conn.execute("PRAGMA data_version").fetchone()[0]
                    if version == seen and not left:
                        continue  # nothing committed since the last round
                    left = _give_back_now(conn, self._stopping)
                    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    seen = version
                    if not busy and frames > 0 and copied == frames:
                        _restart_now(conn)
                except sqlite3.Error as exc:  # I/O: the next round tries again
                    log.warning("WAL checkpoint of %s failed: %s", path, exc)
        finally:
            conn.close()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)


def _give_back_now(conn: sqlite3.Connection, stopping: threading.Event) -> bool:
    """`give_back`, unless the bridge holds the write lock for all of `BUSY_TIMEOUT_MS` (a
    long burst of events, each group of them one write transaction): then the pages wait
    for the next round, and this round's checkpoint still runs (PASSIVE does not need the
    lock). Before issue 34 the lock's "database is locked" skipped the checkpoint too, a
    warning a second under load while the WAL grew. Returns whether free pages are left."""
    try:
        return give_back(conn, stopping) > VACUUM_KEEP
    except sqlite3.OperationalError as exc:
        if not _locked(exc):
            raise
        log.debug("giving free pages back waits for the next round: %s", exc)
        return True


def _restart_now(conn: sqlite3.Connection) -> None:
    """`_restart`, unless the bridge holds the write lock: then the bridge's next commit
    starts the WAL afresh itself, as SQLite does without this thread."""
    try:
        _restart(conn)
    except sqlite3.OperationalError as exc:
        if not _locked(exc):
            raise
        log.debug("the WAL is started afresh by the next commit: %s", exc)


def _locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def give_back(conn: sqlite3.Connection, stopping: threading.Event | None = None) -> int:
    """Give the file's free pages back to the disk beyond `VACUUM_KEEP`, `VACUUM_STEP` at a
    time for `VACUUM_STEPS` steps at most; returns the free pages left.

    Does nothing on a file whose `auto_vacuum` is not INCREMENTAL. The pages go at the next
    checkpoint, which cuts the file to its new size.
    """
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        return 0
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    for _ in range(VACUUM_STEPS):
        if free <= VACUUM_KEEP:
            break
        # the sqlite3 module steps a statement with no result columns once, which would
        # give back one page: executescript steps it to its end
        conn.executescript(f"PRAGMA incremental_vacuum({min(VACUUM_STEP, free - VACUUM_KEEP)});")
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        if stopping is not None and stopping.wait(0.002):  # the bridge's writes go first
            break
    return free


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
