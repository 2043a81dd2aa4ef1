"""The store's disk use beyond the replay buffers (issue 30): the dedupe window's cost a key
and its bound, the records of sessions ended over the retention while the bridge runs, and
the channels' own state going with them."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest

from aep_bridge.store import DB_NAME, MIGRATIONS, Store, StoreState, schema
from aep_bridge.store.seen_key import seen_key
from tests.core.rig import Rig

STREAM = "embedded"


@pytest.fixture
def store(tmp_path: Path):
    opened = Store.open(tmp_path / "state")
    yield opened
    opened.close()


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


# -- the channels' own state -------------------------------------------------------------------


def _session_with_a_card(store: Store, id_: str, card: str) -> None:
    with store.transaction():
        store.add_session(id_, f"aep://laptop/agent/a/session/{id_}", id_, STREAM, "a", id_)
        store.add_request(card, id_, f"e-{card}", b"{}", "[]", "open", None)
    store.commit_group()


async def _write_channel_state(store: Store, session: str, card: str) -> None:
    """What the Telegram, Discord and Slack channels keep about a session and its card."""
    state = StoreState(store, "channel:tg")
    await state.set(f"thread:{session}-topic", session)
    await state.set(f"open:{session}", json.dumps([card]))
    await state.set(f"key:{session}:status", "4242")
    await state.set(f"header:{session}", json.dumps(["text", []]))
    await state.set(f"card:{card}", json.dumps({"session": session, "message": 4243}))
    await state.set(f"cardmsg:4243-{session}", card)
    await state.set(f"cardkey:#digest-{card}", card)
    await state.set(f"headsup:{card}", json.dumps({"message": 4244, "body": "b"}))


def _channel_keys(store: Store) -> set[str]:
    return {
        str(key)
        for (key,) in store.execute("SELECT key FROM kv WHERE namespace = ?", ("channel:tg",))
    }


async def test_a_channels_state_about_a_session_goes_with_its_records(store):
    """Card and message ids, thread ids, the open cards and a heads-up of a session ended
    over the retention go with its records; another session's stay, and so do the keys
    about no session (the live sessions, a topic's id)."""
    _session_with_a_card(store, "sOld", "cOld")
    _session_with_a_card(store, "sNew", "cNew")
    await _write_channel_state(store, "sOld", "cOld")
    await _write_channel_state(store, "sNew", "cNew")
    state = StoreState(store, "channel:tg")
    await state.set("sessions", json.dumps({"sOld": ["1", "old"], "sNew": ["2", "new"]}))
    await state.set("notifications_topic", "12")
    await state.set("open:sOld", json.dumps([]))  # written again: still the session's
    store.end_session("sOld")
    store.execute("UPDATE sessions SET updated = ? WHERE id = 'sOld'", (time.time() - 40 * DAY,))
    store.commit_group()
    before = _channel_keys(store)
    assert store.forget_ended_sessions(time.time() - 30 * DAY, 100) == ["sOld"]
    gone = before - _channel_keys(store)
    assert gone == {key for key in before if "sOld" in key or "cOld" in key}
    assert len(gone) == 8
    assert {"sessions", "notifications_topic", "open:sNew", "card:cNew"} <= _channel_keys(store)
    assert await state.get("sessions") is not None


def test_a_channels_state_from_before_is_told_its_sessions(tmp_path):
    """A store of schema 10, whose keys say nothing of their sessions: the migration tells
    them by the same rule, and they go with their sessions."""
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    conn = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    conn.create_function("aep_seen_key", 3, seen_key)  # migration 10's
    for script in MIGRATIONS[:10]:
        for statement in schema._statements(script):
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 10")
    conn.execute(
        "INSERT INTO sessions (id, source, session, stream, agent, name, state, created, "
        "updated) VALUES ('sOld', 'src', 'old', 'embedded', 'a', 'old', 'ended', 0, 0)"
    )
    conn.execute(
        "INSERT INTO requests (id, session_id, event_id, raw, options, status, updated) "
        "VALUES ('cOld', 'sOld', 'e1', x'7b7d', '[]', 'dismissed', 0)"
    )
    rows = [
        ("channel:tg", "thread:77", "sOld"),
        ("channel:tg", "card:cOld", "{}"),
        ("channel:tg", "cardmsg:78", "cOld"),
        ("channel:tg", "key:sOld:status", "79"),
        ("channel:tg", "sessions", "{}"),
        ("relay:claimants", "sOld", "[]"),  # not a channel's: left alone
    ]
    conn.executemany("INSERT INTO kv (namespace, key, value) VALUES (?, ?, ?)", rows)
    conn.close()
    with Store.open(state_dir) as store:
        assert store.schema_version == len(MIGRATIONS)
        assert store.forget_ended_sessions(time.time(), 100) == ["sOld"]
        left = store.execute("SELECT namespace, key FROM kv ORDER BY namespace, key")
        assert left == [("channel:tg", "sessions"), ("relay:claimants", "sOld")]


async def test_a_key_drawn_again_for_a_live_sessions_card_stays(store):
    """The console's short ids are drawn again once a card closes: `short:k3` named a card of
    the old session, now one of a live session. Forgetting the old session must not take
    the live card's short id (a person typing `k3` would be told the card is unknown);
    nor a key that once held a session's id and now holds none."""
    _session_with_a_card(store, "sOld", "cOld")
    _session_with_a_card(store, "sNew", "cNew")
    state = StoreState(store, "channel:console")
    await state.set("short:k3", "cOld")
    await state.set("short:k3", "cNew")  # drawn again for the live session's card
    await state.set("last", "sOld")
    await state.set("last", "nothing")  # a plugin's key that no longer names a session
    store.end_session("sOld")
    store.execute("UPDATE sessions SET updated = ? WHERE id = 'sOld'", (time.time() - 40 * DAY,))
    store.commit_group()
    assert store.forget_ended_sessions(time.time() - 30 * DAY, 100) == ["sOld"]
    assert await state.get("short:k3") == "cNew"
    assert await state.get("last") == "nothing"


async def test_a_plugins_keys_that_name_no_session_are_never_deleted(store):
    """A plugin's keys that hold no id of the core's exactly (its own names, a JSON value
    that mentions the session, a long value) stay through the retention of every session."""
    _session_with_a_card(store, "sOld", "cOld")
    state = StoreState(store, "channel:myplugin")
    kept = {
        "topic:general": "12345",
        "user:42": json.dumps({"last_session": "sOld", "card": "cOld"}),
        "prefs": "sOld" + "x" * 300,
        "sOldish": "cOld-copy",
        "a:b:sOld": "1",  # the id is not the part after the first `:`
    }
    for key, value in kept.items():
        await state.set(key, value)
    await state.set("msg:sOld", "99")  # and this one is the session's
    store.end_session("sOld")
    store.execute("UPDATE sessions SET updated = ? WHERE id = 'sOld'", (time.time() - 40 * DAY,))
    store.commit_group()
    assert store.forget_ended_sessions(time.time() - 30 * DAY, 100) == ["sOld"]
    assert dict(store.kv_items("channel:myplugin")) == kept
