"""The fake Bot API, driven by the real python-telegram-bot over loopback HTTP.

These tests prove the fake speaks Telegram's wire format (PTB parses every answer into its
own objects with no unknown fields left over) and enforces Telegram's limits with Telegram's
errors, so channel tests written against it mean something.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import html
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import httpx
import pytest
from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    MessageEntity,
    ReplyParameters,
    Update,
)
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
)

from .fake_bot_api import (
    ALICE,
    BOB,
    BOT_ID,
    BOT_USERNAME,
    DEFAULT_TOKEN,
    FORUM_ID,
    GROUP_ID,
    NOT_MODIFIED,
    PRIVATE_ID,
    QUERY_TOO_OLD,
    SUPERGROUP_ID,
    FakeBotApi,
    FakeChat,
    Limits,
    ManualClock,
    Violation,
    parse_html,
    utf16_len,
)


@pytest.fixture(autouse=True)
def _timedelta_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    """PTB 22 warns when RetryAfter.retry_after is read as an int; opt in to timedelta."""
    monkeypatch.setenv("PTB_TIMEDELTA", "true")


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    """A fake with every size limit but no rate limits (rate tests make their own)."""
    async with FakeBotApi(limits=Limits.no_rate_limits()) as served:
        yield served


@pytest.fixture
async def bot(fake: FakeBotApi) -> AsyncIterator[Bot]:
    async with Bot(DEFAULT_TOKEN, base_url=fake.base_url) as client:
        yield client


async def refused(call: Awaitable[Any], error: type[TelegramError] = BadRequest) -> str:
    """The error message PTB raised for `call` (PTB drops "Bad Request: " and capitalizes)."""
    with pytest.raises(error) as caught:
        await call
    return caught.value.message


def keyboard(*rows: list[str]) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(data, callback_data=data) for data in row] for row in rows]
    )


def seconds(error: RetryAfter) -> float:
    retry_after = error.retry_after
    assert isinstance(retry_after, dtm.timedelta)
    return retry_after.total_seconds()


# -- wire format ----------------------------------------------------------------------------


async def test_a_bot_cannot_write_first_to_a_person_until_they_start_it(
    fake: FakeBotApi, bot: Bot
) -> None:
    """Telegram's rule for direct messages: a user the bot knows from a group but who never
    opened a private chat with it gets 403; an id nobody knows is 400 "chat not found"."""
    said = await refused(bot.send_message(BOB["id"], "hi"), Forbidden)
    assert said == "Forbidden: bot can't initiate conversation with a user"
    assert "Chat not found" in await refused(bot.send_message(987654321, "hi"))
    fake.start_private_chat(BOB)  # Bob sends the bot /start
    sent = await bot.send_message(BOB["id"], "hi")
    assert (sent.chat.type, sent.chat.id) == ("private", BOB["id"])
    fake.set_bot_status(BOB["id"], "kicked")  # and then blocks it
    said = await refused(bot.send_message(BOB["id"], "again"), Forbidden)
    assert said == "Forbidden: bot was blocked by the user"


async def test_startup_calls_and_objects_parse_cleanly(fake: FakeBotApi, bot: Bot) -> None:
    me = await bot.get_me()
    assert (me.id, me.username, me.is_bot) == (BOT_ID, BOT_USERNAME, True)
    assert me.api_kwargs == {}

    forum = await bot.get_chat(FORUM_ID)
    assert (forum.type, forum.title, forum.is_forum) == ("supergroup", "Agents", True)
    assert forum.api_kwargs == {}
    group = await bot.get_chat(GROUP_ID)
    assert (group.type, group.is_forum) == ("group", None)

    member = await bot.get_chat_member(FORUM_ID, BOT_ID)
    assert member.status == "administrator"
    assert member.can_manage_topics is True  # type: ignore[attr-defined]
    assert member.api_kwargs == {}
    assert (await bot.get_chat_member(FORUM_ID, BOB["id"])).status == "member"
    assert (await bot.get_chat_member(FORUM_ID, ALICE["id"])).status == "creator"
    assert (await bot.get_chat_member(GROUP_ID, BOT_ID)).status == "member"
    admins = await bot.get_chat_administrators(FORUM_ID)
    assert {a.user.id for a in admins} == {ALICE["id"], BOT_ID}

    assert await bot.delete_webhook()
    assert await bot.set_my_commands([("status", "Show the sessions"), ("stop", "Stop it")])
    assert [c.command for c in await bot.get_my_commands()] == ["status", "stop"]
    assert "Bot_command_invalid" in await refused(bot.set_my_commands([("Bad-Name", "x")]))

    assert [c.method for c in fake.calls[:3]] == ["getMe", "getMe", "getChat"]
    assert all(c.status == 200 for c in fake.calls if c.method != "setMyCommands")


async def test_token_method_and_body_encodings_on_the_wire(fake: FakeBotApi) -> None:
    async with httpx.AsyncClient(base_url=fake.base_url + DEFAULT_TOKEN) as http:
        wrong = await http.post(f"{fake.base_url}123:nope/getMe")
        assert wrong.status_code == 401
        assert wrong.json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}
        unknown = await http.post("/noSuchMethod")
        assert unknown.status_code == 404
        assert unknown.json() == {"ok": False, "error_code": 404, "description": "Not Found"}
        elsewhere = await http.post(f"http://127.0.0.1:{fake.port}/{DEFAULT_TOKEN}/getMe")
        assert elsewhere.json()["error_code"] == 404

        form = await http.post("/sendMessage", data={"chat_id": str(PRIVATE_ID), "text": "form"})
        as_json = await http.post("/sendmessage", json={"chat_id": PRIVATE_ID, "text": "json"})
        query = await http.get(f"/sendMessage?chat_id={PRIVATE_ID}&text=query")
        for reply in (form, as_json, query):
            assert reply.status_code == 200
            assert reply.json()["ok"] is True
        assert [m.text for m in fake.messages(PRIVATE_ID)] == ["form", "json", "query"]

        missing = await http.post("/sendMessage", data={"chat_id": str(PRIVATE_ID)})
        assert missing.json() == {
            "ok": False,
            "error_code": 400,
            "description": "Bad Request: message text is empty",
        }

    with pytest.raises(InvalidToken, match="rejected"):
        async with Bot("123:nope", base_url=fake.base_url):
            pass
    async with Bot(DEFAULT_TOKEN, base_url=fake.base_url) as bot:
        await refused(bot.do_api_request("noSuchMethod"), EndPointNotFound)
        assert "Chat not found" in await refused(bot.send_message(-100999, "x"))


# -- topics ---------------------------------------------------------------------------------


async def test_message_into_a_topic_and_back(fake: FakeBotApi, bot: Bot) -> None:
    topic = await bot.create_forum_topic(FORUM_ID, "session 1")
    assert topic.name == "session 1"
    assert topic.api_kwargs == {}
    thread = topic.message_thread_id

    sent = await bot.send_message(
        FORUM_ID,
        "<b>Waiting</b> for <i>you</i>",
        parse_mode="HTML",
        message_thread_id=thread,
        reply_markup=keyboard(["allow", "deny"]),
    )
    assert sent.api_kwargs == {}
    assert (sent.message_thread_id, sent.is_topic_message) == (thread, True)
    assert (sent.chat.id, sent.chat.is_forum, sent.from_user.id) == (FORUM_ID, True, BOT_ID)
    assert sent.text == "Waiting for you"
    assert [(e.type, e.offset, e.length) for e in sent.entities] == [
        (MessageEntity.BOLD, 0, 7),
        (MessageEntity.ITALIC, 12, 3),
    ]
    assert [b.callback_data for b in sent.reply_markup.inline_keyboard[0]] == ["allow", "deny"]
    # Telegram's quirk: a topic message "replies" to the topic's creation message.
    assert sent.reply_to_message.forum_topic_created.name == "session 1"

    stored = fake.messages(FORUM_ID, thread)
    assert [(m.message_id, m.text, m.html) for m in stored] == [
        (sent.message_id, "Waiting for you", "<b>Waiting</b> for <i>you</i>")
    ]
    assert stored[0].callback_data == ["allow", "deny"]
    assert fake.messages(FORUM_ID, None) == []

    reply = await bot.send_message(
        FORUM_ID, "a reply", reply_parameters=ReplyParameters(sent.message_id)
    )
    assert reply.message_thread_id == thread  # a reply lands in the replied message's topic
    assert reply.reply_to_message.message_id == sent.message_id

    assert await bot.edit_forum_topic(FORUM_ID, thread, name="session 1 (done)")
    assert fake.topic(FORUM_ID, thread).name == "session 1 (done)"
    assert "Topic_not_modified" in await refused(
        bot.edit_forum_topic(FORUM_ID, thread, name="session 1 (done)")
    )
    assert await bot.close_forum_topic(FORUM_ID, thread)
    assert fake.topic(FORUM_ID, thread).closed
    await bot.send_message(FORUM_ID, "admins may still post", message_thread_id=thread)
    fake.set_admin(FORUM_ID, can_manage_topics=False)
    assert "Topic_closed" in await refused(
        bot.send_message(FORUM_ID, "x", message_thread_id=thread)
    )
    fake.set_admin(FORUM_ID)
    assert await bot.reopen_forum_topic(FORUM_ID, thread)

    assert await bot.delete_forum_topic(FORUM_ID, thread)
    assert fake.messages(FORUM_ID, thread) == []
    assert len(fake.messages(FORUM_ID, thread, deleted=True)) == 3
    assert await refused(bot.send_message(FORUM_ID, "x", message_thread_id=thread)) == (
        "Message thread not found"
    )
    assert "Message to edit not found" in await refused(
        bot.edit_message_text("x", FORUM_ID, sent.message_id)
    )
    assert "Message thread not found" in await refused(
        bot.send_message(FORUM_ID, "x", message_thread_id=999)
    )
    assert fake.calls[-1].description == "Bad Request: message thread not found"


async def test_topics_need_a_forum_rights_and_a_fitting_name(fake: FakeBotApi, bot: Bot) -> None:
    for chat in (SUPERGROUP_ID, GROUP_ID, PRIVATE_ID):
        assert await refused(bot.create_forum_topic(chat, "t")) == "The chat is not a forum"
    assert fake.calls[-1].description == "Bad Request: the chat is not a forum"

    fake.set_forum(SUPERGROUP_ID)
    assert (await bot.create_forum_topic(SUPERGROUP_ID, "now a forum")).name == "now a forum"

    assert (await bot.create_forum_topic(FORUM_ID, "n" * 128)).name == "n" * 128
    await refused(bot.create_forum_topic(FORUM_ID, "n" * 129))
    await refused(bot.create_forum_topic(FORUM_ID, ""))

    fake.set_admin(FORUM_ID, can_manage_topics=False)
    member = await bot.get_chat_member(FORUM_ID, BOT_ID)
    assert member.can_manage_topics is False  # type: ignore[attr-defined]
    assert await refused(bot.create_forum_topic(FORUM_ID, "t")) == (
        "Not enough rights to create a topic"
    )
    assert len(fake.topics(FORUM_ID)) == 1


async def test_a_basic_group_upgraded_to_a_supergroup_answers_with_its_new_id(
    fake: FakeBotApi, bot: Bot
) -> None:
    upgraded = fake.upgrade(GROUP_ID)
    assert upgraded.id == int(f"-100{abs(GROUP_ID)}")
    with pytest.raises(ChatMigrated) as caught:
        await bot.get_chat(GROUP_ID)
    assert caught.value.new_chat_id == upgraded.id
    assert fake.calls[-1].description == (
        "Bad Request: group chat was upgraded to a supergroup chat"
    )
    chat = await bot.get_chat(upgraded.id)
    assert (chat.type, chat.title, chat.is_forum) == ("supergroup", "Plain group", True)
    with pytest.raises(ValueError, match="not a basic group"):
        fake.upgrade(SUPERGROUP_ID)


# -- text -----------------------------------------------------------------------------------


async def test_escaped_html_is_accepted_and_rendered(fake: FakeBotApi, bot: Bot) -> None:
    raw = "if a < b && c > \"d\": print('<tag>') # 😀 ü"
    sent = await bot.send_message(PRIVATE_ID, f"<b>{html.escape(raw)}</b>", parse_mode="HTML")
    assert sent.text == raw
    assert [(e.type, e.offset, e.length) for e in sent.entities] == [
        (MessageEntity.BOLD, 0, utf16_len(raw))
    ]

    rich = (
        '<pre><code class="language-python">x = 1</code></pre>'
        '<a href="https://example.com/?a=1&amp;b=2">link</a>'
        '<tg-spoiler>s</tg-spoiler><span class="tg-spoiler">p</span>'
        "<blockquote expandable>q</blockquote><strong>&#128512;&#x41;&lt;&gt;</strong>"
    )
    sent = await bot.send_message(PRIVATE_ID, rich, parse_mode="HTML")
    assert sent.text == "x = 1linkspq😀A<>"
    kinds = {(e.type, e.language, e.url) for e in sent.entities}
    assert kinds == {
        (MessageEntity.PRE, "python", None),
        (MessageEntity.TEXT_LINK, None, "https://example.com/?a=1&b=2"),
        (MessageEntity.SPOILER, None, None),
        (MessageEntity.EXPANDABLE_BLOCKQUOTE, None, None),
        (MessageEntity.BOLD, None, None),
    }
    assert fake.messages(PRIVATE_ID)[-1].html == rich


@pytest.mark.parametrize(
    ("text", "description"),
    [
        ("<b>bold", 'Can\'t find end tag corresponding to start tag "b"'),
        ("if a < b", 'Unsupported start tag "" at byte offset 5'),
        ("<foo>x</foo>", 'Unsupported start tag "foo" at byte offset 0'),
        ("<b>x</i>", 'Unmatched end tag at byte offset 4, expected "</b>", found "</i>"'),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("é <b", "Unclosed start tag at byte offset 3"),
        ('<span class="x">y</span>', 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
        ("AT&T", 'Character "&" at byte offset 2 does not start an HTML entity'),
        ("&nbsp;", 'Character "&" at byte offset 0 does not start an HTML entity'),
    ],
)
async def test_broken_html_is_refused_with_the_parser_error(
    fake: FakeBotApi, bot: Bot, text: str, description: str
) -> None:
    message = await refused(bot.send_message(PRIVATE_ID, text, parse_mode="HTML"))
    assert message.lower().startswith("can't parse entities: ")
    assert fake.calls[-1].status == 400
    assert fake.calls[-1].description.startswith(
        f"Bad Request: can't parse entities: {description}"
    )
    assert fake.messages(PRIVATE_ID) == []


@pytest.mark.parametrize(
    ("text", "inner", "outer"),
    [
        ("<code><b>x</b></code>", "b", "code"),
        ("<pre><i>x</i></pre>", "i", "pre"),
        ('<pre><code class="language-py"><b>x</b></code></pre>', "b", "pre"),
        ("<code><code>x</code></code>", "code", "code"),
        ('<a href="https://e.org"><pre>x</pre></a>', "pre", "a"),
        ('<a href="https://e.org"><blockquote>x</blockquote></a>', "blockquote", "a"),
        ('<a href="https://e.org"><a href="https://f.org">x</a></a>', "a", "a"),
        (
            "<blockquote>a<blockquote expandable>b</blockquote></blockquote>",
            "blockquote",
            "blockquote",
        ),
    ],
)
async def test_a_tag_telegram_would_drop_is_refused(
    fake: FakeBotApi, bot: Bot, text: str, inner: str, outer: str
) -> None:
    message = await refused(bot.send_message(PRIVATE_ID, text, parse_mode="HTML"))
    assert message.lower().startswith("can't parse entities: ")
    assert fake.calls[-1].description.startswith(
        f'Bad Request: can\'t parse entities: Tag "{inner}" inside "{outer}"'
    )
    assert fake.messages(PRIVATE_ID) == []


async def test_nesting_telegram_shows_is_accepted(fake: FakeBotApi, bot: Bot) -> None:
    for text in (
        '<pre><code class="language-python">x</code></pre>',
        "<b><code>x</code></b>",
        '<a href="https://e.org"><b><code>x</code></b></a>',
        "<blockquote expandable><pre>x</pre></blockquote>",
        "<blockquote><b>x</b> <i>y</i></blockquote>",
        "<b>bold <i>both</i></b>",
    ):
        await bot.send_message(PRIVATE_ID, text, parse_mode="HTML")
    assert len(fake.messages(PRIVATE_ID)) == 6


async def test_leading_spaces_inside_a_first_entity_are_kept(fake: FakeBotApi, bot: Bot) -> None:
    """Telegram trims a message's leading spaces and newlines only up to its first entity
    (tdlib's fix_formatted_text): an indented code block that starts a message keeps its
    indentation; plain leading whitespace goes."""
    sent = await bot.send_message(PRIVATE_ID, "\n <pre>    indented()\n</pre>\n", parse_mode="HTML")
    assert sent.text == "    indented()"
    assert [(e.type, e.offset, e.length) for e in sent.entities] == [(MessageEntity.PRE, 0, 14)]
    sent = await bot.send_message(PRIVATE_ID, "\n  <b>x</b>  ", parse_mode="HTML")
    assert sent.text == "x"
    assert [(e.offset, e.length) for e in sent.entities] == [(0, 1)]


async def test_length_is_counted_after_parsing_in_utf16(fake: FakeBotApi, bot: Bot) -> None:
    fits = [
        "<b>" + "x" * 4096 + "</b>",
        "&lt;" * 4096,
        "<i>" + "😀" * 2048 + "</i>",  # 4096 UTF-16 code units
        "\n  " + "x" * 4096 + "  \n",  # surrounding whitespace is trimmed first
    ]
    for text in fits:
        sent = await bot.send_message(PRIVATE_ID, text, parse_mode="HTML")
        assert utf16_len(sent.text) == 4096
    too_long = ["<b>" + "x" * 4097 + "</b>", "&amp;" * 4097, "😀" * 2048 + "x", "y" * 4097]
    for text in too_long:
        assert await refused(bot.send_message(PRIVATE_ID, text, parse_mode="HTML")) == (
            "Message is too long"
        )
    assert await refused(bot.send_message(PRIVATE_ID, "y" * 4097)) == "Message is too long"
    for empty in ("   ", "<b></b>", "<b> </b>\n"):
        assert await refused(bot.send_message(PRIVATE_ID, empty, parse_mode="HTML")) == (
            "Message text is empty"
        )
    assert len(fake.messages(PRIVATE_ID)) == len(fits)


# -- buttons --------------------------------------------------------------------------------


async def test_callback_data_is_limited_in_bytes(fake: FakeBotApi, bot: Bot) -> None:
    for fits in ("d" * 64, "é" * 32):
        await bot.send_message(PRIVATE_ID, "ok", reply_markup=keyboard([fits]))
    for too_long in ("d" * 65, "é" * 33):  # 33 characters, 66 bytes
        assert await refused(
            bot.send_message(PRIVATE_ID, "no", reply_markup=keyboard([too_long]))
        ) == ("Button_data_invalid")
        assert fake.calls[-1].description == "Bad Request: BUTTON_DATA_INVALID"
    assert [m.text for m in fake.messages(PRIVATE_ID)] == ["ok", "ok"]


async def test_buttons_per_row_and_per_message(fake: FakeBotApi, bot: Bot) -> None:
    await bot.send_message(PRIVATE_ID, "8", reply_markup=keyboard([f"b{i}" for i in range(8)]))
    await refused(
        bot.send_message(PRIVATE_ID, "9", reply_markup=keyboard([f"b{i}" for i in range(9)]))
    )
    hundred = [[f"b{r}.{i}" for i in range(8)] for r in range(12)] + [[f"x{i}" for i in range(4)]]
    await bot.send_message(PRIVATE_ID, "100", reply_markup=keyboard(*hundred))
    await refused(
        bot.send_message(PRIVATE_ID, "101", reply_markup=keyboard(*hundred, ["one more"]))
    )
    assert [m.text for m in fake.messages(PRIVATE_ID)] == ["8", "100"]
    assert len(fake.messages(PRIVATE_ID)[-1].buttons) == 100


# -- rate limits ----------------------------------------------------------------------------


async def test_per_chat_limit_and_a_caller_that_waits() -> None:
    async with (
        FakeBotApi() as fake,
        Bot(DEFAULT_TOKEN, base_url=fake.base_url) as bot,
    ):
        topic = await bot.create_forum_topic(FORUM_ID, "busy")
        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(FORUM_ID, "too soon", message_thread_id=topic.message_thread_id)
        assert seconds(caught.value) == 1
        assert fake.calls[-1].status == 429
        assert fake.calls[-1].description == "Too Many Requests: retry after 1"
        assert [(v.kind, v.method, v.chat_id) for v in fake.violations] == [
            ("per_chat", "sendMessage", FORUM_ID)
        ]
        await bot.send_message(PRIVATE_ID, "another chat is not affected")

        await asyncio.sleep(seconds(caught.value))
        sent = await bot.send_message(
            FORUM_ID, "after waiting", message_thread_id=topic.message_thread_id
        )
        assert sent.text == "after waiting"
        assert fake.violation_counts == {"per_chat": 1}
        # refused calls never count: only the 3 accepted ones are in the record
        assert len(fake.sent_times()) == 3


async def test_group_limit_counts_every_topic_of_the_chat() -> None:
    clock = ManualClock()
    async with (
        FakeBotApi(clock=clock) as fake,
        Bot(DEFAULT_TOKEN, base_url=fake.base_url) as bot,
    ):
        threads = []
        for n in range(4):
            threads.append((await bot.create_forum_topic(FORUM_ID, f"t{n}")).message_thread_id)
            clock.advance(1.5)
        for n in range(16):  # 4 topic creations + 16 messages = 20 in 28.5 s
            await bot.send_message(FORUM_ID, f"m{n}", message_thread_id=threads[n % 4])
            clock.advance(1.5)
        assert fake.violations == []

        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(FORUM_ID, "21st", message_thread_id=threads[0])
        assert seconds(caught.value) == 30  # the first of the 20 leaves the window at 60 s
        assert fake.violations[-1].kind == "per_group"
        await bot.send_message(PRIVATE_ID, "a private chat has no group limit")

        clock.advance(30)
        await bot.send_message(FORUM_ID, "21st", message_thread_id=threads[0])
        assert fake.violation_counts == {"per_group": 1}


async def test_global_limit_across_chats() -> None:
    clock = ManualClock()
    users = [{"id": 900 + n, "is_bot": False, "first_name": f"U{n}"} for n in range(31)]
    chats = [FakeChat(u["id"], "private", first_name=u["first_name"]) for u in users]
    async with (
        FakeBotApi(clock=clock, chats=chats) as fake,
        Bot(DEFAULT_TOKEN, base_url=fake.base_url) as bot,
    ):
        for chat in chats[:30]:
            await bot.send_message(chat.id, "hello")
        with pytest.raises(RetryAfter) as caught:
            await bot.send_message(chats[30].id, "hello")
        assert seconds(caught.value) == 1
        assert fake.violations == [Violation("global", "sendMessage", chats[30].id, clock(), 1)]
        clock.advance(1)
        await bot.send_message(chats[30].id, "hello")


# -- edits ----------------------------------------------------------------------------------


async def test_edits_and_not_modified(fake: FakeBotApi, bot: Bot) -> None:
    sent = await bot.send_message(
        PRIVATE_ID, "<b>Question</b>", parse_mode="HTML", reply_markup=keyboard(["yes", "no"])
    )
    same = bot.edit_message_text(
        "<strong>Question</strong>",  # renders the same as <b>
        PRIVATE_ID,
        sent.message_id,
        parse_mode="HTML",
        reply_markup=keyboard(["yes", "no"]),
    )
    with pytest.raises(BadRequest) as caught:
        await same
    assert caught.value.message.lower() == NOT_MODIFIED.removeprefix("Bad Request: ")
    assert fake.calls[-1].description == NOT_MODIFIED

    moved = await bot.edit_message_reply_markup(
        PRIVATE_ID, sent.message_id, reply_markup=keyboard(["yes"])
    )
    assert [b.callback_data for b in moved.reply_markup.inline_keyboard[0]] == ["yes"]
    assert "Message is not modified" in await refused(
        bot.edit_message_reply_markup(PRIVATE_ID, sent.message_id, reply_markup=keyboard(["yes"]))
    )

    answered = await bot.edit_message_text("<b>Answered</b>", PRIVATE_ID, sent.message_id)
    assert answered.text == "<b>Answered</b>"  # no parse_mode: sent as is
    assert answered.reply_markup is None  # an edit without reply_markup drops the keyboard
    assert answered.edit_date is not None
    stored = fake.message(PRIVATE_ID, sent.message_id)
    assert [(v.text, v.reply_markup is not None) for v in stored.edits] == [
        ("Question", True),
        ("Question", True),
    ]
    assert await refused(bot.edit_message_text("x" * 4097, PRIVATE_ID, sent.message_id)) == (
        "Message is too long"
    )
    assert "Can't parse entities" in await refused(
        bot.edit_message_text("<b>x", PRIVATE_ID, sent.message_id, parse_mode="HTML")
    )

    assert await refused(bot.edit_message_text("x", PRIVATE_ID, 4242)) == (
        "Message to edit not found"
    )
    assert await bot.delete_message(PRIVATE_ID, sent.message_id)
    assert await refused(bot.delete_message(PRIVATE_ID, sent.message_id)) == (
        "Message to delete not found"
    )
    user_message = fake.say(PRIVATE_ID, "hi")
    assert await refused(bot.edit_message_text("x", PRIVATE_ID, user_message.message_id)) == (
        "Message can't be edited"
    )


# -- updates --------------------------------------------------------------------------------


async def test_long_poll_returns_a_press_and_honours_offset(fake: FakeBotApi, bot: Bot) -> None:
    sent = await bot.send_message(FORUM_ID, "Allow?", reply_markup=keyboard(["allow"]))
    poll = asyncio.create_task(
        bot.get_updates(timeout=5, allowed_updates=["message", "callback_query"])
    )
    await fake.wait_until(lambda: fake.calls_to("getUpdates"), what="a getUpdates call")
    await asyncio.sleep(0.05)
    assert not poll.done()

    started = time.monotonic()
    query_id = fake.press(FORUM_ID, sent.message_id, "allow", from_user=BOB)
    updates = await poll
    assert time.monotonic() - started < 1  # answered on injection, not at the timeout
    assert fake.allowed_updates == ["message", "callback_query"]
    [update] = updates
    assert update.api_kwargs == {}
    query = update.callback_query
    assert (query.id, query.data, query.from_user.id) == (query_id, "allow", BOB["id"])
    assert (query.message.message_id, query.message.chat.id) == (sent.message_id, FORUM_ID)

    again = await bot.get_updates(timeout=0)  # not confirmed yet: delivered again
    assert [u.update_id for u in again] == [update.update_id]
    assert await bot.get_updates(offset=update.update_id + 1, timeout=0) == ()
    assert fake.pending_updates == []

    started = time.monotonic()
    assert await bot.get_updates(timeout=1) == ()
    assert 0.9 <= time.monotonic() - started < 3

    assert await bot.answer_callback_query(query_id, text="Allowed")
    [answer] = fake.answers
    assert (answer.query_id, answer.text, answer.show_alert) == (query_id, "Allowed", False)
    assert answer.latency >= 0
    assert (
        await refused(bot.answer_callback_query(query_id))
        == QUERY_TOO_OLD.removeprefix("Bad Request: ").capitalize()
    )
    assert "Query is too old" in await refused(bot.answer_callback_query("12345"))
    second = fake.press(FORUM_ID, sent.message_id, "allow")
    assert await refused(bot.answer_callback_query(second, text="x" * 201)) == ("Message_too_long")
    assert await bot.answer_callback_query(second, text="x" * 200)

    with pytest.raises(ValueError, match="no button"):
        fake.press(FORUM_ID, sent.message_id, "nonexistent")


async def test_allowed_updates_filter_and_messages_from_users(fake: FakeBotApi, bot: Bot) -> None:
    topic = await bot.create_forum_topic(FORUM_ID, "chat")
    sent = await bot.send_message(
        FORUM_ID, "Pick", message_thread_id=topic.message_thread_id, reply_markup=keyboard(["a"])
    )
    fake.press(FORUM_ID, sent.message_id, "a")
    said = fake.say(FORUM_ID, "/status@aep_test_bot now", message_thread_id=topic.message_thread_id)
    [update] = await bot.get_updates(timeout=0, allowed_updates=["message"])
    assert [u.get("callback_query", {}).get("data") for u in fake.dropped_updates] == ["a"]
    message = update.message
    assert message.message_id == said.message_id
    assert (message.text, message.message_thread_id, message.is_topic_message) == (
        "/status@aep_test_bot now",
        topic.message_thread_id,
        True,
    )
    assert message.parse_entities([MessageEntity.BOT_COMMAND]) == {
        message.entities[0]: "/status@aep_test_bot"
    }

    private = fake.say(PRIVATE_ID, "a reply", reply_to_message_id=None)
    reply = fake.say(FORUM_ID, "yes", from_user=BOB, reply_to_message_id=sent.message_id)
    updates = await bot.get_updates(offset=update.update_id + 1, timeout=0, allowed_updates=[])
    assert fake.allowed_updates == []
    first, second = (u.message for u in updates)
    assert (first.chat.type, first.from_user.id, first.message_id) == (
        "private",
        ALICE["id"],
        private.message_id,
    )
    assert first.entities == ()
    assert (second.message_id, second.from_user.id) == (reply.message_id, BOB["id"])
    assert (second.reply_to_message.message_id, second.message_thread_id) == (
        sent.message_id,
        topic.message_thread_id,
    )

    assert await bot.delete_webhook(drop_pending_updates=True)
    fake.say(PRIVATE_ID, "dropped")
    assert await bot.delete_webhook(drop_pending_updates=True)
    assert await bot.get_updates(timeout=0) == ()


async def test_two_pollers_conflict(fake: FakeBotApi) -> None:
    async with (
        Bot(DEFAULT_TOKEN, base_url=fake.base_url) as first,
        Bot(DEFAULT_TOKEN, base_url=fake.base_url) as second,
    ):
        poll = asyncio.create_task(first.get_updates(timeout=5))
        await fake.wait_until(lambda: fake.calls_to("getUpdates"))
        await asyncio.sleep(0.05)
        assert await second.get_updates(timeout=0) == ()
        with pytest.raises(Conflict):
            await poll
        assert len(fake.conflicts) == 1


async def test_injected_failures(fake: FakeBotApi, bot: Bot) -> None:
    fake.fail_next("sendMessage", 502)
    assert "Bad Gateway" in await refused(bot.send_message(PRIVATE_ID, "x"), NetworkError)
    fake.fail_next("sendMessage", 429, retry_after=3)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(PRIVATE_ID, "x")
    assert seconds(caught.value) == 3
    fake.fail_next("*", 500, times=2)
    await refused(bot.get_chat(FORUM_ID), NetworkError)
    await refused(bot.send_message(PRIVATE_ID, "x"), NetworkError)
    sent = await bot.send_message(PRIVATE_ID, "through")
    assert [m.message_id for m in fake.messages(PRIVATE_ID)] == [sent.message_id]
    assert fake.violations == []  # injected 429s are not the caller's fault
    assert [c.status for c in fake.calls_to("sendMessage")] == [502, 429, 500, 200]

    fake.set_bot_status(SUPERGROUP_ID, "kicked")
    assert "bot was kicked" in await refused(bot.send_message(SUPERGROUP_ID, "x"), TelegramError)
    assert fake.calls[-1].status == 403


# -- a whole PTB application ----------------------------------------------------------------


async def test_a_polling_application_answers_a_press_and_a_command() -> None:
    async def on_press(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await update.callback_query.answer(f"got {update.callback_query.data}")

    async def on_ping(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await update.effective_message.reply_text("pong")

    async with FakeBotApi() as fake:
        app = ApplicationBuilder().token(DEFAULT_TOKEN).base_url(fake.base_url).build()
        app.add_handler(CallbackQueryHandler(on_press))
        app.add_handler(CommandHandler("ping", on_ping))
        async with app:
            sent = await app.bot.send_message(FORUM_ID, "Allow?", reply_markup=keyboard(["ok"]))
            await app.updater.start_polling(
                timeout=2, allowed_updates=["message", "callback_query"]
            )
            await app.start()
            fake.press(FORUM_ID, sent.message_id, "ok")
            await fake.wait_until(lambda: fake.answers, what="the answer")
            fake.say(PRIVATE_ID, "/ping")
            await fake.wait_until(
                lambda: [m for m in fake.messages(PRIVATE_ID) if m.text == "pong"],
                what="the reply",
            )
            await app.updater.stop()
            await app.stop()
        assert fake.answers[0].text == "got ok"
        assert fake.calls_to("deleteWebhook")
        assert fake.conflicts == []
        assert fake.violations == []


# -- the parser on its own ------------------------------------------------------------------


def test_parse_html_offsets_and_modes() -> None:
    text, entities = parse_html("😀<b>é😀</b><code>c</code>")
    assert text == "😀é😀c"
    assert entities == [
        {"type": "bold", "offset": 2, "length": 3},
        {"type": "code", "offset": 5, "length": 1},
    ]
    assert parse_html("AT&T &foo; &#0;", strict_ampersand=False) == ("AT&T &foo; &#0;", [])
    assert parse_html("<a>example.org</a>")[1] == [
        {"type": "text_link", "offset": 0, "length": 11, "url": "http://example.org"}
    ]
    assert parse_html("<pre>p</pre>")[1] == [{"type": "pre", "offset": 0, "length": 1}]
    assert parse_html("<B>x</b ><blockquote>q</>")[1] == [
        {"type": "bold", "offset": 0, "length": 1},
        {"type": "blockquote", "offset": 1, "length": 1},
    ]
