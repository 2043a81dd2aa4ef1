"""The relay core: replay, backpressure, persistence, without any transport in the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.intake.hub import Delivery, Frame, Hub, HubLimits, Participant, SubscribeError
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
