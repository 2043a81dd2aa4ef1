"""The Matrix channel against the fake homeserver, in-process: the room at start (joined,
an invitation accepted, an encrypted one refused), history skipped, and the HTML dialect."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aep_bridge import ChannelError, OutgoingMessage, PermissionOption
from aep_bridge import PermissionRequest as Request
from aep_bridge.markup import Code, parse_markdown
from aep_bridge.testing import FakeCore
from aep_bridge_matrix import html

from .fake_homeserver import ADA, BOB, BOT, FakeHomeserver, Limits, html_problems
from .probe import make_adapter, make_room

ASK = Request(
    id="cAsk1",
    title="claude-code asks permission",
    details=(Code(code="rm -rf build/", language="bash"),),
    options=(PermissionOption(id="a", label="Allow"), PermissionOption(id="d", label="Deny")),
)


async def test_an_encrypted_room_is_refused_at_start_with_what_to_do():
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        room = make_room(fake, encrypted=True)
        adapter = make_adapter(fake, FakeCore(), room)
        with pytest.raises(ChannelError) as refused:
            await adapter.start()
        assert refused.value.permanent
        assert "encryption is not supported" in str(refused.value)
        assert "use an unencrypted room" in str(refused.value)
        assert fake.token(BOT) not in str(refused.value)
        assert fake.calls_to("/send/") == []  # nothing written into it


async def test_an_invitation_is_accepted_and_a_room_the_bot_is_not_in_is_a_clear_error():
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        invited = fake.create_room("agents", [ADA], creator=ADA, invited=[BOT])
        adapter = make_adapter(fake, FakeCore(), invited)
        await adapter.start()
        assert BOT in fake.rooms[invited].members
        await adapter.stop()
        closed = fake.create_room("private", [ADA], creator=ADA)
        with pytest.raises(ChannelError, match=f"invite {BOT} to it"):
            await make_adapter(fake, FakeCore(), closed).start()


async def test_a_token_that_is_someone_else_s_is_refused_naming_the_key():
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        room = make_room(fake)
        adapter = make_adapter(fake, FakeCore(), room, access_token=fake.token(BOB))
        with pytest.raises(ChannelError, match="fix `user_id` or `access_token`"):
            await adapter.start()


async def test_the_first_start_skips_history_and_the_bot_ignores_its_own_reactions():
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        room = make_room(fake)
        core = FakeCore()
        first = make_adapter(fake, core, room)
        await first.start()
        await core.create_thread(first, "s1", "Session")
        await first.send_permission_request("s1", ASK)
        card = fake.messages(room, from_bot=True)[-1]
        await fake.wait_until(lambda: len(fake.reactions(card.event_id)) == 2)
        await asyncio.sleep(0.3)  # the bot's reactions came back through its sync
        assert core.presses == []  # its own: no press
        await first.stop()
        core.states.clear()  # a new install: no sync position kept
        fake.react_as(ADA, room, card.event_id, "1️⃣")  # history, before it started
        again = make_adapter(fake, core, room)
        await again.start()
        fake.react_as(ADA, room, card.event_id, "2️⃣")
        async with asyncio.timeout(5):
            while not core.presses:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert [(p.card_id, p.answer, p.user.id) for p in core.presses] == [("cAsk1", 1, ADA)]
        await again.stop()


def test_agent_text_cannot_ping_link_a_pill_or_leave_the_html_subset():
    blocks = parse_markdown(
        "# Hi @room\n\n**bold** [pill](https://matrix.to/#/@ada:fake.test) "
        '[site](https://example.org/?a="b") <script>x</script>\n\n```python\nprint(1)\n```'
    )
    shown = html.blocks_shown(blocks)
    assert "@room" not in shown.body
    assert "@room" not in shown.html
    assert 'href="https://matrix.to' not in shown.html
    assert '<a href="https://example.org/?a=%22b%22">site</a>' in shown.html
    assert "<script>" not in shown.html
    assert '<pre><code class="language-python">print(1)</code></pre>' in shown.html
    assert html_problems(shown.html) == []
    assert shown.content()["m.mentions"] == {}  # mentions no one
    message = html.message(OutgoingMessage(type="text", text="<b>x</b> & @room\nnext"))
    assert "&lt;b&gt;x&lt;/b&gt; &amp; @\u2060room<br>next" in message.html


def test_a_card_lists_its_reactions_and_a_closed_one_shows_who_answered_with_what():
    from aep_bridge import OutcomeStatus, PermissionOutcome

    card = html.card(ASK)
    assert "React 1️⃣ Allow · 2️⃣ Deny" in card.body
    assert '<pre><code class="language-bash">rm -rf build/</code></pre>' in card.html
    outcome = PermissionOutcome(
        status=OutcomeStatus.ANSWERED, option_id="d", option_label="Deny", by=ADA
    )
    closed = html.card(ASK, outcome)
    assert outcome.summary() in closed.body
    assert "React" not in closed.body
    assert "rm -rf build/" in closed.body  # the question stays
    assert html_problems(closed.html) == []
    assert [html.option_of(k) for k in ("1️⃣", "1⃣", "🔟", "👍")] == [0, 0, 9, None]


async def test_a_reaction_under_a_burst_of_chatter_while_down_is_still_read():
    """More happened while the bridge was down than one sync holds (`limited`): the gap is
    read from `/messages`, so the reaction buried under it still answers, once."""
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        room = make_room(fake)
        core = FakeCore()
        first = make_adapter(fake, core, room)
        await first.start()
        await core.create_thread(first, "s1", "Session")
        await first.send_permission_request("s1", ASK)
        card = fake.messages(room, from_bot=True)[-1]
        await fake.wait_until(lambda: len(fake.reactions(card.event_id)) == 2)
        await asyncio.sleep(0.3)
        await first.stop()
        fake.react_as(ADA, room, card.event_id, "1️⃣")
        for n in range(250):
            fake.send_as(BOB, room, f"chatter {n}")
        again = make_adapter(fake, core, room)  # the sync position kept
        await again.start()
        async with asyncio.timeout(5):
            while not core.presses:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert [(p.card_id, p.answer, p.user.id) for p in core.presses] == [("cAsk1", 0, ADA)]
        await again.stop()


class HeldCore(FakeCore):
    """A core whose `call` (the outbox's queue) holds each call until it is let go: what
    waits there, and what a card's reactions still cost once it closed, are seen."""

    def __init__(self) -> None:
        super().__init__()
        self.queued: list[asyncio.Future[None]] = []

    async def call(self, channel: str, op: str, *args: Any, session_id: str | None = None) -> Any:
        gate = asyncio.get_running_loop().create_future()
        self.queued.append(gate)
        await gate
        return await super().call(channel, op, *args, session_id=session_id)


async def test_a_card_s_reactions_queue_one_at_a_time_and_none_goes_once_it_closed():
    """A card's reactions (one an option, each an event under the homeserver's rate) wait in
    the outbox one at a time, so a card or an outcome asked meanwhile waits for one at most;
    once the card closed, the reaction waiting and those after it are not sent."""
    from aep_bridge import OutcomeStatus, PermissionOutcome

    three = ASK.model_copy(
        update={"options": (*ASK.options, PermissionOption(id="x", label="Always allow"))}
    )
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        room = make_room(fake)
        core = HeldCore()
        adapter = make_adapter(fake, core, room)
        await adapter.start()
        await core.create_thread(adapter, "s1", "Session")
        await adapter.send_permission_request("s1", three)
        card = fake.messages(room, from_bot=True)[-1]
        await fake.wait_until(lambda: core.queued)
        await asyncio.sleep(0.2)
        assert len(core.queued) == 1, "the card's reactions queued all at once"
        core.queued[0].set_result(None)
        await fake.wait_until(lambda: len(core.queued) == 2)
        outcome = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label="Allow", by=ADA)
        await adapter.update_permission_request("s1", three, outcome)
        core.queued[1].set_result(None)  # its slot came after the card closed
        await asyncio.sleep(0.2)
        assert fake.reactions(card.event_id) == {"1️⃣": [BOT]}
        assert len(core.queued) == 2, "a reaction was queued for a closed card"
        await adapter.stop()


def test_a_card_s_context_is_escaped_and_cut_from_its_oldest_end_never_the_card():
    """What led to a question reads above it, each message as the thread shows it, escaped;
    a context too long for one event loses its oldest messages, said by a line, and
    `measure_card`'s rule (`card_size`) is over the limit exactly then."""
    said = OutgoingMessage(type="text", text="<b>not bold</b> & @room")
    small = ASK.model_copy(update={"context": (said,)})
    shown = html.card(small)
    assert shown.html.startswith(f"<div>{html.message(said).html}</div><hr>")
    assert "&lt;b&gt;not bold" in shown.html
    assert "@room" not in shown.body
    assert html.card_size(small) <= html.MAX_CONTENT
    assert html_problems(shown.html) == []
    big = [OutgoingMessage(type="text", text=f"{n} " + "x" * 5_000) for n in range(4)]
    long = ASK.model_copy(update={"context": tuple(big)})
    assert html.card_size(long) > html.MAX_CONTENT
    cut = html.card(long)
    assert cut.size() <= html.MAX_CONTENT
    assert "… 2 earlier messages left out" in cut.body
    assert "0 x" not in cut.body
    assert "1 x" not in cut.body
    assert "3 x" in cut.body
    assert "React 1️⃣ Allow · 2️⃣ Deny" in cut.body  # the card whole
    assert html.card_size(long.model_copy(update={"context": tuple(big[2:])})) <= html.MAX_CONTENT


async def test_a_session_s_thread_keeps_its_name_when_it_ends():
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        room = make_room(fake)
        core = FakeCore()
        adapter = make_adapter(fake, core, room)
        await adapter.start()
        await core.create_thread(adapter, "s1", "Fix invoice rounding")
        await adapter.archive_session_thread("s1")
        root = fake.messages(room, from_bot=True, include_threads=False)[-1]
        assert root.body == "🤖 Fix invoice rounding (ended)"
        await adapter.stop()


async def test_reactions_to_what_is_not_a_card_or_taken_back_press_nothing():
    """An option's emoji on a person's message (even one carrying a card's record) or on a
    session's root is no press, nor is one taken back (redacted) before the bridge read it;
    a later reaction on the card is."""
    async with FakeHomeserver(limits=Limits.loose()) as fake:
        room = make_room(fake)
        core = FakeCore()
        first = make_adapter(fake, core, room)
        await first.start()
        await core.create_thread(first, "s1", "Session")
        await first.send_permission_request("s1", ASK)
        root, card = fake.messages(room, from_bot=True)[-2:]
        await fake.wait_until(lambda: len(fake.reactions(card.event_id)) == 2)
        await first.stop()
        chatter = fake.send_as(BOB, room, "unrelated")
        fake.react_as(ADA, room, chatter, "1️⃣")
        fake.react_as(ADA, room, root.event_id, "1️⃣")
        forged = {"msgtype": "m.text", "body": "a card?", html.CARD_FIELD: {"id": "cAsk1"}}
        fake_card = fake._accept(fake.rooms[room], BOB, "m.room.message", forged).event_id
        fake.react_as(ADA, room, fake_card, "1️⃣")  # a card's record, in a person's event
        taken_back = fake.react_as(ADA, room, card.event_id, "1️⃣")
        fake.redact_as(ADA, room, taken_back)
        fake.react_as(BOB, room, card.event_id, "2️⃣")
        again = make_adapter(fake, core, room)  # reads all of it after its restart
        await again.start()
        async with asyncio.timeout(5):
            while not core.presses:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert [(p.card_id, p.answer, p.user.id) for p in core.presses] == [("cAsk1", 1, BOB)]
        assert [m.event_id for m in fake.messages(room, from_bot=True)] == [
            root.event_id,
            card.event_id,
        ]  # no notice said for any of them
        await again.stop()
