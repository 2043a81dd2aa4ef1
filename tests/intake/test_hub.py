"""The relay core: replay, backpressure, persistence, without any transport in the way."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.intake.dedupe import KeyWindow
from aep_bridge.intake.hub import (
    Delivery,
    Frame,
    Hub,
    HubLimits,
    Participant,
    SubscribeError,
)
from aep_bridge.intake.source import LocalSource
from aep_bridge.store import Store

SOURCE = {"source": "aep://h/agent/a/session/s1", "agent": "a"}


def progress(seq: int, session: str = "s1", severity: str = "info", **extra) -> Event:
    return make_event(
        "progress.status",
        session=session,
        seq=seq,
        severity=severity,  # type: ignore[arg-type]
        data={"percent": seq % 100},
        **SOURCE,
        **extra,
    )


def consumer(hub: Hub) -> Participant:
    return hub.join(Participant("local", authenticated=True))


def test_a_slow_consumer_loses_only_debug_and_info():
    hub = Hub(HubLimits(queue_limit=3))
    subscription = hub.subscribe(consumer(hub), "slow")
    hub.admit([progress(i) for i in range(10)])
    assert len(subscription.queue) == 3
    assert subscription.dropped == 7
    assert not subscription.overflowed
    hub.admit([progress(10, severity="notice")])
    assert subscription.overflowed, "notice and above: deliver or disconnect, never drop"


async def test_an_overflowed_subscription_ends_after_what_it_holds():
    hub = Hub(HubLimits(queue_limit=2))
    subscription = hub.subscribe(consumer(hub), "slow")
    hub.admit([progress(0), progress(1), progress(2, severity="warning")])
    got = [await subscription.next(), await subscription.next(), await subscription.next()]
    assert [g.event.seq for g in got[:2] if isinstance(g, Delivery)] == [0, 1]
    assert got[2] is None
    assert subscription.delivered == {"s1": (0, 1)}  # what a `closing` frame reports


def test_replay_is_strictly_after_the_position_filtered_and_gated():
    hub = Hub()
    hub.admit([progress(i) for i in range(5)])
    request = make_event(
        "attention.requested",
        session="s1",
        seq=5,
        capture="redacted",
        data={"kind": "input", "prompt": "secret plan?"},
        **SOURCE,
    )
    hub.admit([request])
    replay = hub.subscribe(
        consumer(hub),
        "r",
        {"type": "attention.*"},
        from_=[{"session": "s1", "epoch": 0, "seq": 2}],
        capture="metadata",
    )
    [item] = replay.drain()
    assert isinstance(item, Delivery)
    assert item.event.data == {"kind": "input", "prompt": "a requests input"}
    tail = hub.subscribe(consumer(hub), "t", from_=[{"session": "s1", "epoch": 0, "seq": 3}])
    assert [i.event.seq for i in tail.drain() if isinstance(i, Delivery)] == [4, 5]


def test_duplicates_are_forwarded_live_but_buffered_once():
    hub = Hub()
    live = hub.subscribe(consumer(hub), "live")
    event = progress(0)
    hub.admit([event, event])
    assert len(live.drain()) == 2, "redelivery must be able to traverse the hop"
    assert len(hub.held("s1")) == 1


@pytest.mark.parametrize(
    ("from_", "code"),
    [
        ({}, "invalid-filter"),
        ([{"session": "s", "seq": -1}], "invalid-filter"),
        ([{"session": "s", "seq": 0}] * 300, "limit-exceeded"),
    ],
)
def test_bad_from_is_refused_with_the_closed_set_code(from_, code):
    hub = Hub()
    with pytest.raises(SubscribeError) as refused:
        hub.subscribe(consumer(hub), "x", from_=from_)
    assert refused.value.code == code


def test_the_buffer_survives_a_restart_and_still_says_what_it_lost(tmp_path: Path):
    store = Store.open(tmp_path)
    hub = Hub(HubLimits(replay_buffer=5), store)
    hub.admit([progress(i) for i in range(8)])
    hub.flush()
    store.close()

    again = Hub(HubLimits(replay_buffer=5), Store.open(tmp_path))
    assert [e.seq for e in again.held("s1")] == [3, 4, 5, 6, 7]
    replay = again.subscribe(consumer(again), "r", from_=[{"session": "s1", "epoch": 0, "seq": 0}])
    items = replay.drain()
    assert isinstance(items[0], Frame)
    assert items[0].body["earliest"] == {"epoch": 0, "seq": 3}
    assert [i.event.seq for i in items[1:] if isinstance(i, Delivery)] == [3, 4, 5, 6, 7]
    again.admit([progress(7)])  # a producer's retry after the restart: not buffered twice
    assert len(again.held("s1")) == 5


def test_a_restarted_store_keeps_each_buffer_to_its_size(tmp_path: Path):
    """What a buffer holds is counted again at a restart: what comes after it still evicts
    the oldest, whether the buffer was full or not (on disk, not only in what a replay reads)."""
    store = Store.open(tmp_path)
    hub = Hub(HubLimits(replay_buffer=5), store)
    hub.admit([progress(i) for i in range(3)])
    hub.admit([progress(i, session="s2") for i in range(7)])
    hub.flush()
    store.close()

    again = Hub(HubLimits(replay_buffer=5), Store.open(tmp_path))
    again.admit([progress(i) for i in range(3, 9)])
    again.admit([progress(i, session="s2") for i in range(7, 9)])
    again.flush()
    assert again.store is not None
    source = progress(0).source
    assert [seq for _, seq, _ in again.store.buffered(source, "s1", 100)] == [4, 5, 6, 7, 8]
    assert [seq for _, seq, _ in again.store.buffered(source, "s2", 100)] == [4, 5, 6, 7, 8]
    assert again.store.evicted(source, "s1") == (0, 3)


def _restarted_with(tmp_path: Path, sessions: int, events: int) -> Hub:
    """A hub started on a store that a previous run filled with `sessions` x `events`."""
    store = Store.open(tmp_path)
    hub = Hub(HubLimits(replay_buffer=events), store)
    for k in range(sessions):
        hub.admit([progress(i, session=f"s{k}") for i in range(events)])
    hub.flush()
    store.close()
    return Hub(HubLimits(replay_buffer=events), Store.open(tmp_path))


async def test_a_replay_of_everything_is_read_as_the_consumer_takes_it(tmp_path: Path):
    """A restarted bridge may hold a million events: subscribing must not parse them all into
    memory at once (it took 1.5 GB and 17 s for 500,000 before the first one came)."""
    hub = _restarted_with(tmp_path, sessions=20, events=1000)
    tracemalloc.start()
    try:
        replay = hub.subscribe(consumer(hub), "r", from_="all")
        first = await replay.next()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(first, Delivery)
    assert peak < 2 * 2**20, f"subscribing took {peak / 2**20:.1f} MB"
    got = [first, *replay.drain()]
    seqs: dict[str, list[int]] = {}
    for item in got:
        assert isinstance(item, Delivery)
        seqs.setdefault(str(item.event.session), []).append(int(item.event.seq or 0))
    assert seqs == {f"s{k}": list(range(1000)) for k in range(20)}


async def test_what_arrives_during_a_replay_comes_once_after_it(tmp_path: Path):
    hub = _restarted_with(tmp_path, sessions=3, events=10)
    replay = hub.subscribe(consumer(hub), "r", from_="all")
    taken = [await replay.next() for _ in range(5)]
    hub.admit([progress(i, session=f"s{k}") for k in range(3) for i in range(10, 13)])
    taken += replay.drain()
    order = [(i.event.session, i.event.seq) for i in taken if isinstance(i, Delivery)]
    assert sorted(order) == sorted({(f"s{k}", i) for k in range(3) for i in range(13)})
    assert {seq for _, seq in order[-9:]} == {10, 11, 12}, "live after the replay"


async def test_a_local_consumer_does_not_read_back_what_it_handled(tmp_path: Path):
    """`from_="all"` on the embedded source skips, unread, what the positions recorded
    under its name cover: a restarted bridge does not go through everything it showed."""
    hub = _restarted_with(tmp_path, sessions=2, events=10)
    assert hub.store is not None
    handled = progress(6, session="s0").position
    assert handled is not None
    hub.store.set_position("embedded", "s0", *handled)
    source = LocalSource(hub)
    got: list[tuple[str | None, int | None]] = []
    async with asyncio.timeout(5):
        async for event in source.events(from_="all"):
            got.append((event.session, event.seq))
            if len(got) == 13:
                break
    assert got == [("s0", i) for i in range(7, 10)] + [("s1", i) for i in range(10)]


async def test_a_local_consumer_that_keeps_up_is_never_outrun_by_bursts():
    """Emitters on the same loop admit bursts bigger than the queue limit between the
    consumer's turns; a consumer that drains what waits before it lets them run again loses
    nothing, however the bursts come (it used to let the loop run every 256 events, and lost
    two thirds of a benchmark's info events as a 'slow consumer')."""
    hub = Hub(HubLimits(queue_limit=1000))
    source = LocalSource(hub)
    got = 0

    async def consume() -> None:
        nonlocal got
        async for _ in source.events():
            got += 1

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)
    for burst in range(20):  # 600 a turn: more than a consumer taking 256 a turn can hold
        hub.admit([progress(burst * 600 + i, session=f"b{burst}") for i in range(600)])
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    await source.close()
    task.cancel()
    assert got == 12_000
    assert all(s.dropped == 0 for s in hub.subscriptions)


# -- the store holds the buffers, the hub the positions ----------------------------------------


def positioned(seq: int, session: str = "s1", source: str = "aep://h/agent/a/session/s1", **kw):
    return make_event(
        "progress.status",
        source=source,
        agent="a",
        session=session,
        seq=seq,
        data={"percent": seq % 100},
        **kw,
    )


def replays(hub: Hub, from_: object) -> list[object]:
    """What a subscribe with `from_` gets: frames' bodies, events' bytes."""
    got = hub.subscribe(consumer(hub), "r", from_=from_).drain()
    return [
        {k: v for k, v in i.body.items() if k != "sub"} if isinstance(i, Frame) else i.event.raw
        for i in got
    ]


def test_a_store_backed_hub_replays_exactly_what_one_in_memory_does(tmp_path: Path):
    """In order, out of order, the same position again, beyond what SQLite holds, a duplicate:
    the hub whose buffers are in the store answers every replay as the one holding them all."""
    other = "aep://h/agent/b/session/s1"
    seqs = [0, 1, 2, 3, 4, 5, 6, 2, 7, 7, 8, 9, 1 << 64, 10, 11]
    events = [positioned(q) for q in seqs]
    events += [positioned(q, source=other) for q in range(9)]
    events += [
        positioned(q, session="s2", source="aep://h/x", epoch=e) for e, q in [(0, 5), (1, 0)]
    ]
    events.insert(5, events[3])  # a redelivery
    stored = Hub(HubLimits(replay_buffer=4), Store.open(tmp_path))
    memory = Hub(HubLimits(replay_buffer=4))
    for i, event in enumerate(events):
        for hub in (stored, memory):
            hub.admit([event])
            if i % 3 == 0:
                hub.flush()
        for session in ("s1", "s2"):
            assert [e.raw for e in stored.held(session)] == [e.raw for e in memory.held(session)]
        for after in (0, 3, 8):
            from_ = [{"session": "s1", "seq": after}, {"session": "s2", "seq": after}]
            assert replays(stored, from_) == replays(memory, from_)
        assert replays(stored, "all") == replays(memory, "all")
    assert stored.stats == memory.stats


def test_an_ordered_session_keeps_no_buffer_in_memory_when_a_store_holds_it(tmp_path: Path):
    hub = Hub(HubLimits(replay_buffer=3), Store.open(tmp_path))
    hub.admit([positioned(i, session=f"s{k}") for k in range(50) for i in range(5)])
    hub.flush()
    assert all(isinstance(held, int) for held in hub._buffers.values())
    assert [e.seq for e in hub.held("s7")] == [2, 3, 4]
    hub.admit([positioned(1, session="s7")])  # out of order: memory decides from here
    assert [e.seq for e in hub.held("s7")] == [1, 3, 4]  # the latest three, in position order
    assert sum(not isinstance(held, int) for held in hub._buffers.values()) == 1


def test_a_forgotten_session_leaves_nothing_in_the_store(tmp_path: Path):
    store = Store.open(tmp_path)
    hub = Hub(HubLimits(max_buffered_sessions=2), store)
    hub.admit([positioned(0, session="a"), positioned(0, session="b"), positioned(0, session="c")])
    hub.admit([positioned(1, session="a")])  # "a" again, as a new buffer
    hub.flush()
    assert [e.seq for e in hub.held("a")] == [1], "the forgotten event must not come back"
    store.close()
    again = Hub(HubLimits(max_buffered_sessions=2), Store.open(tmp_path))
    assert [e.seq for e in again.held("a")] == [1]
    assert [e.seq for e in again.held("c")] == [0]
    assert again.held("b") == []


def test_a_failed_flush_keeps_the_events_for_the_next(tmp_path: Path, monkeypatch):
    store = Store.open(tmp_path)
    hub = Hub(HubLimits(), store)
    hub.admit([positioned(i) for i in range(3)])
    real = store.buffer_events

    def failing(events, keep, **limits):
        raise OSError("disk full")

    monkeypatch.setattr(store, "buffer_events", failing)
    with pytest.raises(OSError, match="disk full"):
        hub.flush()
    monkeypatch.setattr(store, "buffer_events", real)
    assert [e.seq for e in hub.held("s1")] == [0, 1, 2]


def test_the_dedupe_window_forgets_the_oldest_key_first():
    hub = Hub(HubLimits(dedupe_window=3))
    events = [positioned(i, session=f"s{i}") for i in range(4)]
    hub.admit(events)
    hub.admit([events[3], events[2], events[1]])
    assert hub.stats == {"admitted": 4, "duplicates": 3}
    hub.admit([events[0]])  # out of the window: new again
    assert hub.stats == {"admitted": 5, "duplicates": 3}
    assert len(hub._admitted) == 3
    assert events[0].dedupe_key in hub._admitted
    assert events[1].dedupe_key not in hub._admitted


def test_the_dedupe_window_holds_many_keys_exactly():
    window = KeyWindow(5_000)
    keys = [(f"aep://h/{i % 7}", f"id-{i}") for i in range(20_000)]
    assert all(window.add(k) for k in keys)
    assert len(window) == 5_000
    assert not any(window.add(k) for k in keys[-5_000:])
    assert all(k not in window for k in keys[:-5_000])
    assert all(window.add(k) for k in keys[:100])
    assert len(window) == 5_000


def test_delivered_positions_beyond_64_bits_are_reported_as_they_were():
    hub = Hub()
    subscription = hub.subscribe(consumer(hub), "live")
    hub.admit([positioned(1 << 70), positioned(5, session="s2", epoch=3)])
    subscription.drain()
    assert subscription.delivered == {"s1": (0, 1 << 70), "s2": (3, 5)}
