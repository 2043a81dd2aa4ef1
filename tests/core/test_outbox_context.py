"""A card carries its context (issue 32): where the channel declares `card_context`, the
messages its session queued just before it go in the card's own message, so on a busy
platform the card goes out in the first free slot, not one slot per message after it; and
their later edits reach the card instead of a message that does not exist.

On Telegram's limits in one forum group, on simulated time (`VirtualTime`), through the real
`Outbox` and a SQLite store.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aep_bridge.contract.types import (
    CallKind,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimits,
)
from aep_bridge.outbox import Job, Outbox, Priority, card_key
from aep_bridge.store import Store
from tests.core.doubles import VirtualTime
from tests.core.test_outbox import Recorder, drain, message, outbox_for, rows, store, vt

__all__ = ["store", "vt"]  # the fixtures

BURST = [
    ("thought", "Reading the failing test first.", None),
    ("tool_update", "⏳ Bash: pytest -x", "tool-1"),
    ("text", "The fixture leaks; fixing it.", None),
    ("plan", "1. fix the fixture\n2. run the suite", None),
]


def carrying(vt: VirtualTime, **options: object) -> Recorder:
    """A forum group's channel that shows a card's context."""
    adapter = Recorder(vt, forum=True, **options)  # type: ignore[arg-type]
    adapter.capabilities = adapter.capabilities.model_copy(update={"card_context": True})
    return adapter


def request(card_id: str = "c1", title: str = "Run make test?") -> PermissionRequest:
    return PermissionRequest(
        id=card_id,
        title=title,
        options=(PermissionOption(id="yes", label="Yes", is_allow=True),),
    )


def burst(outbox: Outbox, session: str = "s") -> None:
    for kind, text, key in BURST:
        outbox.submit(message(session, text, type=kind, key=key))


def shown(adapter: Recorder) -> list[str]:
    """The texts of the messages the platform shows, in order (edits in place)."""
    return [stored.text for stored in adapter.messages]


def answered() -> PermissionOutcome:
    return PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Yes", by="alice")


async def test_a_card_carries_its_burst_and_goes_in_the_first_free_slot(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    await drain(outbox)
    await outbox.stop()

    # one call, at once: the card, with what led to it above its question, in order
    assert [(c.op, c.at) for c in adapter.calls] == [("send_permission_request", 0.0)]
    [card] = shown(adapter)
    places = [card.index(text) for _, text, _ in BURST]
    assert places == sorted(places), card
    assert max(places) < card.index("Run make test?")
    assert outbox.stats["folded"] == 4
    assert rows(store) == 0


async def test_without_card_context_the_card_waits_a_slot_for_each_message(
    vt: VirtualTime, store: Store
) -> None:
    """The same burst where the channel does not show a card's context: the card comes
    after the messages (the order holds), each of which costs its slot."""
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    await drain(outbox)
    await outbox.stop()
    assert [c.op for c in adapter.calls][-1] == "send_permission_request"
    assert len(adapter.calls) == 5
    assert outbox.stats["folded"] == 0


async def test_a_later_edit_of_a_carried_message_reaches_the_card(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    await drain(outbox)
    # while the card is open, the tool call it carries finishes: nothing is posted (a new
    # message would say the call twice); the card shows it with its next update
    outbox.submit(message("s", "✅ Bash: pytest -x — 12 passed", type="tool_update", key="tool-1"))
    await drain(outbox)
    assert len(shown(adapter)) == 1
    outbox.submit(Job.permission_update("s", request(), answered()))
    await drain(outbox)
    [card] = shown(adapter)
    assert "✅ Bash: pytest -x — 12 passed" in card
    assert "⏳ Bash: pytest -x" not in card
    assert "Answered by alice: Yes" in card
    assert "Reading the failing test first." in card  # the update kept the context
    # once the card has its outcome, a later edit updates it at once, keeping the outcome
    outbox.submit(message("s", "✅ Bash: pytest -x — 13 passed", type="tool_update", key="tool-1"))
    await drain(outbox)
    await outbox.stop()
    [card] = shown(adapter)
    assert "13 passed" in card
    assert "Answered by alice: Yes" in card


async def test_an_edit_while_the_card_waits_goes_with_it(vt: VirtualTime, store: Store) -> None:
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    outbox.submit(message("s", "✅ Bash: pytest -x", type="tool_update", key="tool-1"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert len(adapter.calls) == 1
    [card] = shown(adapter)
    assert "✅ Bash: pytest -x" in card
    assert "⏳" not in card


async def test_an_edit_of_a_message_shown_before_goes_after_the_card(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    outbox.submit(message("s", "⏳ Read: invoices/totals.py", type="tool_update", key="tool-0"))
    await drain(outbox)
    await vt.sleep(60)  # the chat's and the group's windows are free again
    free = vt.now
    outbox.submit(message("s", "✅ Read: invoices/totals.py", type="tool_update", key="tool-0"))
    outbox.submit(message("s", "Found it: line_total rounds a float."))
    outbox.submit(Job.permission("s", request()))
    await drain(outbox)
    await outbox.stop()
    # the card first (it carries the reply, a first post); then the edit of the message
    # shown above it, which moves nothing a person reads
    assert [c.op for c in adapter.calls] == [
        "send_message",
        "send_permission_request",
        "send_message",
    ]
    assert adapter.calls[1].at == free  # the card went in the first free slot
    first, card = shown(adapter)
    assert first == "✅ Read: invoices/totals.py"
    assert "Found it: line_total rounds a float." in card
    assert "Read:" not in card


async def test_a_card_takes_only_what_fits_its_message(vt: VirtualTime, store: Store) -> None:
    adapter = carrying(vt, max_length=500)
    outbox = outbox_for(adapter, store)
    for n in range(3):
        outbox.submit(message("s", f"{n}" * 180))
    outbox.submit(Job.permission("s", request()))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    # what did not fit goes ahead of the card, as before; the card takes the newest
    ops = [c.op for c in adapter.calls]
    assert ops[-1] == "send_permission_request"
    texts = shown(adapter)
    assert all(len(text) <= 500 for text in texts)
    assert "2" * 180 in texts[-1]
    assert "0" * 180 not in texts[-1]
    joined = "\n".join(texts)
    assert all(joined.count(f"{n}" * 180) == 1 for n in range(3))  # nothing twice or lost


async def test_a_card_and_its_context_survive_a_restart(vt: VirtualTime, store: Store) -> None:
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    await outbox.start()
    await outbox.stop(0)  # nothing sent yet? then it is all in the table
    again = outbox_for(adapter, store)
    await again.start()
    await drain(again)
    await again.stop()
    assert [c.op for c in adapter.calls] == ["send_permission_request"]
    # a third run: the carried tool call finishes and the card is answered; the update
    # carries the context it went out with, the edit in it
    third = outbox_for(adapter, store)
    await third.start()
    third.submit(Job.permission_update("s", request(), answered()))
    third.submit(message("s", "✅ Bash: pytest -x", type="tool_update", key="tool-1"))
    await drain(third)
    await third.stop()
    [card] = shown(adapter)
    assert "Reading the failing test first." in card
    assert "✅ Bash: pytest -x" in card
    assert "Answered by alice: Yes" in card


async def test_a_lowered_card_keeps_its_context(vt: VirtualTime, store: Store) -> None:
    """A card whose question closed before it went out is lowered to thread rank (`demote`)
    with the request the bridge knows, which has no context: it still carries its own."""
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    quiet = request().model_copy(update={"notify": False})
    assert outbox.demote("s", card_key("c1"), Job.permission("s", quiet, priority=Priority.FINAL))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    [card] = shown(adapter)
    assert "Reading the failing test first." in card


async def test_a_second_card_does_not_take_what_the_first_carries(
    vt: VirtualTime, store: Store
) -> None:
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    burst(outbox)
    outbox.submit(Job.permission("s", request("c1", "First?")))
    outbox.submit(message("s", "And one more thing."))
    outbox.submit(Job.permission("s", request("c2", "Second?")))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    first, second = shown(adapter)
    assert "Reading the failing test first." in first
    assert "And one more thing." not in first
    assert second.startswith("And one more thing.")
    assert "Reading the failing test first." not in second


def test_a_message_with_an_attachment_is_never_carried() -> None:
    from aep_bridge.contract.types import Attachment
    from aep_bridge.outbox.context import fold
    from aep_bridge.outbox.lanes import Entry

    content = OutgoingMessage(
        type="text", text="the log", attachment=Attachment(type="file", file_name="log.txt")
    )
    entry = Entry("send_message", "s", Priority.LIVE, ("s", content), 1)
    assert fold([entry], lambda context: True) is None


async def test_the_thread_s_header_stays_its_first_message(vt: VirtualTime, store: Store) -> None:
    """A session that starts and asks at once: its header (the thread's first message, which
    the first prompt joins) goes first on its own; the card carries what came after it."""
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    outbox.submit(message("s", "Fix invoice rounding · claude-code", key="session:s"))
    outbox.submit(message("s", "Reading the failing test first.", type="thought"))
    outbox.submit(Job.permission("s", request()))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    header, card = shown(adapter)
    assert header == "Fix invoice rounding · claude-code"
    assert card.startswith("Reading the failing test first.")


async def test_a_message_the_channel_shows_by_an_edit_follows_the_card(
    vt: VirtualTime, store: Store
) -> None:
    """Where the channel shows a keyed message by editing one it has (Slack's header is its
    thread's parent message: `call_kind` "edit"), the card neither carries nor waits for it."""
    adapter = carrying(vt)
    adapter.call_kind = lambda op, args: (  # type: ignore[method-assign]
        "edit" if len(args) == 2 and getattr(args[1], "key", None) == "session:s" else "post"
    )
    outbox = outbox_for(adapter, store)
    outbox.submit(message("s", "Reading the failing test first.", type="thought"))
    outbox.submit(message("s", "Fix invoice rounding · claude-code", key="session:s"))
    outbox.submit(Job.permission("s", request()))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert [c.op for c in adapter.calls] == ["send_permission_request", "send_message"]
    card, header = shown(adapter)
    assert header == "Fix invoice rounding · claude-code"
    assert card.startswith("Reading the failing test first.")
    assert "Fix invoice rounding" not in card


async def test_the_channel_s_own_measure_of_its_card_decides_what_it_takes(
    vt: VirtualTime, store: Store
) -> None:
    """A channel whose card draws a message larger than its thread does (Discord draws a
    diff as text in a card, as an embed in the thread) measures its card: the card takes only
    what that measure keeps within the limit, so it never has to leave out what it took."""
    adapter = carrying(vt)
    adapter.measure_card = lambda card: 100 + 300 * len(card.context)  # type: ignore[method-assign]
    outbox = outbox_for(adapter, store)
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    *before, card = shown(adapter)
    assert before == [text for _, text, _ in BURST[:3]]
    assert card.startswith(BURST[3][1])


async def test_what_a_card_took_is_not_sent_again_after_a_restart(
    vt: VirtualTime, store: Store
) -> None:
    """The edits a card goes ahead of are written again behind it; what it took is not (the
    model-based test found a reply carried by its card and posted again after a restart)."""
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    outbox.submit(message("s", "⏳ Read: invoices/totals.py", type="tool_update", key="tool-0"))
    await drain(outbox)
    outbox.submit(message("s", "✅ Read: invoices/totals.py", type="tool_update", key="tool-0"))
    outbox.submit(message("s", "Found it: line_total rounds a float."))
    outbox.submit(Job.permission("s", request()))
    await outbox.stop(0)  # before any of them went
    again = outbox_for(adapter, store)
    await again.start()
    await drain(again)
    await again.stop()
    texts = shown(adapter)
    assert sum(text.count("Found it: line_total rounds a float.") for text in texts) == 1, texts
    assert texts == [
        "✅ Read: invoices/totals.py",
        "Found it: line_total rounds a float.\n\nRun make test?",
    ]


async def test_an_edit_that_outgrows_the_card_is_cut_into_it_not_posted_again(
    vt: VirtualTime, store: Store
) -> None:
    """A carried tool call that finishes with more output than the card can show: it is cut
    at its end to fit the card, never posted again below it (issue 34: the bench found a
    reply in its card and again below it, once its footer joined it)."""
    adapter = carrying(vt, max_length=500)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    burst(outbox)
    outbox.submit(Job.permission("s", request()))
    await drain(outbox)
    output = "✅ Bash: pytest -x\n" + "\n".join(f"test_{n} PASSED" for n in range(30))
    outbox.submit(message("s", output, type="tool_update", key="tool-1"))
    outbox.submit(Job.permission_update("s", request(), answered()))
    await drain(outbox)
    await outbox.stop()
    [card] = shown(adapter)  # one message: the call is not shown a second time
    assert card.count("Bash: pytest -x") == 1, card
    assert "✅ Bash: pytest -x\ntest_0 PASSED" in card  # its new text, cut at its end
    assert "test_29 PASSED" not in card
    assert "…" in card
    assert "Reading the failing test first." in card  # the rest of the context stays
    assert "Answered by alice: Yes" in card
    assert len(card) <= 500


async def test_a_reply_its_footer_outgrows_stays_once_in_the_card(
    vt: VirtualTime, store: Store
) -> None:
    """The bench's case: a keyed reply carried by a card, then its run's footer joins it
    past what the card can show (`activity`: the last bubble a footer joins). The reply is
    shown once, in the card, whether the card is still queued or already went."""
    for sent_first in (False, True):
        adapter = carrying(vt, max_length=400)
        outbox = outbox_for(adapter, store)
        await outbox.start()
        reply = "Fixed: invoice totals off by a cent. Cause: float rounding in line_total."
        outbox.submit(message("s", reply, key=f"reply-{sent_first}"))
        outbox.submit(Job.permission("s", request(f"c-{sent_first}")))
        if sent_first:
            await drain(outbox)
        footer = "\n\n_" + "took 1m 23s · 12 tool calls · $0.12 " * 10 + "_"
        outbox.submit(message("s", reply + footer, key=f"reply-{sent_first}"))
        await drain(outbox)
        await outbox.stop()
        texts = shown(adapter)
        assert sum(text.count("Fixed: invoice totals") for text in texts) == 1, texts
        adapter.messages.clear()


async def test_an_edit_after_a_restart_is_not_carried_as_a_first_post(
    vt: VirtualTime, store: Store
) -> None:
    """A reply shown before a restart, its footer joining it after: the next run cannot tell
    that edit from a first post by what it saw, and a card that carried it showed the reply a
    second time. The store says the session posted keyed messages before: the card leaves
    the edit where it is (in order), and the reply is shown once, edited."""
    adapter = carrying(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    outbox.submit(message("s", "Fixed: invoice totals off by a cent.", key="reply-1"))
    await drain(outbox)
    await outbox.stop()
    again = outbox_for(adapter, store)
    await again.start()
    again.submit(message("s", "Fixed: invoice totals off by a cent.\n\n_took 3 s_", key="reply-1"))
    again.submit(Job.permission("s", request()))
    await drain(again)
    await again.stop()
    texts = shown(adapter)
    assert sum(text.count("Fixed: invoice totals") for text in texts) == 1, texts
    assert texts == ["Fixed: invoice totals off by a cent.\n\n_took 3 s_", "Run make test?"]


class OneChannel(Recorder):
    """Slack's shape: every session's posts count against one channel's pace (one a 1.1 s),
    edits against a budget of their own (here one a minute, spent); a session's header is
    shown by editing its thread's parent, once the thread is made."""

    def __init__(self, vt: VirtualTime) -> None:
        super().__init__(vt, RateLimits(per_chat=RateLimit(count=1, per_seconds=1.1)), forum=True)
        edits = RateLimits(global_=RateLimit(count=1, per_seconds=60))
        self.capabilities = self.capabilities.model_copy(
            update={"card_context": True, "edit_rate_limits": edits}
        )
        self.made: set[str] = set()  # the sessions whose thread (parent) exists

    async def create_session_thread(self, session_id: str, name: str) -> str:
        thread = await super().create_session_thread(session_id, name)
        self.made.add(session_id)
        return thread

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        header = op == "send_message" and (args[1].key or "").startswith("session:")
        return "edit" if header and args[0] in self.made else super().call_kind(op, args)


def new_session(outbox: Outbox, session: str) -> asyncio.Task[None]:
    """What the bridge does for a session's first event: hold its jobs, queue its header,
    make its thread (a call above chatter), then let its jobs go."""
    outbox.hold(session)
    outbox.submit(message(session, f"{session} · claude-code", key=f"session:{session}"))

    async def make() -> None:
        name = f"{session} · claude-code"
        await outbox.call(
            "create_session_thread", session, name, priority=Priority.FINAL, session_id=session
        )
        outbox.release(session)

    return asyncio.create_task(make())


async def spend_the_edits(adapter: OneChannel, outbox: Outbox) -> None:
    adapter.made.add("old")
    outbox.submit(message("old", "old · claude-code", key="session:old"))
    await drain(outbox)


async def test_a_new_session_s_card_goes_right_after_its_thread_not_behind_its_header(
    vt: VirtualTime, store: Store
) -> None:
    """Issue 34, item 6: a card asked while its session's thread was being made waited for
    its header, which the channel shows by editing the thread's parent: a minute for the
    budget of edits (Slack's Tier 3, spent by the others' edits), while the channel's posts,
    one a second for all its threads, went to every other session's thread first (the bench:
    up to 590 of them). The card is the next post after its thread; the header follows it."""
    adapter = OneChannel(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    await spend_the_edits(adapter, outbox)
    making = [new_session(outbox, f"new-{n}") for n in range(6)]
    await asyncio.sleep(0)  # their threads are queued
    making.append(new_session(outbox, "asker"))
    outbox.submit(message("asker", "Running the suite first.", type="thought"))
    outbox.submit(Job.permission("asker", request()))
    await asyncio.gather(*making)
    await drain(outbox)
    await outbox.stop()

    calls = [(c.op, c.session) for c in adapter.calls if c.session != "old"]
    made = calls.index(("create_session_thread", "asker"))
    assert calls[made + 1] == ("send_permission_request", "asker"), calls
    later = calls[made + 2 :]
    assert sum(1 for op, _ in later if op == "create_session_thread") >= 4, calls
    card = next(m.text for m in adapter.messages if "Run make test?" in m.text)
    assert card.startswith("Running the suite first.")  # what led to it, in it
    assert "asker · claude-code" not in card  # the header edits the parent, after the card


async def test_the_card_ahead_of_its_header_stays_ahead_after_a_restart(
    vt: VirtualTime, store: Store
) -> None:
    """The header and the rows behind the card are written again after it when its thread
    is made: a restart reads the card back first, as this run would have sent it."""
    adapter = OneChannel(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    await spend_the_edits(adapter, outbox)
    outbox.submit(message("busy", "A reply in another thread."))  # the channel's pace: spent
    making = new_session(outbox, "asker")
    outbox.submit(Job.permission("asker", request()))
    await making
    await outbox.stop(flush_timeout=0)  # the card waits for the channel's next post
    assert [c.op for c in adapter.calls if c.session == "asker"] == ["create_session_thread"]

    again = outbox_for(adapter, store)
    await again.start()
    await drain(again)
    await again.stop()
    asker = [c.op for c in adapter.calls if c.session == "asker"]
    assert asker == ["create_session_thread", "send_permission_request", "send_message"]
    assert rows(store) == 0


async def test_a_card_goes_ahead_of_every_edit_queued_before_it_in_its_thread(
    vt: VirtualTime, store: Store
) -> None:
    """The bench's other slow card: a session's header (an edit of its thread's parent)
    waited at the head of its thread for the budget of edits, and the card asked behind it
    and behind a reply too long to carry waited with it. The card goes ahead of every edit
    queued before it in its thread; what it could not carry still goes first."""
    adapter = OneChannel(vt)
    outbox = outbox_for(adapter, store)
    await outbox.start()
    await spend_the_edits(adapter, outbox)
    adapter.made.add("s")
    outbox.submit(message("s", "s · claude-code", key="session:s"))
    outbox.submit(message("s", "A reply too long to go in the card. " * 13, key="reply-1"))
    outbox.submit(Job.permission("s", request()))
    await drain(outbox)
    await outbox.stop()

    calls = [(c.op, c.text[:7], c.at) for c in adapter.calls if c.session == "s"]
    assert [op for op, _, _ in calls] == ["send_message", "send_permission_request", "send_message"]
    assert calls[0][1] == "A reply"
    assert calls[1][2] < 5.0  # the card in the next post slot, not after the edits' minute
    assert calls[2][1] == "s · cla"  # the header edits the parent after the card
