"""Order per thread around a card (issue 32): a card comes after everything its session did
before it, and still ahead of every other session's chatter; across a restart too, and
never while an earlier message of its thread is still in flight.

On Telegram's limits in one forum group (every session counts against one chat and one
group), on simulated time (`VirtualTime`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aep_bridge.store import Store
from tests.core.doubles import VirtualTime
from tests.core.test_outbox import (
    HANG,
    Recorder,
    _until,
    card,
    drain,
    message,
    outbox_for,
    store,
    vt,
)

__all__ = ["store", "vt"]  # the fixtures


async def test_a_burst_s_messages_reach_the_platform_before_its_card_and_others_after(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    for n in range(3):  # another session's chatter, submitted first
        outbox.submit(message("other", f"other {n}"))
    burst = ["session started", "Reading the tests", "tool: Bash pytest", "Tests fail; fixing"]
    for text in burst:
        outbox.submit(message("s", text))
    outbox.submit(card("s", "Run make test?"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()

    # the person reads what led to the question above it, in one message (one call), then
    # the question; the other session's chatter (earlier, but less urgent) goes after it
    assert adapter.texts() == [
        "\n\n".join(burst),
        "Run make test?",
        "other 0",
        "other 1",
        "other 2",
    ]
    assert outbox.stats["sent"] == 5


async def test_unlike_messages_stay_apart_and_a_keyed_one_can_still_be_edited(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    outbox.submit(message("s", "Reading the tests", type="thought"))
    outbox.submit(message("s", "pytest: running", key="tool-1"))
    outbox.submit(message("s", "Found it."))
    outbox.submit(message("s", "Fixing the fixture."))
    outbox.submit(card("s", "Run make test?"))
    outbox.submit(message("s", "pytest: passed", key="tool-1"))  # the tool call, edited later
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == [
        "Reading the tests",  # a thought looks unlike a reply on every channel: kept apart
        "pytest: passed",  # keyed, not merged: its later edit found it (the latest text wins)
        "Found it.\n\nFixing the fixture.",
        "Run make test?",
    ]
    shown = [stored.text for stored in adapter.messages]  # the platform: edits in place
    assert "pytest: passed" in shown
    assert "pytest: running" not in shown


async def test_a_merge_too_long_for_one_message_is_not_made(vt: VirtualTime, store: Store) -> None:
    adapter = Recorder(vt, forum=True, max_length=120)
    outbox = outbox_for(adapter, store)
    lines = [f"line {n} " + "x" * 40 for n in range(4)]
    for text in lines:
        outbox.submit(message("s", text))
    outbox.submit(card("s", "Run make test?"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == ["\n\n".join(lines[:2]), "\n\n".join(lines[2:]), "Run make test?"]
    assert all(len(text) <= 120 for text in adapter.texts())


async def test_a_burst_merged_before_a_restart_comes_back_in_its_place(
    vt: VirtualTime, store: Store
) -> None:
    first = Recorder(vt, forum=True)
    before = outbox_for(first, store)  # never started: everything waits in the table
    before.submit(message("other", "other chatter"))
    for n in range(4):
        before.submit(message("s", f"step {n}"))
    before.submit(card("s", "Run make test?"))
    del before

    second = Recorder(vt, forum=True)
    restarted = outbox_for(second, store)
    await restarted.start()
    await drain(restarted)
    await restarted.stop()
    assert second.texts() == [
        "\n\n".join(f"step {n}" for n in range(4)),
        "Run make test?",
        "other chatter",
    ]


async def test_a_restart_mid_burst_keeps_the_card_below_its_messages(
    vt: VirtualTime, store: Store
) -> None:
    first = Recorder(vt, forum=True)
    outbox = outbox_for(first, store)
    outbox.submit(message("other", "other chatter"))
    burst = [f"step {n}" for n in range(4)]
    for n, text in enumerate(burst):  # a thought, a reply, ...: not merged
        outbox.submit(message("s", text, type="thought" if n % 2 else "text"))
    outbox.submit(card("s", "Run make test?"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: len(first.calls) == 2), HANG)  # one a second
    await outbox.stop(flush_timeout=0)  # the rest waits in the table

    second = Recorder(vt, forum=True)
    restarted = outbox_for(second, store)
    await restarted.start()
    await drain(restarted)
    await restarted.stop()

    shown = [c.text for c in first.calls + second.calls]
    assert shown == [*burst, "Run make test?", "other chatter"]


async def test_a_card_waits_for_its_thread_s_message_in_flight(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, forum=True)
    release = asyncio.Event()
    adapter.block = lambda call: release.wait() if call.text == "slow upload" else None
    outbox = outbox_for(adapter, store)
    outbox.submit(message("s", "slow upload"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: bool(adapter.attempts)), HANG)
    outbox.submit(card("s", "Run make test?"))  # while "slow upload" is in flight
    await vt.sleep(60.0)  # a minute of slots, free for a card
    assert [c.text for c in adapter.attempts] == ["slow upload"]
    release.set()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == ["slow upload", "Run make test?"]


async def test_another_session_s_card_still_overtakes_chatter(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    for n in range(3):
        outbox.submit(message("a", f"a chatter {n}"))
    outbox.submit(card("b", "b asks"))  # b's thread has nothing before its card
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == ["b asks", "a chatter 0", "a chatter 1", "a chatter 2"]


async def test_messages_a_channel_gives_a_meaning_of_their_own_are_never_merged(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    for text in ("1,204 tokens in", "2,410 tokens in"):  # the web page keeps the last usage
        outbox.submit(message("s", text, type="usage"))
    for text in ("run failed", "budget exceeded"):
        outbox.submit(message("s", text, type="error", notify=True))
    outbox.submit(card("s", "Run make test?"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == [
        "1,204 tokens in",
        "2,410 tokens in",
        "run failed",
        "budget exceeded",
        "Run make test?",
    ]


async def test_a_card_s_update_waits_for_the_card_it_edits(vt: VirtualTime, store: Store) -> None:
    """A question answered while its card is still on its way: the update (an edit of the
    card's message) goes after the card, never before it, where it would edit nothing and
    leave the card's buttons up."""
    from aep_bridge.contract.types import OutcomeStatus, PermissionOutcome
    from aep_bridge.outbox import Job

    adapter = Recorder(vt, forum=True)
    release = asyncio.Event()
    adapter.block = lambda call: release.wait() if call.text == "Run make test?" else None
    outbox = outbox_for(adapter, store)
    question = card("s", "Run make test?")
    outbox.submit(question)
    await outbox.start()
    await asyncio.wait_for(_until(lambda: bool(adapter.attempts)), HANG)
    from aep_bridge.outbox.jobs import arguments

    request = arguments(question)[1]
    answered = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Yes")
    outbox.submit(Job.permission_update("s", request, answered))  # while the card is in flight
    await vt.sleep(60.0)
    release.set()
    await drain(outbox)
    await outbox.stop()
    shown = [m for m in adapter.messages if m.text.startswith("Run make test?")]
    assert len(shown) == 1
    assert "Answered" in shown[0].text  # the edit found the card
    assert shown[0].buttons == []


async def test_a_card_whose_question_closed_unsent_stays_where_it_was_asked(
    vt: VirtualTime, store: Store
) -> None:
    """A card still queued when its question closes is no longer urgent (`demote`): it goes
    at thread rank, but in its place, above what its session said after it."""
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    outbox.submit(message("s", "before"))
    question = card("s", "Run make test?")
    outbox.submit(question)
    for n in range(3):
        outbox.submit(message("s", f"after {n}"))
    from aep_bridge.outbox import card_key
    from aep_bridge.outbox.jobs import Priority, arguments

    request = arguments(question)[1]
    closed = type(question).permission("s", request, priority=Priority.FINAL)
    assert outbox.demote("s", card_key(request.id), closed)
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    mine = adapter.texts("s")
    assert mine == ["before", "Run make test?", "after 0", "after 1", "after 2"]


async def test_an_answer_s_update_does_not_wait_behind_another_session_s_story(
    vt: VirtualTime, store: Store
) -> None:
    """Session a asks with ten messages queued ahead of its card (lifted to its rank); b's
    card, already shown, is answered: its update (one edit) is not ranked as a card asked
    after a's, which would hold it behind all eleven of a's calls."""
    from aep_bridge.contract.types import OutcomeStatus, PermissionOutcome
    from aep_bridge.outbox import Job
    from aep_bridge.outbox.jobs import arguments

    adapter = Recorder(vt, forum=True)
    edit = adapter.update_permission_request

    async def recorded(session_id: str, request: Any, outcome: Any) -> None:
        await adapter._record("update_permission_request", session_id, request.title)
        await edit(session_id, request, outcome)

    adapter.update_permission_request = recorded  # type: ignore[method-assign]
    outbox = outbox_for(adapter, store)
    asked = card("b", "b asks")
    outbox.submit(asked)
    await outbox.start()
    await asyncio.wait_for(_until(lambda: "b asks" in adapter.texts()), HANG)
    for n in range(10):
        outbox.submit(message("a", f"a says {n}", key=f"line-{n}"))  # keyed: not merged
    outbox.submit(card("a", "a asks"))
    answered = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Yes")
    outbox.submit(Job.permission_update("b", arguments(asked)[1], answered))
    await drain(outbox)
    await outbox.stop()
    order = [c.op for c in adapter.calls]
    assert "update_permission_request" in order[:4], [(c.op, c.text) for c in adapter.calls]


async def test_a_thread_whose_backlog_goes_in_one_post_still_takes_its_turn(
    vt: VirtualTime, store: Store
) -> None:
    """Sessions that share a chat take its slots in turn. A thread whose whole backlog goes
    in one merged post empties its lane at each call; made again at its next message, the
    lane must wait behind the threads that waited longer. (Its turn was 0, as if it had
    never sent, and on Slack's flood one thread took 43 of 46 posts.)"""
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store, merge_waiting=True)
    await outbox.start()
    for second in range(40):
        outbox.submit(message("merges", f"merges {second}"))  # alike: one post takes them
        for other in ("a", "b"):  # unlike in a row: a post each, a backlog that grows
            kind = "thought" if second % 2 else "text"
            outbox.submit(message(other, f"{other} {second}", type=kind))
        await vt.sleep(1.0)
    sends = [c.session for c in adapter.calls if vt.now - 40 <= c.at]
    counts = {session: sends.count(session) for session in ("merges", "a", "b")}
    assert max(counts.values()) - min(counts.values()) <= 2, counts
    await outbox.stop(0)
