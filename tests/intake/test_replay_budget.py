"""The replay buffers' disk budget: a byte budget for all of them, a retention for ended
sessions' buffers, oldest first, and what a consumer resuming from a trimmed position gets.

A real hub on a real store (SQLite in a temporary directory); time is the hub's injected
clock, never a sleep.
"""

from __future__ import annotations

from pathlib import Path

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.intake.hub import Delivery, Frame, Hub, HubLimits, Participant
from aep_bridge.store import Store

PAD = "x" * 900  # an event of about a kilobyte


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def event(session: str, seq: int, type_: str = "progress.status", **data: object) -> Event:
    payload = {"percent": seq % 100, "message": PAD} if type_ == "progress.status" else data
    return make_event(
        type_,
        source=f"aep://h/agent/a/session/{session}",
        agent="a",
        session=session,
        seq=seq,
        data=payload,
    )


def session_events(session: str, count: int, *, ended: bool = True) -> list[Event]:
    """A short session: started, `count` progress events, ended (unless not)."""
    events = [event(session, 0, "session.started")]
    events += [event(session, i) for i in range(1, count + 1)]
    if ended:
        events.append(event(session, count + 1, "session.ended", reason="normal"))
    return events


def held_bytes(store: Store) -> int:
    """What the replay buffers hold on disk, summed from the table itself."""
    return int(store.execute("SELECT total(length(raw)) FROM relay_buffer")[0][0])  # type: ignore[arg-type]


def consumer(hub: Hub) -> Participant:
    return hub.join(Participant("ws", authenticated=True))


def resume(hub: Hub, session: str, seq: int) -> list[object]:
    """What a consumer resuming `session` after `seq` gets: frames' bodies, events' seqs."""
    got = hub.subscribe(
        consumer(hub), "r", from_=[{"session": session, "epoch": 0, "seq": seq}]
    ).drain()
    return [
        {k: v for k, v in item.body.items() if k != "sub"}
        if isinstance(item, Frame)
        else item.event.seq
        for item in got
        if isinstance(item, (Frame, Delivery))
    ]


def test_a_store_fed_past_its_budget_stays_within_it(tmp_path: Path):
    """600 short sessions of some 22 KB each (13 MB) through a 256 KB budget: after every
    flush the buffers hold no more than the budget plus that flush's batch, the running
    total is what the table holds, and the newest sessions are still there to replay."""
    budget = 256 * 1024
    store = Store.open(tmp_path)
    clock = Clock()
    hub = Hub(HubLimits(replay_bytes=budget), store, clock=clock)
    for k in range(600):
        batch = session_events(f"s{k}", 20)
        hub.admit(batch)
        hub.flush()
        clock.now += 1
        held = held_bytes(store)
        assert held <= budget + sum(len(e.raw) for e in batch), f"after session {k}: {held}"
        assert store.replay_bytes() == held
    assert [e.seq for e in hub.held("s599")] == list(range(22))
    assert hub.held("s0") == []
    store.close()
    again = Store.open(tmp_path)  # the running total is taken up again after a restart
    assert again.replay_bytes() == held_bytes(again) == held


def test_ended_sessions_go_before_live_ones_and_live_ones_lose_their_oldest_first(tmp_path):
    """Over the budget, every ended session's buffer goes (the earliest ended first) before
    any live session loses an event, even a live session quieter than all of them; then
    the least recently active live session goes, oldest events first, before the newest."""
    quiet = session_events("quiet", 20, ended=False)  # live, and the least recently active
    done = [session_events(f"done{k}", 10) for k in range(3)]
    size = lambda events: sum(len(e.raw) for e in events)  # noqa: E731
    budget = size(quiet) + sum(size(d) for d in done) + 4096
    store = Store.open(tmp_path)
    clock = Clock()
    hub = Hub(HubLimits(replay_bytes=budget), store, clock=clock)
    for events in (quiet, *done):
        hub.admit(events)
        hub.flush()
        clock.now += 10
    assert all(hub.held(f"done{k}") for k in range(3)), "trimmed within the budget"
    busy = [event("busy", i) for i in range(20)]  # past the budget, by less than `done`
    assert budget < store.replay_bytes() + size(busy) <= budget + sum(size(d) for d in done)
    hub.admit(busy)
    hub.flush()
    assert [e.seq for e in hub.held("quiet")] == list(range(21)), "a live session lost events"
    assert all(hub.held(f"done{k}") == [] for k in range(3)), "an ended session was kept"
    assert [e.seq for e in hub.held("busy")] == list(range(20))
    clock.now += 10
    hub.admit([event("busy", i) for i in range(20, 50)])  # no ended session left to drop
    hub.flush()
    assert hub.held("quiet") == [], "the least recently active live session goes first"
    kept = [e.seq for e in hub.held("busy")]
    assert kept[0] > 0, "the oldest events go first"
    assert kept == list(range(kept[0], 50)), "the newest stay"
    assert held_bytes(store) <= budget


def test_ended_sessions_buffers_go_after_the_retention(tmp_path: Path):
    """An ended session's buffer is kept `replay_retention` seconds after its
    session.ended, then dropped at the next flush; a live one is kept; a restart after the
    retention has passed finds it gone too."""
    store = Store.open(tmp_path)
    clock = Clock()
    limits = HubLimits(replay_retention=600)
    hub = Hub(limits, store, clock=clock)
    hub.admit(session_events("ended", 5))
    hub.admit(session_events("alive", 5, ended=False))
    hub.admit(session_events("later", 5, ended=False))
    hub.flush()
    clock.now += 300
    hub.admit([event("later", 6, "session.ended", reason="normal")])  # ends 300 s later
    hub.flush()
    clock.now += 299
    hub.flush()
    assert len(hub.held("ended")) == 7, "dropped before its retention"
    clock.now += 2
    hub.flush()  # what a quiet bridge's once-a-minute flush does
    assert hub.held("ended") == []
    assert store.execute("SELECT count(*) FROM relay_buffer WHERE session = 'ended'") == [(0,)]
    assert len(hub.held("alive")) == 6
    assert len(hub.held("later")) == 7
    assert store.replay_bytes() == held_bytes(store)
    store.close()
    clock.now += 300
    restarted = Hub(limits, Store.open(tmp_path), clock=clock)
    assert restarted.held("later") == []
    assert len(restarted.held("alive")) == 6


def test_a_resume_from_a_trimmed_position_says_replay_exhausted_and_sends_what_is_held(
    tmp_path: Path,
):
    """AEP-0003 §5: a resume position the budget trimmed away gets `replay-exhausted` with
    the earliest position still held, then every held event after it; a session trimmed
    whole (an ended one) is absent, as one the session cap forgot: no frame (there is no
    earliest position to name), nothing replayed, and live delivery goes on."""
    store = Store.open(tmp_path)
    clock = Clock()
    hub = Hub(HubLimits(replay_bytes=40 * 1024), store, clock=clock)
    hub.admit(session_events("gone", 5))
    hub.flush()
    clock.now += 1
    hub.admit([event("live", i) for i in range(60)])  # some 60 KB: trims its own oldest too
    hub.flush()
    held = [e.seq for e in hub.held("live")]
    assert held[0] > 3, "the budget trimmed the position the consumer resumes from"
    assert held[-1] == 59
    got = resume(hub, "live", 3)
    assert got[0] == {
        "type": "replay-exhausted",
        "session": "live",
        "earliest": {"epoch": 0, "seq": held[0]},
    }
    assert got[1:] == held
    assert resume(hub, "live", held[0]) == held[1:], "a held position resumes exactly"
    subscription = hub.subscribe(
        consumer(hub), "g", from_=[{"session": "gone", "epoch": 0, "seq": 2}]
    )
    assert subscription.drain() == []
    hub.admit([event("gone", 9)])
    live = subscription.drain()
    assert [i.event.seq for i in live if isinstance(i, Delivery)] == [9]


def test_status_figures_follow_the_buffers(tmp_path: Path):
    """`replay_usage` (what `aep-bridge status` shows) is the table's own sum and count."""
    store = Store.open(tmp_path)
    hub = Hub(HubLimits(), store, clock=Clock())
    hub.admit(session_events("a", 3) + session_events("b", 4, ended=False))
    hub.flush()
    assert store.replay_usage() == (held_bytes(store), 2)
    store.drop_buffer("aep://h/agent/a/session/a", "a")
    assert store.replay_usage() == (held_bytes(store), 1)
