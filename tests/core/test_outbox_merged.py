"""Keyed messages merge too (issue 34, item 6): a busy agent's thread is mostly keyed replies
(a run's footer joins them later by an edit), and a card comes after everything its session
said before it (issue 32). Where keyed messages never merged, a card behind thirty short
replies waited thirty slots (Slack's flood: the card never went out). Now the keyed first
posts merge into one message under a key of its own, and a later edit of one of them draws
that message again.

On Telegram's limits in one forum group (one post a second), on simulated time, through the
real `Outbox` and a SQLite store, as test_outbox_context.py.
"""

from __future__ import annotations

import pytest

from aep_bridge.contract.types import OutgoingMessage
from aep_bridge.outbox import Job, Outbox, merged
from aep_bridge.store import Store
from tests.core.doubles import VirtualTime
from tests.core.test_outbox import Recorder, drain, message, outbox_for, rows, store, vt
from tests.core.test_outbox_context import carrying, request, shown

__all__ = ["store", "vt"]  # the fixtures


def reply(session: str, number: int, text: str = "") -> Job:
    """A keyed reply, as the renderer keys one a footer may join."""
    return message(session, f"[r{number}] {text or 'checking the rounding'}", key=f"reply:{number}")


def started(adapter: Recorder, store: Store) -> Outbox:
    return outbox_for(adapter, store, merge_waiting=True)


async def first_post(outbox: Outbox, session: str = "s") -> None:
    """The thread's first post, sent: its slot is taken, and what follows waits for the
    next (one post a second)."""
    outbox.submit(message(session, "first"))
    await drain(outbox)


async def a_backlog_and_a_card(adapter: Recorder, store: Store) -> Outbox:
    """An outbox whose thread has posted (its slot taken), then thirty replies and a card."""
    outbox = started(adapter, store)
    await outbox.start()
    await first_post(outbox)
    thirty_replies_and_a_card(outbox)
    return outbox


def thirty_replies_and_a_card(outbox: Outbox) -> None:
    """A busy agent's backlog, then its question: the card carries what fits in its message,
    the rest merges ahead of it."""
    for number in range(30):
        outbox.submit(reply("s", number))
    outbox.submit(Job.permission("s", request()))


def edited_before_it_went(adapter: Recorder) -> None:
    """The first reply's edit reached its merged message while it waited: the message went
    with it, once, and nothing was edited after the card."""
    texts = [c.text for c in adapter.calls]
    assert texts[1].startswith("[r0] done\n\n[r1] checking the rounding"), texts
    assert not any("[r0] checking" in text for text in texts)
    assert len(texts) == 4  # the first post, two merged, the card


async def test_a_card_behind_thirty_keyed_replies_goes_in_a_few_slots(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt, max_length=500)
    outbox = started(adapter, store)
    await outbox.start()
    outbox.submit(message("s", "the session starts"))  # its slot is taken now
    thirty_replies_and_a_card(outbox)
    await drain(outbox)
    await outbox.stop()

    ops = [c.op for c in adapter.calls]
    # the first post, two merged posts of replies (a quarter of the limit left free in
    # each), then the card with the last of them above its question: four slots, not 31
    assert ops.index("send_permission_request") <= 3, ops
    text = "\n".join(shown(adapter))
    assert [text.count(f"[r{n}] ") for n in range(30)] == [1] * 30  # each once, in order
    places = [text.index(f"[r{n}] ") for n in range(30)]
    assert places == sorted(places)
    assert max(len(t) for t in shown(adapter)[1:-1]) <= 500 - 500 // 4
    assert rows(store) == 0


async def test_a_later_edit_of_a_merged_reply_edits_the_merged_message(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt)
    outbox = started(adapter, store)
    await outbox.start()
    await first_post(outbox)
    for number in range(3):
        outbox.submit(reply("s", number))
    await drain(outbox)
    assert shown(adapter) == [
        "first",
        "[r0] checking the rounding\n\n[r1] checking the rounding\n\n[r2] checking the rounding",
    ]

    # the run ends: its footer joins the second reply, then the third's
    outbox.submit(reply("s", 1, "fixed it\n\n_3 s_"))
    await drain(outbox)
    outbox.submit(reply("s", 2, "all green\n\n_5 s_"))
    await drain(outbox)
    await outbox.stop()

    # edited in place, each part as last drawn, nothing posted twice
    assert shown(adapter) == [
        "first",
        "[r0] checking the rounding\n\n[r1] fixed it\n\n_3 s_\n\n[r2] all green\n\n_5 s_",
    ]
    assert [c.op for c in adapter.calls].count("send_message") == 4


async def test_an_edit_while_the_merged_message_waits_takes_its_place(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt, max_length=500)
    outbox = await a_backlog_and_a_card(adapter, store)
    outbox.submit(reply("s", 0, "done"))  # their merged message has not gone yet
    await drain(outbox)
    await outbox.stop()
    edited_before_it_went(adapter)


async def test_a_part_that_outgrows_the_message_is_cut_and_the_others_stay(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt, max_length=200)
    outbox = started(adapter, store)
    await outbox.start()
    await first_post(outbox)
    for number in range(3):
        outbox.submit(reply("s", number))
    await drain(outbox)
    outbox.submit(reply("s", 0, "word " * 80))
    await drain(outbox)
    await outbox.stop()
    [post] = [t for t in shown(adapter) if "[r0]" in t]
    assert len(post) <= 200
    assert "[r1] checking the rounding" in post
    assert "[r2] checking the rounding" in post
    first_part = post.split("\n\n[r1]")[0]
    assert first_part.startswith("[r0] word word")
    assert first_part.endswith("…")


async def test_a_restart_finds_the_merged_message_of_an_edited_part(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt)
    outbox = started(adapter, store)
    await outbox.start()
    await first_post(outbox)
    outbox.submit(reply("s", 0))
    outbox.submit(reply("s", 1))
    await drain(outbox)
    await outbox.stop()
    store.commit_group()

    again = started(adapter, store)
    await again.start()
    again.submit(reply("s", 0, "done"))
    await drain(again)
    await again.stop()
    assert shown(adapter) == ["first", "[r0] done\n\n[r1] checking the rounding"]


async def test_the_threads_header_and_a_channel_without_card_context_never_merge_keys(
    vt: VirtualTime, store: Store
) -> None:
    plain = Recorder(vt, forum=True)  # no card_context: it cannot find a part again
    outbox = started(plain, store)
    await outbox.start()
    await first_post(outbox)
    for number in range(3):
        outbox.submit(reply("s", number))
    await drain(outbox)
    await outbox.stop()
    assert len(shown(plain)) == 4

    adapter = carrying(VirtualTime())
    outbox = started(adapter, store)
    await outbox.start()
    outbox.submit(message("h", "first"))
    header = OutgoingMessage(type="text", text="Session: h", key="session:h")
    outbox.submit(Job.message("h", header))
    outbox.submit(reply("h", 0))
    await drain(outbox)
    await outbox.stop()
    assert shown(adapter) == ["first", "Session: h", "[r0] checking the rounding"]


async def test_a_restart_with_the_merged_message_still_queued_sends_it_once(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt, max_length=500)
    outbox = await a_backlog_and_a_card(adapter, store)
    await outbox.stop(0)  # before their slot
    store.commit_group()

    again = started(adapter, store)
    await again.start()
    again.submit(reply("s", 0, "done"))  # its merged message waits: the edit takes its place
    await drain(again)
    await again.stop()
    edited_before_it_went(adapter)


async def test_a_session_keeps_its_last_merged_messages_only(
    vt: VirtualTime, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded: past `PER_SESSION` merged messages a session's oldest is forgotten, in the
    store too (the renderer edits only a thread's last keys)."""
    monkeypatch.setattr(merged, "PER_SESSION", 3)
    adapter = carrying(vt)
    outbox = started(adapter, store)
    await outbox.start()
    for number in range(0, 12, 2):  # six merged messages of two replies each
        outbox.submit(message("s", f"step {number}"))
        await drain(outbox)
        outbox.submit(reply("s", number))
        outbox.submit(reply("s", number + 1))
        await drain(outbox)
    await outbox.stop()
    names = [n for n, _ in store.kv_items("outbox:rec") if n.startswith("merged:")]
    assert names == [
        "merged:s:merged:reply:10",
        "merged:s:merged:reply:6",
        "merged:s:merged:reply:8",
    ]


async def test_replies_with_their_tool_calls_under_them_merge_and_keep_their_structure(
    vt: VirtualTime, store: Store
) -> None:
    """A reply the calls it announced joined carries them in its metadata (`tools`): two
    such replies differ only there, and still merge (a realistic session's replies each
    have calls of their own: none merged, and a card waited 55 calls on Discord)."""
    adapter = carrying(vt)
    sent: list[OutgoingMessage] = []
    send = adapter.send_message

    async def keeping(session_id: str, content: OutgoingMessage) -> None:
        sent.append(content)
        await send(session_id, content)

    adapter.send_message = keeping  # type: ignore[method-assign]
    outbox = started(adapter, store)
    await outbox.start()
    await first_post(outbox)
    tools = [{"tool": "Read", "status": "success"}, {"tool": "Bash", "status": "failed"}]
    for number, calls in enumerate(([tools[0]], [tools[1]], None)):
        metadata: dict[str, object] = {"role": "assistant"}
        if calls is not None:
            metadata |= {"activity": True, "tools": calls}
        text = f"[r{number}] reading"
        content = OutgoingMessage(type="text", text=text, key=f"reply:{number}", metadata=metadata)
        outbox.submit(Job.message("s", content))
    outbox.submit(message("s", "a thought", type="thought"))  # unlike: stays apart
    await drain(outbox)
    await outbox.stop()
    assert shown(adapter) == ["first", "[r0] reading\n\n[r1] reading\n\n[r2] reading", "a thought"]
    [merged] = [content for content in sent if "[r0]" in content.text]
    assert merged.metadata == {
        "role": "assistant",
        "parts": [
            {"role": "assistant", "activity": True, "tools": [tools[0]]},
            {"role": "assistant", "activity": True, "tools": [tools[1]]},
            {"role": "assistant"},
        ],
    }


async def test_a_closed_thread_s_merged_messages_leave_the_store(
    vt: VirtualTime, store: Store
) -> None:
    """What a session merged is kept for its parts' later edits, until its thread closes:
    then the store lets it go at once, not with the session's records days later."""
    adapter = carrying(vt)
    outbox = started(adapter, store)
    await outbox.start()
    for session in ("done", "busy"):
        await first_post(outbox, session)
        outbox.submit(reply(session, 0))
        outbox.submit(reply(session, 1))
    await drain(outbox)
    outbox.submit(Job.archive("done"))
    await drain(outbox)
    await outbox.stop()
    names = [n for n, _ in store.kv_items("outbox:rec") if n.startswith("merged:")]
    assert names == ["merged:busy:merged:reply:0"]
