"""A question as a person meets it in Telegram: the card says exactly what is approved (the
command in a code block, the working folder), its buttons are readable, it rings once, and its
heads-up in Notifications leads to the card and learns the answer. The real adapter and
python-telegram-bot against the fake Bot API, which enforces Telegram's 4096-unit limit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from aep_bridge import (
    ChannelError,
    FormField,
    NotificationMessage,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
)
from aep_bridge.markup import Blocks, Code, Details, Diff, Paragraph, Span, parse_markdown, plain
from aep_bridge.testing import FakeCore
from aep_bridge.testing.conformance import sample_message
from aep_bridge_telegram import TelegramChannel
from tests import permission_card

from .fake_bot_api import ALICE, FORUM_ID, SUPERGROUP_ID, FakeBotApi, FakeMessage, Limits, utf16_len
from .probe import make_adapter

SESSION = "s-cards"
NAME = "fix the flaky test"
SUMMARY = "claude-code asks permission: Bash"
COMMAND = "rm -rf build/ && make -j8 test"

#: what the core puts in `details` for a Bash permission
DETAILS: Blocks = (
    Paragraph(spans=(Span(text="claude-code wants to run "), Span(text="Bash", bold=True))),
    Code(code=COMMAND, language="bash"),
    Paragraph(spans=(Span(text="in "), Span(text="~/src/app", code=True))),
    Paragraph(spans=(Span(text="to start the build from a clean tree"),)),
)
ALLOW_DENY = (
    PermissionOption(id="allow", label="Allow", is_allow=True),
    PermissionOption(id="deny", label="Deny"),
)


def ask(card: str = "c1", **extra: object) -> PermissionRequest:
    fields: dict[str, object] = {
        "id": card,
        "title": SUMMARY,
        "description": plain(DETAILS),
        "details": DETAILS,
        "options": ALLOW_DENY,
        **extra,
    }
    return PermissionRequest.model_validate(fields)


@dataclass
class Chat:
    fake: FakeBotApi
    core: FakeCore
    adapter: TelegramChannel
    chat: int
    thread: int | None

    def sent(self) -> list[FakeMessage]:
        return [m for m in self.fake.messages(self.chat, from_bot=True) if m.text]

    def card(self) -> FakeMessage:
        return next(m for m in self.sent() if m.callback_data or m.text.startswith("❓ claude"))

    async def heads_up(self, **fields: object) -> None:
        """A heads-up as the outbox delivers it: again while the Notifications topic is
        still being created (the adapter says so with a ChannelError)."""
        note = NotificationMessage.model_validate(
            {"session_id": SESSION, "session_name": NAME, "type": "permission", **fields}
        )
        async with asyncio.timeout(5):
            while True:
                try:
                    await self.adapter.send_notification(note)
                    return
                except ChannelError:
                    await asyncio.sleep(0.01)

    def notes(self) -> list[FakeMessage]:
        """What the Notifications topic shows (the chat itself, without topics)."""
        topic = next((t for t in self.fake.topics(self.chat) if t.name == "Notifications"), None)
        where = topic.message_thread_id if topic is not None else None
        return [m for m in self.fake.messages(self.chat, where, from_bot=True) if m.text]


async def open_chat(
    fake: FakeBotApi, core: FakeCore | None = None, *, chat: int = FORUM_ID, **config: object
) -> Chat:
    core = core or FakeCore()
    adapter = make_adapter(fake, core, chat_id=chat, **config)
    core.attach(adapter)
    await adapter.start()
    thread = await core.create_thread(adapter, SESSION, NAME)
    return Chat(fake, core, adapter, chat, int(thread) if chat == FORUM_ID else None)


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi(limits=Limits.no_rate_limits()) as api:
        yield api
        assert api.violations == []


@pytest.fixture
async def forum(fake: FakeBotApi) -> AsyncIterator[Chat]:
    chat = await open_chat(fake)
    try:
        yield chat
    finally:
        await chat.adapter.stop()


def answered(by: str = "Alice", label: str = "Allow") -> PermissionOutcome:
    return PermissionOutcome(status=OutcomeStatus.ANSWERED, option_label=label, by=by)


# -- the card says what is approved ---------------------------------------------------------


async def test_the_card_shows_the_command_as_code_and_the_folder_and_keeps_them_closed(
    forum: Chat,
) -> None:
    request = ask()
    await forum.adapter.send_permission_request(SESSION, request)
    card = forum.card()
    assert card.text.startswith(f"❓ {SUMMARY}\nclaude-code wants to run Bash")
    [pre] = [e for e in card.entities if e["type"] == "pre"]
    assert pre["language"] == "bash"
    assert text_of(card, pre) == COMMAND
    assert "in ~/src/app" in card.text
    assert "to start the build from a clean tree" in card.text
    # answered: the card keeps what was approved, and says by whom
    await forum.adapter.update_permission_request(SESSION, request, answered())
    closed = forum.fake.message(forum.chat, card.message_id)
    assert [text_of(closed, e) for e in closed.entities if e["type"] == "pre"] == [COMMAND]
    assert "in ~/src/app" in closed.text
    assert closed.text.endswith("✅ Answered by Alice: Allow")
    assert closed.buttons == []


async def test_a_huge_command_still_gives_a_whole_card_within_telegram_s_limit(
    forum: Chat,
) -> None:
    huge = "\n".join(f"echo step {n:05} {'x' * 60}" for n in range(400))  # ~30k
    details = (DETAILS[0], Code(code=huge, language="bash"), DETAILS[2])
    expires = datetime.now(UTC) + timedelta(minutes=30)
    request = ask(details=details, description=plain(details), expires_at=expires)
    request = request.model_copy(update={"accepts_text": True})
    await forum.adapter.send_permission_request(SESSION, request)
    card = forum.card()  # the fake refuses a message over 4096 UTF-16 units
    assert utf16_len(card.text) <= 4096
    assert card.text.startswith(f"❓ {SUMMARY}\nclaude-code wants to run Bash")
    [pre] = [e for e in card.entities if e["type"] == "pre"]
    shown = text_of(card, pre)
    assert len(shown) > 2000  # as much as fits,
    assert huge.startswith(shown)  # from the start
    assert "…" in card.text
    assert "Reply to this message to answer in words." in card.text
    assert card.text.endswith(f"Expires at {expires.strftime('%H:%M')} UTC.")
    # the outcome line still fits
    await forum.adapter.update_permission_request(SESSION, request, answered())
    closed = forum.fake.message(forum.chat, card.message_id)
    assert closed.edits, "the card was edited"
    assert utf16_len(closed.text) <= 4096
    assert closed.text.endswith("✅ Answered by Alice: Allow")


async def test_a_huge_plain_description_is_shortened_too(forum: Chat) -> None:
    words = " ".join(f"word{n}" for n in range(2000))  # ~15k, no details
    request = ask(details=(), description=words)
    await forum.adapter.send_permission_request(SESSION, request)
    card = forum.card()
    assert utf16_len(card.text) <= 4096
    assert card.text.startswith(f"❓ {SUMMARY}\nword0 word1")
    assert card.text.endswith("more characters)")  # never cut silently (issue 32)


# -- buttons --------------------------------------------------------------------------------


async def test_long_option_labels_go_one_per_row_and_short_ones_share_a_row(
    forum: Chat,
) -> None:
    long = (
        PermissionOption(id="once", label="Allow once", is_allow=True),
        PermissionOption(id="always", label="Allow always for this session", is_allow=True),
        PermissionOption(id="deny", label="Deny"),
    )
    await forum.adapter.send_permission_request(SESSION, ask("c-long", options=long))
    await forum.adapter.send_permission_request(SESSION, ask("c-short"))
    long_card, short_card = [m for m in forum.sent() if m.callback_data]
    assert labels(long_card) == [["Allow once"], ["Allow always for this session"], ["Deny"]]
    assert labels(short_card) == [["Allow", "Deny"]]


def labels(message: FakeMessage) -> list[list[str]]:
    assert message.reply_markup is not None
    return [[b["text"] for b in row] for row in message.reply_markup["inline_keyboard"]]


# -- one question, one ping -----------------------------------------------------------------


async def test_a_card_whose_heads_up_rings_is_sent_silently(forum: Chat) -> None:
    await forum.adapter.send_permission_request(SESSION, ask("c-loud"))
    await forum.adapter.send_permission_request(SESSION, ask("c-quiet", notify=False))
    loud, quiet = [c for c in forum.fake.calls_to("sendMessage") if c.param("reply_markup")]
    assert not loud.param("disable_notification")
    assert quiet.param("disable_notification") is True


async def test_a_question_s_heads_up_links_to_the_card_and_is_sent_once(forum: Chat) -> None:
    await forum.adapter.send_permission_request(SESSION, ask())
    card = forum.card()
    await forum.heads_up(summary=SUMMARY, request_id="c1")
    await forum.heads_up(summary=SUMMARY, request_id="c1")  # a retry after a restart
    [note] = forum.notes()
    assert note.text == f"❓ {NAME}: {SUMMARY}"
    [link] = [e for e in note.entities if e["type"] == "text_link"]
    # t.me/c/<chat>/<topic>/<message>: the card itself, in its topic
    assert link["url"] == f"https://t.me/c/1234567890/{forum.thread}/{card.message_id}"
    # a heads-up about no card still leads to the session's topic
    await forum.heads_up(type="completed", summary="the run finished")
    [_, done] = forum.notes()
    [link] = [e for e in done.entities if e["type"] == "text_link"]
    assert link["url"] == f"https://t.me/c/1234567890/{forum.thread}"


async def test_a_heads_up_names_its_session_shortened_to_a_notification_line(
    forum: Chat,
) -> None:
    """A session's name too long for a phone's notification line ends in "…"; the heads-up
    still says what happened after it (issue 32)."""
    long_name = "Fix invoice rounding " + "in every currency " * 20
    await forum.heads_up(summary=SUMMARY, session_name=long_name)
    [note] = forum.notes()
    name, _, rest = note.text.removeprefix("❓ ").partition(": ")
    assert name.startswith("Fix invoice rounding in every currency")
    assert name.endswith("…")
    assert len(name) <= 100
    assert rest == SUMMARY


async def test_without_topics_the_heads_up_links_to_the_card_message(fake: FakeBotApi) -> None:
    chat = await open_chat(fake, chat=SUPERGROUP_ID, topics=False)
    try:
        await chat.adapter.send_permission_request(SESSION, ask())
        card = chat.card()
        await chat.heads_up(summary=SUMMARY, request_id="c1")
        [note] = [m for m in chat.notes() if m.text.startswith("❓ fix")]
        [link] = [e for e in note.entities if e["type"] == "text_link"]
        assert link["url"] == f"https://t.me/c/9876543210/{card.message_id}"
    finally:
        await chat.adapter.stop()


async def test_the_answer_edits_the_heads_up_silently_even_after_a_restart(
    fake: FakeBotApi,
) -> None:
    core = FakeCore()
    chat = await open_chat(fake, core)
    await chat.adapter.send_permission_request(SESSION, ask())
    card = chat.card()
    await chat.heads_up(summary=SUMMARY, request_id="c1")
    [note] = chat.notes()
    await chat.adapter.stop()
    restarted = make_adapter(fake, core)  # the same store: the bridge restarted
    core.attach(restarted)
    await restarted.start()
    try:
        sends = len(fake.calls_to("sendMessage"))
        note_closed = NotificationMessage(
            session_id=SESSION,
            session_name=NAME,
            type="permission",
            summary=SUMMARY,
            request_id="c1",
            outcome="Allow, by Alice",
        )
        await restarted.send_notification(note_closed)
        edited = fake.message(FORUM_ID, note.message_id)
        assert edited.text == f"✅ {NAME}: {SUMMARY} — Allow, by Alice"
        assert len(edited.edits) == 1
        [link] = [e for e in edited.entities if e["type"] == "text_link"]
        assert link["url"].endswith(f"/{card.message_id}")  # still leads to the card
        await restarted.send_notification(note_closed)  # delivered twice: no harm
        assert len(fake.calls_to("sendMessage")) == sends  # nothing new rang
        assert chat.notes() == [edited]
    finally:
        await restarted.stop()


async def test_a_heads_up_says_how_its_question_closed_with_the_cards_icon(
    forum: Chat,
) -> None:
    """An expired question's heads-up does not say ✅: it takes the card's icon for how the
    question closed."""
    await forum.adapter.send_permission_request(SESSION, ask())
    await forum.heads_up(summary=SUMMARY, request_id="c1")
    [note] = forum.notes()
    await forum.heads_up(
        summary=SUMMARY,
        request_id="c1",
        outcome="Expired without an answer",
        outcome_status=OutcomeStatus.EXPIRED,
    )
    edited = forum.fake.message(FORUM_ID, note.message_id)
    assert edited.text == f"⌛ {NAME}: {SUMMARY} — Expired without an answer"


async def test_an_answer_without_a_heads_up_sends_and_edits_nothing(forum: Chat) -> None:
    await forum.adapter.send_permission_request(SESSION, ask())
    sends = len(forum.fake.calls_to("sendMessage"))
    await forum.heads_up(summary=SUMMARY, request_id="c1", outcome="Deny, by Alice")
    assert len(forum.fake.calls_to("sendMessage")) == sends
    assert forum.fake.calls_to("editMessageText") == []
    assert forum.notes() == []


def test_the_channel_declares_that_it_updates_heads_ups() -> None:
    assert TelegramChannel.capabilities.updates_heads_ups


def text_of(message: FakeMessage, entity: dict[str, object]) -> str:
    utf16 = message.text.encode("utf-16-le")
    start = int(str(entity["offset"])) * 2
    return utf16[start : start + int(str(entity["length"])) * 2].decode("utf-16-le")


# -- the card a person judges, in the order they read it (issue 32) ------------------------


async def test_a_real_bash_card_reads_session_folder_command_reason_then_options(
    forum: Chat,
) -> None:
    """Claude Code's permission, through the real mapping and renderer, as Telegram shows
    it: the agent and session, the folder under home, the whole long command in a code
    block, the reason rendered from markdown, then the buttons."""
    request = permission_card.bash_card()
    await forum.adapter.send_permission_request(SESSION, request)
    card = forum.card()
    assert permission_card.in_order(
        card.text,
        "claude-code asks permission: Bash",
        f"Session: {permission_card.SESSION_NAME}",
        f"Folder: {permission_card.FOLDER}",
        permission_card.COMMAND[:40],
        permission_card.REASON_SHOWN,
    )
    [pre] = [e for e in card.entities if e["type"] == "pre"]
    assert text_of(card, pre) == permission_card.COMMAND  # whole, in code
    assert "`" not in card.text
    assert "**" not in card.text
    assert any(e["type"] == "code" and text_of(card, e) == "test" for e in card.entities)
    assert "Permission requested" not in card.text  # the title says it once
    assert [b["text"] for b in card.buttons] == [o.label for o in request.options]


async def test_a_real_edit_card_shows_its_diff(forum: Chat) -> None:
    await forum.adapter.send_permission_request(SESSION, permission_card.edit_card())
    card = forum.card()
    assert permission_card.in_order(card.text, "Folder: ~/proj", "src/app.py", "-x = 1", "+x = 2")


# -- a card carries its context: what its session said just before it (issue 32) ----------

#: the agent's reply, in markdown, as the core parses it
REPLY_MD = "I found the **rounding** bug in `totals.py`:\n\n```python\nround(total, 2)\n```"


def activity(status: str = "running") -> OutgoingMessage:
    """The session's activity message for an edit, as the core sends it (and updates it)."""
    icon = "✅" if status == "completed" else "🔧"
    blocks: Blocks = (
        Paragraph(spans=(Span(text=f"{icon} Edit "), Span(text="totals.py", code=True))),
        Diff(path="totals.py", unified="@@ -1 +1 @@\n-a = 1\n+a = 2\n", added=1, removed=1),
    )
    if status == "completed":
        done = Details(summary="output", blocks=(Code(code="1 file changed"),))
        blocks = (*blocks, done)
    return OutgoingMessage(
        type="tool_update",
        text=plain(blocks),
        blocks=blocks,
        key="activity-1",
        metadata={"activity": True, "status": status},
    )


def with_context(request: PermissionRequest, *context: OutgoingMessage) -> PermissionRequest:
    return request.model_copy(update={"context": context})


def reply() -> OutgoingMessage:
    blocks = parse_markdown(REPLY_MD)
    return OutgoingMessage(type="text", text=plain(blocks), blocks=blocks)


def test_the_channel_declares_that_a_card_shows_its_context() -> None:
    assert TelegramChannel.capabilities.card_context


async def test_a_card_shows_its_context_rendered_above_its_title_then_its_buttons(
    forum: Chat,
) -> None:
    request = with_context(ask(), reply(), sample_message("thought"), activity())
    await forum.adapter.send_permission_request(SESSION, request)
    [card] = forum.sent()  # one message: the context folded into the card
    assert permission_card.in_order(
        card.text,
        "I found the rounding bug in totals.py:",
        "round(total, 2)",
        "💭 Looking at the failing test first.",
        "🔧 Edit totals.py",
        "-a = 1",
        "+a = 2",
        "——————\n❓ " + SUMMARY,  # a divider, then the card's own title
        "claude-code wants to run Bash",
        COMMAND,
    )
    assert "**" not in card.text  # rendered, not raw markdown
    assert "`" not in card.text
    assert any(e["type"] == "bold" and text_of(card, e) == "rounding" for e in card.entities)
    assert any(e["type"] == "italic" and "Looking at" in text_of(card, e) for e in card.entities)
    pres = [(e.get("language"), text_of(card, e)) for e in card.entities if e["type"] == "pre"]
    assert pres == [
        ("python", "round(total, 2)"),
        ("diff", "@@ -1 +1 @@\n-a = 1\n+a = 2"),
        ("bash", COMMAND),
    ]
    assert [b["text"] for b in card.buttons] == ["Allow", "Deny"]
    # each context message reads as the topic shows it on its own
    await forum.adapter.send_message(SESSION, sample_message("thought"))
    alone = forum.sent()[-1]
    assert alone.text in card.text


async def test_the_answered_card_keeps_its_context_with_its_latest_text(forum: Chat) -> None:
    request = with_context(ask(), reply(), sample_message("thought"), activity())
    await forum.adapter.send_permission_request(SESSION, request)
    card = forum.card()
    # the edit's line changed since (done, with its output): the update carries it
    done = with_context(ask(), reply(), sample_message("thought"), activity("completed"))
    await forum.adapter.update_permission_request(SESSION, done, answered())
    closed = forum.fake.message(forum.chat, card.message_id)
    assert closed.edits, "the card was edited"
    assert permission_card.in_order(
        closed.text,
        "I found the rounding bug",
        "💭 Looking at the failing test first.",
        "✅ Edit totals.py",
        "1 file changed",
        "——————\n❓ " + SUMMARY,
        COMMAND,
        "✅ Answered by Alice: Allow",
    )
    assert "🔧 Edit" not in closed.text
    assert closed.text.endswith("✅ Answered by Alice: Allow")
    assert closed.buttons == []


async def test_a_form_s_step_and_a_restart_keep_the_card_s_context(
    forum: Chat,
) -> None:
    """A form's card shows its field on the same message: the context stays above it, and
    the closing update, with no context of its own (a core restarted), keeps it too."""
    field = FormField(id="note", type="string", label="Release note", required=True)
    form = ask("c-form", kind="form", options=(), fields=(field,))
    await forum.adapter.send_permission_request(
        SESSION, with_context(form, sample_message("thought"))
    )
    card = forum.card()
    fill_in = next(b["callback_data"] for b in card.buttons if b["text"] == "Fill in ✏️")
    forum.fake.press(forum.chat, card.message_id, fill_in, ALICE)
    step = await forum.fake.wait_until(
        lambda: (m := forum.fake.message(forum.chat, card.message_id)).edits and m,
        what="the form's first field on the card",
    )
    assert permission_card.in_order(
        step.text, "💭 Looking at the failing test first.", "❓ " + SUMMARY, "1/1: Release note"
    )
    await forum.adapter.update_permission_request(SESSION, form, answered(label="done"))
    closed = forum.fake.message(forum.chat, card.message_id)
    assert permission_card.in_order(
        closed.text, "💭 Looking at the failing test first.", "❓ " + SUMMARY, "Answered by"
    )


async def test_a_context_too_long_for_the_message_loses_its_oldest_part_never_the_card(
    forum: Chat,
) -> None:
    """Four long replies and a last short one: the oldest go, a line says how many, the
    newest stays; the card (its whole command) and its buttons are untouched, the message
    within Telegram's limit (the fake refuses more), and the outcome line still fits."""
    long = [  # 1,610 units each: two and the last fit with the card, not three
        OutgoingMessage(type="text", text=f"reply {n}: " + "all tests pass. " * 100)
        for n in range(4)
    ]
    last = OutgoingMessage(type="text", text="So I will clean the build first.")
    request = with_context(ask(), *long, last)
    await forum.adapter.send_permission_request(SESSION, request)
    [card] = forum.sent()
    assert utf16_len(card.text) <= 4096
    assert card.text.startswith("… 2 earlier messages left out\n\nreply 2: all tests pass.")
    assert "reply 0:" not in card.text
    assert "reply 1:" not in card.text
    assert permission_card.in_order(
        card.text, "reply 3:", "So I will clean the build first.", "——————\n❓ " + SUMMARY
    )
    [pre] = [e for e in card.entities if e["type"] == "pre"]
    assert text_of(card, pre) == COMMAND
    assert card.text.endswith("to start the build from a clean tree")
    assert [b["text"] for b in card.buttons] == ["Allow", "Deny"]
    await forum.adapter.update_permission_request(SESSION, request, answered())
    closed = forum.fake.message(forum.chat, card.message_id)
    assert utf16_len(closed.text) <= 4096
    assert closed.text.startswith("… 2 earlier messages left out\n\nreply 2: all tests pass.")
    assert closed.text.endswith("✅ Answered by Alice: Allow")
