"""The embedded store: what survives a restart, what a duplicate does, what a crash undoes."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from aep_bridge.aep import Event, parse_event
from aep_bridge.aep.build import make_event
from aep_bridge.intake.hub import Hub, HubLimits
from aep_bridge.store import (
    DB_NAME,
    MIGRATIONS,
    Store,
    StoreError,
    StoreState,
    checkpoint,
    default_state_dir,
    floor_of,
    schema,
)
from tests.shared_data import AEP_FIXTURES

GOLDEN = [
    parse_event(line)
    for line in (AEP_FIXTURES / "golden" / "golden.jsonl").read_bytes().splitlines()
]
#: the first session's own events, in seq order (session.started, run.started, ...)
OWNED = [e for e in GOLDEN if e.session == "s_8f2c" and e.position is not None]
#: a command from another emitter to that session: no seq, so no position
FOREIGN = next(e for e in GOLDEN if e.session == "s_8f2c" and e.position is None)
STREAM = "relay:wss://relay.example/socket"


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "aep-bridge"


@pytest.fixture
def store(state_dir: Path):
    opened = Store.open(state_dir)
    yield opened
    opened.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def with_id(event: Event, event_id: str) -> Event:
    return parse_event(event.raw.replace(event.id.encode(), event_id.encode()))


# -- opening, files, migrations ------------------------------------------------------------


def test_state_dir_follows_xdg_state_home(tmp_path):
    assert default_state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "aep-bridge"
    home = tmp_path / "home"
    assert default_state_dir({"HOME": str(home)}) == home / ".local/state/aep-bridge"
    # the XDG spec: a relative value is invalid and ignored
    relative = {"XDG_STATE_HOME": "relative/dir", "HOME": str(home)}
    assert default_state_dir(relative) == home / ".local/state/aep-bridge"


def test_files_are_private_even_with_an_open_umask(state_dir):
    old = os.umask(0)  # anything created without an explicit mode would be world-writable
    try:
        opened = Store.open(state_dir)
        opened.kv_set("t", "k", "v")  # a write, so the WAL and shared-memory files exist
        try:
            assert mode(state_dir) == 0o700
            db = state_dir / "state.db"
            assert opened.path == db
            siblings = [db, db.with_name("state.db-wal"), db.with_name("state.db-shm")]
            assert all(p.exists() for p in siblings)
            assert {p.name: mode(p) for p in siblings} == {p.name: 0o600 for p in siblings}
        finally:
            opened.close()
    finally:
        os.umask(old)


def test_wal_mode_and_pragmas(store):
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0


def test_fresh_store_is_at_the_latest_version_and_reopening_keeps_data(state_dir):
    with Store.open(state_dir) as first:
        assert first.schema_version == len(MIGRATIONS) >= 1
        first.kv_set("telegram", "thread:s_1", "42")
    with Store.open(state_dir) as second:
        assert second.schema_version == len(MIGRATIONS)
        assert second.kv_get("telegram", "thread:s_1") == "42"


def test_each_migration_runs_once(state_dir, monkeypatch):
    with Store.open(state_dir):
        pass
    extra = "CREATE TABLE notes (body TEXT NOT NULL);\nINSERT INTO notes VALUES ('ran');\n"
    monkeypatch.setattr(schema, "MIGRATIONS", (*MIGRATIONS, extra))
    for _ in range(3):
        with Store.open(state_dir) as opened:
            assert opened.schema_version == len(MIGRATIONS) + 1
            rows = opened._conn.execute("SELECT body FROM notes").fetchall()
            assert rows == [("ran",)]


def test_a_failing_migration_leaves_the_previous_version_whole(state_dir, monkeypatch):
    with Store.open(state_dir) as opened:
        opened.kv_set("ns", "k", "kept")
    broken = "CREATE TABLE half (x INTEGER);\nINSERT INTO no_such_table VALUES (1);\n"
    monkeypatch.setattr(schema, "MIGRATIONS", (*MIGRATIONS, broken))
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        Store.open(state_dir)
    monkeypatch.undo()
    with Store.open(state_dir) as opened:
        assert opened.schema_version == len(MIGRATIONS)
        tables = {r[0] for r in opened._conn.execute("SELECT name FROM sqlite_master")}
        assert "half" not in tables
        assert opened.kv_get("ns", "k") == "kept"


def test_positions_of_a_version_4_store_bound_every_source_of_their_name(state_dir, monkeypatch):
    """Before version 5 a position named only the session. After the upgrade it still bounds
    that name, for every source, until a source records its own."""
    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS[:4])
    with Store.open(state_dir) as old:
        old.execute("INSERT INTO positions VALUES ('bridge', 's_1', 0, 7)")
    monkeypatch.undo()
    with Store.open(state_dir) as upgraded:
        assert upgraded.schema_version == len(MIGRATIONS)
        floors = upgraded.floors("bridge")
        assert floor_of(floors, "aep://laptop/agent/a/session/s_1", "s_1") == (0, 7)
        assert upgraded.positions("bridge") == {"s_1": (0, 7)}
        upgraded.set_position("bridge", "s_1", 0, 9, source="aep://laptop/agent/a/session/s_1")
        assert upgraded.positions("bridge") == {"s_1": (0, 9)}


def test_sources_sharing_a_session_name_keep_their_own_positions(store):
    laptop, server = "aep://laptop/agent/a/session/main", "aep://server/agent/a/session/main"
    store.set_position(STREAM, "main", 0, 40, source=laptop)
    store.set_position(STREAM, "main", 0, 3, source=server)
    floors = store.floors(STREAM)
    assert floor_of(floors, laptop, "main") == (0, 40)
    assert floor_of(floors, server, "main") == (0, 3)
    assert floor_of(floors, "aep://elsewhere/agent/a/session/main", "main") is None
    # resuming by session name (AEP `from`) starts from the least advanced: nothing lost
    assert store.positions(STREAM) == {"main": (0, 3)}


def test_a_database_from_a_newer_bridge_is_refused(state_dir):
    with Store.open(state_dir):
        pass
    conn = sqlite3.connect(state_dir / "state.db")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match=r"schema version 99.*newer aep-bridge"):
        Store.open(state_dir)
    conn = sqlite3.connect(state_dir / "state.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 99  # left untouched
    conn.close()


def test_the_store_refuses_other_threads(store):
    errors: list[BaseException] = []

    def use() -> None:
        try:
            store.kv_get("ns", "k")
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], sqlite3.ProgrammingError)


# -- positions -------------------------------------------------------------------------------


def test_positions_only_move_forward(store):
    assert store.position(STREAM, "s_1") is None
    store.set_position(STREAM, "s_1", 0, 5)
    store.set_position(STREAM, "s_1", 0, 3)  # redelivery
    assert store.position(STREAM, "s_1") == (0, 5)
    store.set_position(STREAM, "s_1", 1, 0)  # a new epoch outranks any seq of the old one
    store.set_position(STREAM, "s_1", 0, 999)
    assert store.position(STREAM, "s_1") == (1, 0)
    store.set_position(STREAM, "s_2", 0, 7)
    store.set_position("other", "s_1", 0, 1)
    assert store.positions(STREAM) == {"s_1": (1, 0), "s_2": (0, 7)}
    assert store.positions("other") == {"s_1": (0, 1)}


def test_positions_survive_a_restart(state_dir):
    with Store.open(state_dir) as first:
        first.set_position(STREAM, "s_1", 2, 40)
    with Store.open(state_dir) as second:
        assert second.positions(STREAM) == {"s_1": (2, 40)}


def test_a_position_sqlite_cannot_hold_is_refused(store):
    with pytest.raises(ValueError, match="outside"):
        store.set_position(STREAM, "s_1", 0, 1 << 63)


# -- the dedupe window and record_delivery ---------------------------------------------------


def test_record_delivery_dedupes_and_advances_the_session(store):
    for event in OWNED[:4]:
        assert store.record_delivery(STREAM, event) is True
    assert store.position(STREAM, "s_8f2c") == OWNED[3].position
    # the same event again, as a relay redelivers after a reconnect
    assert store.record_delivery(STREAM, OWNED[1]) is False
    assert store.position(STREAM, "s_8f2c") == OWNED[3].position
    assert store.seen(STREAM, *OWNED[1].dedupe_key)


def test_a_backfilled_event_is_new_but_does_not_pull_the_position_back(store):
    store.record_delivery(STREAM, OWNED[5])
    late = OWNED[2]  # never seen, below the high-water mark
    assert store.record_delivery(STREAM, late) is True
    assert store.position(STREAM, "s_8f2c") == OWNED[5].position


def test_a_foreign_event_is_remembered_without_a_position(store):
    assert FOREIGN.position is None
    assert store.record_delivery(STREAM, FOREIGN) is True
    assert store.record_delivery(STREAM, FOREIGN) is False
    assert store.positions(STREAM) == {}


def test_same_id_from_another_source_is_another_event(store):
    assert store.remember(STREAM, "aep://host-a/agent/x", "01J0")
    assert store.remember(STREAM, "aep://host-b/agent/x", "01J0")
    assert not store.remember(STREAM, "aep://host-a/agent/x", "01J0")


def test_each_stream_has_its_own_window(store):
    """Two consumers of one store (the console view, the core) each see every event."""
    assert store.record_delivery("console", OWNED[0])
    assert store.record_delivery("core", OWNED[0])
    assert not store.record_delivery("core", OWNED[0])


def deliver_then_fail(store: Store, event: Event) -> None:
    """A consumer that records an event, writes its effect, then crashes."""
    with store.transaction():
        assert store.record_delivery(STREAM, event)
        store.kv_set("telegram", "card:r1", "msg-17")  # the consumer's own effect
        raise RuntimeError("channel down")


def test_a_failed_transaction_leaves_nothing_behind(store):
    event = OWNED[0]
    with pytest.raises(RuntimeError, match="channel down"):
        deliver_then_fail(store, event)
    assert not store.seen(STREAM, *event.dedupe_key)
    assert store.kv_get("telegram", "card:r1") is None
    assert store.position(STREAM, "s_8f2c") is None
    # so the redelivery is processed, not dropped as a duplicate
    with store.transaction():
        assert store.record_delivery(STREAM, event)
        store.kv_set("telegram", "card:r1", "msg-18")
    assert store.kv_get("telegram", "card:r1") == "msg-18"
    assert store.position(STREAM, "s_8f2c") == event.position


def test_committed_transactions_survive_a_restart(state_dir):
    with Store.open(state_dir) as first, first.transaction():
        first.record_delivery(STREAM, OWNED[0])
        first.kv_set("web", "k", "v")
    with Store.open(state_dir) as second:
        assert second.record_delivery(STREAM, OWNED[0]) is False
        assert second.kv_get("web", "k") == "v"


def write_then_fail(store: Store, key: str) -> None:
    with store.transaction():
        store.kv_set("ns", key, "1")
        raise KeyError(key)


def test_an_inner_failure_undoes_only_its_own_writes(store):
    with store.transaction():
        store.kv_set("ns", "outer", "1")
        with pytest.raises(KeyError):
            write_then_fail(store, "inner")
        with store.transaction():
            store.kv_set("ns", "joined", "1")
    assert store.kv_get("ns", "outer") == "1"
    assert store.kv_get("ns", "inner") is None
    assert store.kv_get("ns", "joined") == "1"


def deliver_in_inner_then_fail(store: Store) -> None:
    with store.transaction():
        with store.transaction():
            store.record_delivery(STREAM, OWNED[0])
        raise ValueError("late")


def test_an_outer_failure_undoes_the_inner_transactions(store):
    with pytest.raises(ValueError, match="late"):
        deliver_in_inner_then_fail(store)
    assert not store.seen(STREAM, *OWNED[0].dedupe_key)
    assert store.position(STREAM, "s_8f2c") is None


def committed(state_dir: Path, key: str) -> bool:
    """Whether another connection (another process after a crash) sees `key` written."""
    other = sqlite3.connect(state_dir / "state.db", isolation_level=None)
    try:
        rows = other.execute("SELECT 1 FROM kv WHERE namespace = 'ns' AND key = ?", (key,))
        return bool(rows.fetchall())
    finally:
        other.close()


def test_a_group_is_durable_only_once_it_commits(store, state_dir):
    assert store.begin_group()
    assert not store.begin_group()  # one at a time
    with store.transaction():
        store.kv_set("ns", "first", "1")
    with store.transaction():
        store.kv_set("ns", "second", "1")
    assert not committed(state_dir, "first")  # a crash now loses both, events and all
    assert store.commit_group()
    assert committed(state_dir, "first")
    assert committed(state_dir, "second")
    assert store.group is None


def test_a_failure_inside_a_group_undoes_only_its_own_transaction(store, state_dir):
    store.begin_group()
    with store.transaction():
        store.kv_set("ns", "kept", "1")
    with pytest.raises(KeyError):
        write_then_fail(store, "undone")
    store.commit_group()
    assert committed(state_dir, "kept")
    assert not committed(state_dir, "undone")


def test_a_group_does_not_commit_in_the_middle_of_a_transaction(store, state_dir):
    store.begin_group()
    with store.transaction():
        store.kv_set("ns", "half", "1")
        assert not store.commit_group()  # it would commit half of an atomic unit
    assert not committed(state_dir, "half")
    assert store.commit_group()
    assert committed(state_dir, "half")


async def test_a_group_opened_until_idle_commits_when_the_loop_runs_again(store, state_dir):
    assert store.group_until_idle()
    store.kv_set("ns", "k", "1")
    assert not committed(state_dir, "k")
    await asyncio.sleep(0)
    assert committed(state_dir, "k")


def test_the_wal_is_checkpointed_in_the_background_and_stops_growing(store, state_dir, monkeypatch):
    """Commits never checkpoint (that put milliseconds into a card's way out); a thread does,
    so the log is reused instead of growing with every write."""
    wal = state_dir / "state.db-wal"
    blob = "x" * 4000

    def write_a_megabyte(round_: int) -> None:
        with store.transaction():
            for n in range(250):
                store.kv_set("ns", f"{round_}-{n}", blob)

    write_a_megabyte(0)
    first = wal.stat().st_size
    for round_ in range(1, 4):
        time.sleep(checkpoint.CHECKPOINT_INTERVAL * 1.5)  # a checkpoint runs meanwhile
        write_a_megabyte(round_)
    assert wal.stat().st_size < 2 * first  # without it: four megabytes and counting


def test_the_first_commit_after_a_checkpoint_does_not_start_the_wal_afresh(store, state_dir):
    """A WAL copied back whole is started afresh by the checkpointer's thread: the writer
    that starts it pays an fdatasync of its new header, which sat in the way of the first
    event after every quiet second (a permission card, an answer's claim). The header is
    what shows who started it: the bridge's commit leaves it as the thread wrote it."""
    wal = state_dir / "state.db-wal"
    store.kv_set("ns", "k", "before")
    time.sleep(checkpoint.CHECKPOINT_INTERVAL * 2.5)  # checkpointed meanwhile
    header = wal.read_bytes()[:32]
    store.kv_set("ns", "k", "after")
    assert wal.read_bytes()[:32] == header  # today: new salts, synced in this commit
    assert store.kv_get("ns", "k") == "after"


def test_prune_keeps_the_newest(store):
    events = [with_id(OWNED[0], f"01JPRUNE{i:04d}") for i in range(10)]
    for event in events:
        store.remember(STREAM, *event.dedupe_key)
    assert store.prune_seen(3) == 7
    assert [store.seen(STREAM, *e.dedupe_key) for e in events] == [False] * 7 + [True] * 3
    assert store.prune_seen(3) == 0
    # a pruned key is new again; it is now the newest
    assert store.remember(STREAM, *events[0].dedupe_key)
    assert store.prune_seen(1) == 3
    assert store.seen(STREAM, *events[0].dedupe_key)
    assert store.prune_seen(0) == 1
    assert not store.seen(STREAM, *events[0].dedupe_key)
    with pytest.raises(ValueError, match="keep"):
        store.prune_seen(-1)


# -- file offsets and key-value state ------------------------------------------------------


def test_file_offsets_round_trip(store):
    assert store.file_offset("/logs/a/s.jsonl") is None
    store.set_file_offset("/logs/a/s.jsonl", 1234, 500)
    store.set_file_offset("/logs/a/s.jsonl", 5678, 0)  # rotated: the new file from the start
    assert store.file_offset("/logs/a/s.jsonl") == (5678, 0)


def test_kv_round_trip_and_namespaces(store):
    assert store.kv_get("telegram", "k") is None
    store.kv_set("telegram", "k", "one")
    store.kv_set("discord", "k", "two")
    store.kv_set("telegram", "k", "three")
    assert store.kv_get("telegram", "k") == "three"
    assert store.kv_get("discord", "k") == "two"
    store.kv_delete("telegram", "k")
    store.kv_delete("telegram", "k")  # deleting again is fine
    assert store.kv_get("telegram", "k") is None
    assert store.kv_get("discord", "k") == "two"


async def test_store_state_is_a_persistent_channel_state(state_dir):
    with Store.open(state_dir) as opened:
        state = StoreState(opened, "telegram")
        assert await state.get("thread:s_1") is None
        await state.set("thread:s_1", "-100123:77")
        await state.set("card:r_1", "msg-9")
        await state.delete("card:r_1")
        assert await StoreState(opened, "discord").get("thread:s_1") is None
    with Store.open(state_dir) as reopened:
        state = StoreState(reopened, "telegram")
        assert await state.get("thread:s_1") == "-100123:77"
        assert await state.get("card:r_1") is None


class _NoJsonFunctions(sqlite3.Connection):
    """A connection as an SQLite built without its JSON functions answers."""

    def execute(self, sql, parameters=(), /):  # type: ignore[override]
        if "json_" in sql:
            raise sqlite3.OperationalError("no such function: json_extract")
        return super().execute(sql, parameters)


@pytest.mark.parametrize("json_functions", [True, False])
def test_the_buffered_keys_are_read_with_or_without_sqlites_json(tmp_path, json_functions):
    """A restart reads each buffered event's key without validating it; an SQLite built
    without JSON functions (optional before 3.38) must not stop the bridge from starting."""
    events = [
        parse_event(line)
        for line in (AEP_FIXTURES / "golden" / "golden.jsonl").read_bytes().splitlines()
    ]
    positioned = [e for e in events if e.position is not None]
    with Store.open(tmp_path) as writer:
        writer.buffer_events(positioned, keep=1000)
        writer.execute(  # a damaged row is skipped, not fatal
            "INSERT INTO relay_buffer VALUES ('aep://x', 'broken', 0, 1, CAST('{not json' AS BLOB))"
        )
    path = tmp_path / DB_NAME
    factory = sqlite3.Connection if json_functions else _NoJsonFunctions
    conn = sqlite3.connect(path, isolation_level=None, factory=factory)
    try:
        keys = list(Store(conn, path).buffered_keys())
    finally:
        conn.close()
    expected = sorted(
        (e.source, str(e.session), e.epoch, int(e.seq or 0), e.id) for e in positioned
    )
    assert keys == expected


# -- the undo of nested transactions (no savepoint an event) -------------------------------


def traced(store: Store) -> list[str]:
    """The statements the store's connection runs from now on."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    return statements


def rows(store: Store, sql: str) -> list[tuple[object, ...]]:
    return list(store._conn.execute(sql))


def test_events_in_a_group_cost_no_savepoint_and_one_position_write_a_session(store, state_dir):
    """A burst of one session's events: each event atomic on its own, yet no SAVEPOINT is
    written, and the session's resume point is written once, by the commit."""
    statements = traced(store)
    store.begin_group()
    for event in OWNED:
        with store.transaction():
            assert store.record_delivery(STREAM, event)
    assert store.position(STREAM, "s_8f2c") == OWNED[-1].position  # seen before the commit
    store.commit_group()
    assert not [s for s in statements if s.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK"))]
    assert len([s for s in statements if "INTO positions" in s]) == 1
    store.close()
    with Store.open(state_dir) as again:
        assert again.position(STREAM, "s_8f2c") == OWNED[-1].position
        assert all(again.seen(STREAM, *e.dedupe_key) for e in OWNED)


def open_a_session_then_fail(store: Store, event: Event, *, unloggable: bool) -> None:
    """One event's writes in every table family the event path writes, then a failure."""
    with store.transaction():
        assert store.record_delivery(STREAM, event)
        store.add_session("s-new", event.source, "s_new", STREAM, "agent", "name")
        store.add_thread("s-new", "telegram", "name")
        assert store.add_request("c1", "s-new", event.id, event.raw, "[]", "open", None)
        store.add_card("c1", "telegram")
        if unloggable:
            store.kv_set("ns", "k", "v")  # a write with no undo of its own: a savepoint
            store.execute("SELECT 1")  # a statement from outside: the positions go first
        raise RuntimeError("render failed")


@pytest.mark.parametrize("unloggable", [False, True])
def test_a_failed_event_in_a_group_leaves_nothing_and_the_events_before_it_stay(
    store, state_dir, unloggable
):
    store.begin_group()
    with store.transaction():
        assert store.record_delivery(STREAM, OWNED[0])
    with pytest.raises(RuntimeError, match="render failed"):
        open_a_session_then_fail(store, OWNED[1], unloggable=unloggable)
    store.commit_group()
    assert store.seen(STREAM, *OWNED[0].dedupe_key)
    assert not store.seen(STREAM, *OWNED[1].dedupe_key)
    assert store.position(STREAM, "s_8f2c") == OWNED[0].position
    for table in ("sessions", "threads", "requests", "cards"):
        assert rows(store, f"SELECT * FROM {table}") == [], table
    assert store.kv_get("ns", "k") is None
    with store.transaction():  # so the redelivery is handled, not dropped as seen
        assert store.record_delivery(STREAM, OWNED[1])
    assert store.position(STREAM, "s_8f2c") == OWNED[1].position


def advance_then_fail(store: Store, event: Event) -> None:
    with store.transaction():
        store.set_position(STREAM, "s_8f2c", *event.position, source=event.source)
        raise KeyError("inner")


def test_an_inner_failure_keeps_the_position_its_enclosing_event_recorded(store):
    """A nested failure takes back its own position, not the one recorded before it."""
    store.begin_group()
    with store.transaction():
        assert store.record_delivery(STREAM, OWNED[2])
        with pytest.raises(KeyError):
            advance_then_fail(store, OWNED[5])
    store.commit_group()
    assert store.position(STREAM, "s_8f2c") == OWNED[2].position


# -- the disk budget: incremental vacuum, the upgrade, records of ended sessions -----------------


def held_bytes(store: Store) -> int:
    """What the replay buffers hold, summed from the table itself."""
    return int(store.execute("SELECT total(length(raw)) FROM relay_buffer")[0][0])  # type: ignore[arg-type]


def file_size(state_dir: Path) -> int:
    """state.db's size once its WAL is copied back (on a connection of the test's own)."""
    conn = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return (state_dir / DB_NAME).stat().st_size


def progress_events(session: str, count: int, *, ended: bool) -> list[Event]:
    source = f"aep://laptop/agent/a/session/{session}"
    events = [
        make_event(
            "progress.status",
            source=source,
            agent="a",
            session=session,
            seq=i,
            data={"percent": i % 100, "message": "x" * 700},
        )
        for i in range(count)
    ]
    if ended:
        events.append(
            make_event(
                "session.ended",
                source=source,
                agent="a",
                session=session,
                seq=count,
                data={"reason": "normal"},
            )
        )
    return events


def test_a_new_store_gives_the_pages_of_trimmed_buffers_back_to_the_disk(state_dir):
    """A fresh file is incremental from the start (`auto_vacuum` 2): once ended sessions'
    buffers go, the checkpointer's thread gives their pages back and the file shrinks (an
    SQLite file otherwise keeps every page it ever had, for good)."""
    store = Store.open(state_dir)
    assert store._conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
    clock = [1_000_000.0]
    hub = Hub(HubLimits(replay_retention=60), store, clock=lambda: clock[0])
    for k in range(8):  # 7 MB of ended sessions, 15 KB of a live one
        hub.admit(progress_events(f"done{k}", 1000, ended=True))
        hub.flush()
    hub.admit(progress_events("live", 16, ended=False))
    hub.flush()
    full = file_size(state_dir)
    assert full > 7_000_000
    clock[0] += 61
    hub.flush()  # the retention has passed: the ended sessions' buffers go
    assert store.free_bytes() > 6_000_000
    # a wait for the thread, not a measure of it: on what the test asserts, the file's size,
    # since a checkpoint racing the thread's vacuum steps may leave the file cut at an
    # earlier step (CI once saw it one step down while the free pages were already gone)
    deadline = time.monotonic() + 60
    while (size := file_size(state_dir)) >= full / 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert size < full / 4
    assert [e.seq for e in hub.held("live")] == list(range(16))
    store.close()


def legacy_store(state_dir: Path, version: int = 7) -> None:
    """A file as an aep-bridge before the budget made it: schema `version`, and
    `auto_vacuum` off (SQLite's default, which only a full VACUUM changes)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for script in MIGRATIONS[:version]:
        for statement in schema._statements(script):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


def test_a_store_from_before_the_budget_is_trimmed_then_compacted_once(state_dir):
    """The upgrade: version 8 dates the end of the buffers of sessions the core saw end (the
    store sums what the buffers hold); the first start drops those past their retention and
    trims the rest to the budget, then compacts the file once (the full VACUUM that turns
    incremental vacuum on), copying only what is left. The next start does not compact."""
    legacy_store(state_dir)
    conn = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    rows, sizes = [], {}
    for k in range(12):
        events = progress_events(f"s{k}", 500, ended=k < 6)
        sizes[f"s{k}"] = sum(len(e.raw) for e in events)
        rows += [(e.source, e.session, e.epoch, e.seq, e.raw) for e in events]
    conn.executemany("INSERT INTO relay_buffer VALUES (?, ?, ?, ?, ?)", rows)
    long_ago = time.time() - 7200
    conn.executemany(  # the core saw the first six end two hours ago
        "INSERT INTO sessions (id, source, session, stream, agent, name, state, created, "
        "updated) VALUES (?, ?, ?, 'embedded', 'a', ?, 'ended', ?, ?)",
        [
            (f"id{k}", f"aep://laptop/agent/a/session/s{k}", f"s{k}", f"s{k}", long_ago, long_ago)
            for k in range(6)
        ],
    )
    conn.close()
    before = file_size(state_dir)
    assert before > 5_500_000

    store = Store.open(state_dir)
    assert store.schema_version == len(MIGRATIONS)
    ended = dict(store.execute("SELECT session, ended FROM relay_sessions"))
    assert ended == {f"s{k}": (long_ago if k < 6 else None) for k in range(12)}
    assert store.replay_usage() == (sum(sizes.values()), 12)
    budget = 1_000_000
    hub = Hub(HubLimits(replay_bytes=budget, replay_retention=3600), store)
    assert all(hub.held(f"s{k}") == [] for k in range(6)), "ended two hours ago"
    assert store.replay_bytes() == held_bytes(store)
    assert store.replay_bytes() <= budget
    assert store.compact()
    assert store._conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    after = file_size(state_dir)
    assert after < 2 * budget < before / 2
    assert any(hub.held(f"s{k}") for k in range(6, 12)), "live sessions keep what fits"
    store.close()
    with Store.open(state_dir) as again:
        assert not again.compact()


def test_the_records_of_long_ended_sessions_are_forgotten(store):
    """`store.session_retention_days`: a session that ended before the cut goes with its
    threads, requests, cards, answers, resume positions and any replay buffer; an open
    one, and one that ended after the cut, keep theirs."""
    for id_, name in (("sOld", "old"), ("sOpen", "open"), ("sNew", "new")):
        source = f"aep://laptop/agent/a/session/{name}"
        with store.transaction():
            store.add_session(id_, source, name, "embedded", "a", name)
            store.add_thread(id_, "telegram", name)
            store.add_request(f"r-{id_}", id_, f"e-{id_}", b"{}", "[]", "open", None)
            store.add_card(f"r-{id_}", "telegram")
            store.claim_request(f"r-{id_}", "allow", "alice", f"c-{id_}", b"{}", 0.0)
            store.set_position("embedded", name, 0, 5, source=source)
        store.buffer_events(progress_events(name, 2, ended=False), keep=10)
    store.save_activity()  # their rows in relay_sessions too
    store.end_session("sOld")
    store.execute("UPDATE sessions SET updated = ? WHERE id = 'sOld'", (time.time() - 40 * 86400,))
    store.end_session("sNew")
    assert store.forget_ended_sessions(time.time() - 30 * 86400, 100) == ["sOld"]
    assert [row[0] for row in store.session_rows()] == ["sOpen", "sNew"]
    assert {row[0] for row in store.thread_rows()} == {"sOpen", "sNew"}
    assert store.request("r-sOld") is None
    assert store.request("r-sOpen") is not None
    assert store.card_channels("r-sOld") == []
    assert store.answer_author("r-sOld", "c-sOld") is None
    assert store.answer_author("r-sNew", "c-sNew") == "alice"
    assert set(store.positions("embedded")) == {"open", "new"}
    assert {row[1] for row in store.execute("SELECT * FROM relay_sessions")} == {"open", "new"}
    held = store.execute("SELECT DISTINCT session FROM relay_buffer")
    assert {row[0] for row in held} == {"open", "new"}
    assert store.replay_bytes() == held_bytes(store)
    assert store.forget_ended_sessions(time.time() - 30 * 86400, 100) == []


def test_the_wal_file_is_cut_back_after_a_burst(store, state_dir):
    """A burst of writes (a restart's compaction, a flood) grows the WAL file; once the
    checkpointer has copied it back and started it afresh, the file is cut back to
    `WAL_KEEP_BYTES` instead of staying at its largest for good."""
    wal = state_dir / "state.db-wal"
    limit = 4 * 1024 * 1024  # checkpoint.WAL_KEEP_BYTES
    with store.transaction():
        for n in range(3000):
            store.kv_set("ns", f"k{n}", "x" * 4000)
    assert wal.stat().st_size > 3 * limit
    deadline = time.monotonic() + 30  # a wait for the thread, not a measure of it
    while wal.stat().st_size > limit and time.monotonic() < deadline:
        time.sleep(0.1)
    assert wal.stat().st_size <= limit  # before: 12 MB, for good
    assert store.kv_get("ns", "k2999") == "x" * 4000


def test_a_writer_holding_the_lock_does_not_stop_the_checkpoint(tmp_path, monkeypatch, caplog):
    """Issue 34 (the team load): under a long burst the bridge's connection holds the write
    lock nearly all the time. Giving free pages back needs that lock and waited for it in
    vain ("database is locked", a warning every round), and the failure skipped the round's
    checkpoint too, which does not need the lock: the WAL was never copied back and grew.
    Now the pages wait for a later round and the checkpoint runs."""
    monkeypatch.setattr(checkpoint, "BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "state.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA auto_vacuum = INCREMENTAL")
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # as the bridge's connection
    writer.execute("CREATE TABLE t (v BLOB)")
    writer.execute("CREATE TABLE gone (v BLOB)")
    for table in ("gone", "t"):
        writer.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 750) "
            f"INSERT INTO {table} SELECT randomblob(4000) FROM n"
        )
    writer.execute("DELETE FROM gone")  # 3 MB of free pages for `give_back`
    small = path.stat().st_size  # all of it still in the WAL
    writer.execute("BEGIN IMMEDIATE")  # the bridge's open group: the write lock, held
    writer.execute("INSERT INTO t VALUES (x'00')")
    checkpointer = checkpoint.Checkpointer(path, interval=0.05)
    try:
        deadline = time.monotonic() + 30  # a wait for the thread, not a measure of it
        while path.stat().st_size < small + 2_000_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert path.stat().st_size >= small + 2_000_000  # copied back from the WAL
    finally:
        checkpointer.stop()
        writer.execute("COMMIT")
        writer.close()
    assert not [r for r in caplog.records if "failed" in r.getMessage()]


# -- the audit trail's records, written with the commit that holds them ----------------------


def _record(kind: str) -> tuple[object, ...]:
    from aep_bridge.store.audit import AUDIT_COLUMNS

    values: list[object] = [None] * len(AUDIT_COLUMNS)
    values[0], values[1], values[-2] = time.time(), kind, "{}"
    return tuple(values)


def _kinds(store: Store) -> list[str]:
    return [row[2] for row in store.audit_rows()]


def _append_then_fail(store: Store, kind: str, inner: str | None = None) -> None:
    """Append `kind` in a transaction (and `inner` in one nested in it), then fail it."""
    with store.transaction():
        store.add_audit(_record(kind))
        if inner is not None:
            with store.transaction():
                store.add_audit(_record(inner))
        raise RuntimeError("the event's handling failed")


def test_an_audit_record_is_kept_unless_the_part_of_the_transaction_holding_it_fails(store):
    """A record goes with the transaction that appended it: a nested part that fails takes
    its own records back, and only those; a failed whole takes all of them back."""
    with store.transaction():
        store.add_audit(_record("asked"))
        with pytest.raises(RuntimeError):
            _append_then_fail(store, "answered, then undone", "inner, undone with its parent")
        store.add_audit(_record("refused"))
        assert _kinds(store) == ["asked", "refused"]  # its own, read inside it
    store.add_audit(_record("outside any transaction"))
    with pytest.raises(RuntimeError):
        _append_then_fail(store, "rolled back")
    assert _kinds(store) == ["asked", "refused", "outside any transaction"]


def test_audit_records_of_a_group_are_durable_with_its_commit_and_a_kill_keeps_them(state_dir):
    """Records appended in a group are written by its commit, in order; a SIGKILL after it
    keeps them, and takes only those of the group it cut short."""
    script = f"""
import os, signal, time
from aep_bridge.store import Store
from aep_bridge.store.audit import AUDIT_COLUMNS
def record(kind):
    values = [None] * len(AUDIT_COLUMNS)
    values[0], values[1], values[-2] = time.time(), kind, "{{}}"
    return tuple(values)
store = Store.open({str(state_dir)!r})
store.begin_group()
for kind in ("asked", "pressed", "answered"):
    with store.transaction():
        store.add_audit(record(kind))
store.commit_group()
store.begin_group()
store.add_audit(record("cut short"))
os.kill(os.getpid(), signal.SIGKILL)
"""
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    with Store.open(state_dir) as reopened:
        assert _kinds(reopened) == ["asked", "pressed", "answered"]
