"""The store's disk use beyond the replay buffers (issue 30): the dedupe window's cost a key
and its bound, the records of sessions ended over the retention while the bridge runs, and
the channels' own state going with them."""

from __future__ import annotations

import asyncio
import sqlite3
import time

from aep_bridge.store import DB_NAME, MIGRATIONS, Store, schema
from tests.core.rig import Rig

STREAM = "embedded"


def demo_key(k: int) -> tuple[str, str]:
    """The `(source, id)` of the k-th event of demo-like sessions (46 events each), as the
    soak sends them: a source URI naming its session, a ULID."""
    session = k // 46
    return (
        f"aep://localhost/agent/claude-code/session/s_{session:06d}",
        f"01K{session:08X}{k % 46:03d}000000000000",
    )


# -- the dedupe window -----------------------------------------------------------------------


def test_the_dedupe_window_costs_a_few_dozen_bytes_a_key(tmp_path):
    """The window held the stream, source and id of every key with a unique index over
    them: some 200 bytes a key, 40 MB at its bound. A 64-bit digest costs under 50."""
    keys = 20_000
    empty = tmp_path / "empty"
    Store.open(empty).close()
    state = tmp_path / "state"
    store = Store.open(state)
    for start in range(0, keys, 500):
        with store.transaction():
            for k in range(start, start + 500):
                assert store.remember(STREAM, *demo_key(k))
    store.close()  # the last connection's close checkpoints the WAL into the file
    grown = (state / DB_NAME).stat().st_size - (empty / DB_NAME).stat().st_size
    assert grown / keys < 50, f"{grown / keys:.0f} bytes a key"


def test_a_window_from_before_is_carried_over_in_its_order(tmp_path):
    """A store whose window holds the strings (schema 9) is migrated with it: every key is
    still seen, and pruning still keeps the newest."""
    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / DB_NAME, isolation_level=None)
    for script in MIGRATIONS[:9]:
        for statement in schema._statements(script):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 9")
    rows = [(n, STREAM, *demo_key(n)) for n in (5, 1, 9, 3)]  # n is the arrival order
    conn.executemany("INSERT INTO seen (n, stream, source, id) VALUES (?, ?, ?, ?)", rows)
    conn.close()
    with Store.open(state) as store:
        assert store.schema_version == len(MIGRATIONS)
        assert all(store.seen(STREAM, *demo_key(n)) for n in (1, 3, 5, 9))
        assert not store.seen("another stream", *demo_key(1))
        assert not store.remember(STREAM, *demo_key(9))
        assert store.prune_seen(2) == 2
        assert [store.seen(STREAM, *demo_key(n)) for n in (1, 3, 5, 9)] == [
            False,
            False,
            True,
            True,
        ]
        assert store.remember(STREAM, *demo_key(1))  # forgotten: new again


async def test_the_dedupe_window_holds_what_store_dedupe_window_says(tmp_path):
    """`store.dedupe_window` bounds the window the bridge keeps on disk (pruned every tenth
    of it when small), and an event sent again within it is shown once."""
    async with Rig(tmp_path / "state", store={"dedupe_window": 1000}) as rig:
        agent = rig.agent()
        agent.start()
        for n in range(3000):
            agent.say(f"step {n}")
            if n % 500 == 0:
                await rig.settle()
        await rig.settle()
        held = rig.store.execute("SELECT count(*) FROM seen")[0][0]
        assert 1000 <= held <= 1100
        again = agent.say("once")
        await rig.settle()
        rig.hub.admit([again])  # an emitter's retry of the same event
        await rig.settle()
        assert rig.thread_texts("alpha").count("once") == 1


# -- the records of ended sessions, while the bridge runs --------------------------------------

DAY = 86_400.0


async def test_a_running_bridge_forgets_the_sessions_ended_over_the_retention(tmp_path):
    """`store.session_retention_days` while the bridge runs, not only at start: a session
    that ended longer ago goes from the store and from the bridge's memory (its records,
    its question); one that ended since, and one that still runs, keep theirs. A round
    goes in batches, every session due in one round."""
    now = [time.time()]
    async with Rig(tmp_path / "state", clock=lambda: now[0]) as rig:
        agents = {name: rig.agent(name) for name in ("old1", "old2", "old3", "recent", "live")}
        for name, agent in agents.items():
            agent.start(label=name)
            agent.ask()
            if name != "live":
                agent.end()
        await rig.settle()
        old = [rig.bridge.sessions.find_by_session(f"old{k}") for k in (1, 2, 3)]
        assert all(record is not None for record in old)
        recent = rig.bridge.sessions.find_by_session("recent")
        assert recent is not None
        now[0] += 31 * DAY  # a month on: the old ones ended 31 days ago, the recent one 2
        rig.store.execute(
            "UPDATE sessions SET updated = ? WHERE id = ?", (now[0] - 2 * DAY, recent.id)
        )
        rig.store.commit_group()
        assert await rig.bridge.retention.forget(batch=2) == 3
        stored = {row[2] for row in rig.store.session_rows()}
        assert stored == {"recent", "live"}
        assert {row[0] for row in rig.store.thread_rows()} == {recent.id, _id(rig, "live")}
        for record in old:
            assert record is not None
            assert rig.bridge.sessions.get(record.id) is None
            assert rig.bridge.sessions.find(record.source, record.session) is None
            assert rig.store.requests_in({"dismissed"}, record.id) == []
        assert rig.bridge.sessions.find_by_session("recent") == recent
        assert await rig.bridge.retention.forget() == 0
    with Store.open(tmp_path / "state") as store:  # and so it stays
        assert {row[2] for row in store.session_rows()} == {"recent", "live"}


def _id(rig: Rig, session: str) -> str:
    record = rig.bridge.sessions.find_by_session(session)
    assert record is not None
    return record.id


async def test_the_bridge_forgets_ended_sessions_on_its_own_while_it_runs(tmp_path):
    """Nobody calls anything: with a retention of a fraction of a day (here 2 s), the
    running bridge forgets an ended session soon after, by its own rounds."""
    async with Rig(tmp_path / "state", store={"session_retention_days": 2 / DAY}) as rig:
        agent = rig.agent("brief")
        agent.start()
        agent.end()
        await rig.settle()
        assert rig.bridge.sessions.find_by_session("brief") is not None
        for _ in range(300):  # a wait for the rounds (a second apart), not a measure of them
            if not list(rig.store.session_rows()):
                break
            await asyncio.sleep(0.1)
        assert list(rig.store.session_rows()) == []
        assert rig.bridge.sessions.find_by_session("brief") is None
