"""The session registry: lookups, thread bindings, and the same answers after a restart."""

from __future__ import annotations

from pathlib import Path

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.loop.sessions import Sessions, ThreadRecord
from aep_bridge.store import Store


def started(session: str, source: str, agent: str = "codex") -> Event:
    return make_event(
        "session.started",
        source=source,
        agent=agent,
        session=session,
        seq=0,
        data={"label": "fix it", "cwd": "/w"},
    )


def views(sessions: Sessions) -> dict[str, object]:
    """Everything the registry answers, for comparing two of them."""
    ids = sorted(r.id for r in sessions._by_id.values())
    return {
        "records": [sessions.get(i) for i in ids],
        "channels": {i: sorted(sessions.channels(i)) for i in ids},  # a reload: in key order
        "threads": {(i, c): sessions.thread(i, c) for i in ids for c in ("alpha", "beta", "gamma")},
        "creating": sorted(sessions.threads("creating"), key=repr),
        "open": sorted(sessions.threads("open"), key=repr),
        "closed": sorted(sessions.threads("closed"), key=repr),
    }


def test_sessions_threads_and_lookups_survive_a_restart(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    sessions = Sessions(store)
    one, created = sessions.get_or_create(started("s1", "aep://h/a"), "embedded", "s1")
    assert created
    assert sessions.get_or_create(started("s1", "aep://h/a"), "embedded", "s1") == (one, False)
    two, _ = sessions.get_or_create(started("s1", "aep://h/b"), "embedded", "s1")
    three, _ = sessions.get_or_create(started("s3", "aep://h/a", "claude-code"), "relay", "s3")
    assert len(sessions) == 3
    assert sessions.find("aep://h/a", "s1") == one
    assert sessions.find("aep://h/b", "s1") == two
    assert sessions.find("aep://h/c", "s1") is None
    assert sessions.find("aep://h/a", "nope") is None
    assert sessions.find_by_session("s1") is None, "two sources use the name"
    assert sessions.find_by_session("s3") == three
    assert (three.stream, three.agent, three.state) == ("relay", "claude-code", "open")

    for record in (one, two, three):
        sessions.begin_thread(record.id, "beta", "fix it")
        sessions.begin_thread(record.id, "alpha", "fix it")
    sessions.begin_thread(one.id, "beta", "another name")  # decided once
    assert sessions.channels(one.id) == ["beta", "alpha"], "in routing order"
    assert sessions.thread(one.id, "beta") == ThreadRecord(
        one.id, "beta", None, "creating", "fix it"
    )
    sessions.bind_thread(one.id, "beta", "t-1")
    sessions.bind_thread(two.id, "alpha", "t-2")
    assert sessions.thread_id("beta", one.id) == "t-1"
    assert sessions.thread_id("gamma", one.id) is None
    assert sessions.session_of_thread("beta", "t-1") == one.id
    assert sessions.session_of_thread("alpha", "t-1") is None
    assert sessions.name_thread(one.id, "beta", "renamed")
    assert not sessions.name_thread(one.id, "beta", "renamed")
    assert not sessions.name_thread(one.id, "gamma", "renamed")
    sessions.rename(two.id, "two")
    sessions.end(one.id)
    sessions.close_thread(one.id, "beta")
    sessions.close_thread(one.id, "alpha")  # still being created: stays so
    assert sessions.thread(one.id, "beta") == ThreadRecord(
        one.id, "beta", "t-1", "closed", "renamed"
    )
    assert sessions.get(one.id).state == "ended"  # type: ignore[union-attr]
    assert sessions.find("aep://h/b", "s1").name == "two"  # type: ignore[union-attr]
    assert sessions.channels(one.id) == ["beta", "alpha"]
    assert len(sessions.threads("creating")) == 4
    assert sessions.threads("open") == [ThreadRecord(two.id, "alpha", "t-2", "open", "fix it")]
    sessions.begin_thread(three.id, "gamma", "fix it", "C0TEAMB")  # a route placed it
    assert sessions.place("gamma", three.id) == "C0TEAMB"
    assert sessions.place("beta", three.id) is None  # the channel's own place

    again = Sessions(store)
    assert again.place("gamma", three.id) == "C0TEAMB"
    assert views(again) == views(sessions)
    assert again.find("aep://h/b", "s1") == sessions.find("aep://h/b", "s1")
    assert again.find_by_session("s1") is None
    assert again.find_by_session("s3") == three
    assert again.session_of_thread("beta", "t-1") == one.id
    assert again.get_or_create(started("s1", "aep://h/a"), "embedded", "s1") == (
        sessions.get(one.id),
        False,
    )


def test_a_session_another_registry_created_first_is_found_not_made_twice(tmp_path: Path) -> None:
    store = Store.open(tmp_path)
    first, second = Sessions(store), Sessions(store)
    made, created = first.get_or_create(started("s1", "aep://h/a"), "embedded", "s1")
    found, again = second.get_or_create(started("s1", "aep://h/a"), "embedded", "s1")
    assert created
    assert not again
    assert found == made
