"""A fake Telegram Bot API for tests: real HTTP on loopback, the real wire format, real limits.

Point python-telegram-bot at it and drive it with the real SDK::

    async with FakeBotApi() as fake:
        async with Bot(DEFAULT_TOKEN, base_url=fake.base_url) as bot:
            topic = await bot.create_forum_topic(FORUM_ID, "session 1")
            await bot.send_message(FORUM_ID, "<b>hi</b>", parse_mode="HTML",
                                   message_thread_id=topic.message_thread_id)
        assert fake.messages(FORUM_ID)[0].text == "hi"
        assert fake.violations == []

(`ApplicationBuilder().token(DEFAULT_TOKEN).base_url(fake.base_url)` works the same way.)

The server is uvicorn inside the test's own event loop, so the test may read and change the
fake's state between awaits without locks. Every call is `POST {base_url}{token}/{method}`
with a form-encoded, multipart or JSON body (query strings work too; method names are
case-insensitive, as on the real server); the answer is `{"ok": true, "result": ...}` or
`{"ok": false, "error_code": N, "description": ..., "parameters": {"retry_after": N}}`.

What it enforces (defaults are Telegram's, change them with `Limits`):

- Rate limits on message-producing calls (`Limits.counted_methods`: sendMessage,
  editMessageText, editMessageReplyMarkup and the topic calls that post a service message):
  1 a second per chat with no burst, 20 a minute per group or supergroup (all its topics
  together), 30 a second for the whole bot. Over a limit the call does nothing and gets a 429
  with `retry_after` = whole seconds until a slot frees (at least 1); every such refusal is
  a `Violation` in `fake.violations` (and `fake.violation_counts[kind]`), so a test can
  assert that a well-behaved channel caused none. Calls refused for any other reason never
  count. Injected 429s (`fail_next`) are not violations.
- Text: HTML parse mode is parsed the way Telegram's parser (tdlib `parse_html`) does,
  with the same error texts ("can't parse entities: Unsupported start tag ..."). The length
  limit (4096) is counted on the parsed text in UTF-16 code units, after Telegram's trimming
  of surrounding whitespace (leading spaces and newlines only up to the first entity, so an
  indented code block that starts a message keeps its indentation). One deliberate
  difference: Telegram keeps a bare `&` that does not start an entity as a literal `&`; this
  fake refuses it (strict_html=True) because unescaped text is always a bug in the sender.
  For the same reason it refuses a tag where Telegram would drop or mangle it (any tag inside
  `<code>` or `<pre>` but `<pre><code>`, a `<pre>` or `<blockquote>` inside a link, a
  blockquote inside a blockquote, a link inside a link): Telegram accepts those and loses
  the formatting. Only HTML is parsed: MarkdownV2 / Markdown are refused with 400
  "unsupported parse_mode" (a limitation of the fake, not Telegram).
- Inline keyboards: callback_data 1-64 bytes (UTF-8), at most 8 buttons a row and 100 a
  message, exactly one action per button.
- Topics exist only in forum supergroups (and private chats when `private_topics=True`);
  the bot needs `can_manage_topics` to create them; names are 1-128 characters.
- editMessageText without reply_markup removes the message's inline keyboard, as Telegram
  does; editing to the same text, entities and markup is "message is not modified".
- A callback query can be answered once, within `Limits.answer_deadline` seconds (Telegram
  does not document the cut-off; 15 s by default here), with text of at most 200 characters.

Error descriptions are the real server's where known; the ones this fake had to invent are
marked "(fake)" in `_FAKE_WORDING` below so nobody matches on them by accident.

Inspection: `calls`, `messages()`, `message()`, `topics()`, `topic()`, `answers`, `pressed`,
`violations`, `violation_counts`, `allowed_updates`, `dropped_updates`, `conflicts`,
`commands`. Injection: `press()` (a button press), `say()` (a user's message), `fail_next()`,
`set_admin()`, `set_forum()`, `set_bot_status()`, `add_chat()`, `upgrade()` (a basic group
becomes a supergroup with a new id), `start_private_chat()` (a person sends the bot /start;
until then a sendMessage to a user the fake knows gets Telegram's 403 "bot can't initiate
conversation with a user"). Waiting: `wait_until()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.parser
import email.policy
import itertools
import json
import math
import re
import string
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aep_bridge.testing import InLoopServer, ManualClock, Window
from aep_bridge.testing.platform import sliding_wait

# -- well-known ids ------------------------------------------------------------------------

BOT_ID = 7000000001
DEFAULT_TOKEN = f"{BOT_ID}:AAFakeTokenForTestsOnly-0123456789abcdefg"
BOT_USERNAME = "aep_test_bot"

ALICE: dict[str, Any] = {
    "id": 111111111,
    "is_bot": False,
    "first_name": "Alice",
    "username": "alice",
    "language_code": "en",
}
BOB: dict[str, Any] = {"id": 222222222, "is_bot": False, "first_name": "Bob", "username": "bob"}

#: a forum supergroup titled "Agents"; the bot is an admin with can_manage_topics
FORUM_ID = -1001234567890
#: a supergroup that is not a forum; the bot is an admin
SUPERGROUP_ID = -1009876543210
#: a basic group; the bot is a plain member
GROUP_ID = -4001234567
#: Alice's private chat with the bot
PRIVATE_ID = ALICE["id"]

#: the colours createForumTopic accepts (telegram.constants.ForumIconColor)
ICON_COLORS = (0x6FB9F0, 0xFFD67E, 0xCB86DB, 0x8EEE98, 0xFF93B2, 0xFB6F5F)

#: update types delivered when allowed_updates is not set or empty (Bot API docs)
DEFAULT_UPDATE_TYPES = frozenset(
    {
        "message",
        "edited_message",
        "channel_post",
        "edited_channel_post",
        "business_connection",
        "business_message",
        "edited_business_message",
        "deleted_business_messages",
        "inline_query",
        "chosen_inline_result",
        "callback_query",
        "shipping_query",
        "pre_checkout_query",
        "purchased_paid_media",
        "poll",
        "poll_answer",
        "my_chat_member",
        "chat_join_request",
        "chat_boost",
        "removed_chat_boost",
    }
)

COUNTED_METHODS = frozenset(
    {
        "sendMessage",
        "editMessageText",
        "editMessageReplyMarkup",
        "createForumTopic",
        "editForumTopic",
        "closeForumTopic",
        "reopenForumTopic",
    }
)

NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are"
    " exactly the same as a current content and reply markup of the message"
)
QUERY_TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"
CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is"
    " running"
)

#: descriptions the real API's wording for is unknown; the fake's own (see module docstring)
_FAKE_WORDING = {
    "too_many_in_row": "Bad Request: BUTTONS_TOO_MUCH (fake: more than {n} buttons in a row)",
    "too_many_buttons": "Bad Request: BUTTONS_TOO_MUCH (fake: more than {n} buttons)",
    "topic_name_empty": "Bad Request: TOPIC_TITLE_EMPTY",
    "topic_name_long": "Bad Request: TOPIC_TITLE_TOO_LONG (fake: over {n} characters)",
    "icon_color": "Bad Request: TOPIC_ICON_COLOR_INVALID (fake)",
    "parse_mode": "Bad Request: unsupported parse_mode (fake: parses HTML only)",
    "ampersand": (
        'Character "&" at byte offset {at} does not start an HTML entity; escape it as "&amp;"'
        " (fake strict mode: Telegram keeps it literally)"
    ),
    "manage_topics": "Bad Request: not enough rights to manage topics (fake)",
    "nesting": (
        'Tag "{name}" inside "{outer}" at byte offset {at} (fake strict mode: Telegram drops'
        " or mangles the formatting)"
    ),
}


# -- limits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What the fake enforces; the defaults are Telegram's."""

    per_chat: Window | None = Window(1, 1.0)
    per_group: Window | None = Window(20, 60.0)
    global_: Window | None = Window(30, 1.0)
    counted_methods: frozenset[str] = COUNTED_METHODS
    message_length: int = 4096
    callback_data_bytes: int = 64
    buttons_per_row: int = 8
    buttons_per_message: int = 100
    answer_text: int = 200
    topic_name: int = 128
    #: seconds after the press an answerCallbackQuery is still accepted; None: forever
    answer_deadline: float | None = 15.0

    @classmethod
    def no_rate_limits(cls, **changes: Any) -> Limits:
        """Every size limit, but no per-chat, per-group or global rate limit."""
        return cls(**{"per_chat": None, "per_group": None, "global_": None, **changes})


@dataclass(frozen=True)
class Violation:
    """A call refused with 429 because it broke a rate limit."""

    kind: str  # "per_chat" | "per_group" | "global"
    method: str
    chat_id: int
    time: float
    retry_after: int


# -- the HTML parser ------------------------------------------------------------------------


class HtmlParseError(ValueError):
    """The text is not valid Telegram HTML; the message is the part after "can't parse
    entities: "."""


_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "s",
        "strike",
        "del",
        "u",
        "ins",
        "tg-spoiler",
        "tg-emoji",
        "span",
        "pre",
        "code",
        "blockquote",
    }
)
_SIMPLE_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
}
_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_NAME_TOKEN = frozenset(string.ascii_letters + string.digits + ".-")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's limits and entity offsets."""
    return len(text.encode("utf-16-le")) // 2


def _decode_entity(text: str, i: int) -> tuple[str, int] | None:
    """The character an HTML entity at `text[i] == "&"` stands for and the index after it."""
    n = len(text)
    j = i + 1
    if j < n and text[j] == "#":
        j += 1
        base, digits = 10, string.digits
        if j < n and text[j] in "xX":
            j += 1
            base, digits = 16, string.hexdigits
        start = j
        while j < n and text[j] in digits:
            j += 1
        if j == start or j - start > 8:
            return None
        code = int(text[start:j], base)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        char = chr(code)
    else:
        start = j
        while j < n and text[j] in string.ascii_letters:
            j += 1
        found = _NAMED_ENTITIES.get(text[start:j])
        if found is None:
            return None
        char = found
    if j >= n or text[j] != ";":
        return None
    return char, j + 1


@dataclass
class _Open:
    name: str
    argument: str | None
    offset: int  # UTF-16 offset in the output
    piece: int  # index into the output pieces


def parse_html(
    text: str, *, strict_ampersand: bool = True, strict_nesting: bool = True
) -> tuple[str, list[dict[str, Any]]]:
    """Parse Telegram HTML into (plain text, entities), or raise `HtmlParseError`.

    Follows tdlib's `parse_html`: the same tags, attributes and error messages (with byte
    offsets into the UTF-8 text). Entity offsets and lengths are UTF-16 code units. The text is
    not trimmed here; see `finish_text`.
    """

    def at(i: int) -> int:
        return len(text[:i].encode("utf-8"))

    pieces: list[str] = []
    entities: list[dict[str, Any]] = []
    stack: list[_Open] = []
    pos = 0
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "&":
            decoded = _decode_entity(text, i)
            if decoded is not None:
                pieces.append(decoded[0])
                pos += utf16_len(decoded[0])
                i = decoded[1]
                continue
            if strict_ampersand:
                raise HtmlParseError(_FAKE_WORDING["ampersand"].format(at=at(i)))
        if char != "<":
            pieces.append(char)
            pos += 2 if ord(char) > 0xFFFF else 1
            i += 1
            continue
        begin = i
        i += 1
        if i < n and text[i] == "/":
            if not stack:
                raise HtmlParseError(f"Unexpected end tag at byte offset {at(begin)}")
            j = i + 1
            while j < n and not text[j].isspace() and text[j] != ">":
                j += 1
            end_name = text[i + 1 : j].lower()
            while j < n and text[j].isspace():
                j += 1
            if j >= n or text[j] != ">":
                raise HtmlParseError(f"Unclosed end tag at byte offset {at(begin)}")
            opened = stack[-1]
            if end_name and end_name != opened.name:
                raise HtmlParseError(
                    f"Unmatched end tag at byte offset {at(begin)}, expected"
                    f' "</{opened.name}>", found "</{end_name}>"'
                )
            stack.pop()
            _close_entity(opened, pos, "".join(pieces[opened.piece :]), entities)
            i = j + 1
            continue

        j = i
        while j < n and not text[j].isspace() and text[j] != ">":
            j += 1
        if j >= n:
            raise HtmlParseError(f"Unclosed start tag at byte offset {at(begin)}")
        name = text[i:j].lower()
        if name not in _TAGS:
            raise HtmlParseError(f'Unsupported start tag "{name}" at byte offset {at(begin)}')
        argument: str | None = None
        i = j
        unclosed = f'Unclosed start tag "{name}" at byte offset {at(begin)}'
        while text[i] != ">":
            while i < n and text[i].isspace():
                i += 1
            if i >= n:
                raise HtmlParseError(unclosed)
            if text[i] == ">":
                break
            attr_begin = i
            while i < n and not text[i].isspace() and text[i] not in "=>/\"'":
                i += 1
            attr = text[attr_begin:i].lower()
            if not attr:
                raise HtmlParseError(
                    f'Empty attribute name in the tag "{name}" at byte offset {at(begin)}'
                )
            while i < n and text[i].isspace():
                i += 1
            if i >= n:
                raise HtmlParseError(unclosed)
            if text[i] != "=":
                if name == "blockquote" and attr == "expandable":
                    argument = "expandable"
                continue
            i += 1
            while i < n and text[i].isspace():
                i += 1
            if i >= n:
                raise HtmlParseError(unclosed)
            if text[i] in "\"'":
                quote = text[i]
                i += 1
                value_pieces: list[str] = []
                while i < n and text[i] != quote:
                    if text[i] == "&":
                        decoded = _decode_entity(text, i)
                        if decoded is not None:
                            value_pieces.append(decoded[0])
                            i = decoded[1]
                            continue
                    value_pieces.append(text[i])
                    i += 1
                if i < n:
                    i += 1
                value = "".join(value_pieces)
            else:
                token_begin = i
                while i < n and text[i] in _NAME_TOKEN:
                    i += 1
                value = text[token_begin:i].lower()
                if i < n and not text[i].isspace() and text[i] != ">":
                    raise HtmlParseError(
                        f"Unexpected end of name token at byte offset {at(token_begin)}"
                    )
            if i >= n:
                raise HtmlParseError(f"Unclosed start tag at byte offset {at(begin)}")
            if name == "a" and attr == "href":
                argument = value
            elif name == "code" and attr == "class" and value.startswith("language-"):
                argument = value.removeprefix("language-")
            elif name == "span" and attr == "class" and value.startswith("tg-"):
                argument = value.removeprefix("tg-")
            elif name == "tg-emoji" and attr == "emoji-id":
                argument = value
            elif name == "blockquote" and attr == "expandable":
                argument = "expandable"
        if name == "span" and argument != "spoiler":
            raise HtmlParseError(
                f'Tag "span" must have class "tg-spoiler" at byte offset {at(begin)}'
            )
        if strict_nesting:
            _check_nesting(name, stack, at(begin))
        stack.append(_Open(name, argument, pos, len(pieces)))
        i += 1
    if stack:
        raise HtmlParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1].name}"')
    for entity in entities:
        if entity["type"] != "pre":
            entity.pop("language", None)
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return "".join(pieces), entities


def _check_nesting(name: str, stack: list[_Open], offset: int) -> None:
    """Refuse a tag where Telegram would not show it (its docs: `pre` and `code` contain no
    other entity, `blockquote` nests in none, a link holds no block): Telegram accepts and
    drops it, which is a bug in the sender all the same."""
    outer = None
    for opened in stack:
        if opened.name == "pre" and name == "code" and opened is stack[-1]:
            continue  # <pre><code class="language-x">: a code block with its language
        refused = {"code": True, "pre": True, "a": name in ("a", "pre", "blockquote")}
        if refused.get(opened.name, opened.name == name == "blockquote"):
            outer = opened.name
            break
    if outer is not None:
        raise HtmlParseError(_FAKE_WORDING["nesting"].format(name=name, outer=outer, at=offset))


def _close_entity(opened: _Open, pos: int, content: str, entities: list[dict[str, Any]]) -> None:
    length = pos - opened.offset
    if length <= 0:
        return
    span = {"offset": opened.offset, "length": length}
    last = entities[-1] if entities else None
    same_range = last is not None and (last["offset"], last["length"]) == (
        span["offset"],
        span["length"],
    )
    name, argument = opened.name, opened.argument
    if name in _SIMPLE_TAGS:
        entities.append({"type": _SIMPLE_TAGS[name], **span})
    elif name == "span":
        entities.append({"type": "spoiler", **span})
    elif name == "tg-emoji":
        if not (argument or "").isdigit():
            raise HtmlParseError("Invalid custom emoji identifier specified")
        entities.append({"type": "custom_emoji", **span, "custom_emoji_id": argument})
    elif name == "a":
        url = argument if argument is not None else content
        if url:
            if "://" not in url and not url.startswith(("tg:", "mailto:")):
                url = "http://" + url
            entities.append({"type": "text_link", **span, "url": url})
    elif name == "pre":
        if same_range and last is not None and last["type"] == "code":
            last["type"] = "pre"
        else:
            entities.append({"type": "pre", **span})
    elif name == "code":
        if same_range and last is not None and last["type"] == "pre":
            if argument:
                last["language"] = argument
        else:
            entity: dict[str, Any] = {"type": "code", **span}
            if argument:
                entity["language"] = argument  # kept only if a <pre> wraps it exactly
            entities.append(entity)
    elif name == "blockquote":
        kind = "expandable_blockquote" if argument else "blockquote"
        entities.append({"type": kind, **span})


def finish_text(text: str, entities: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Trim surrounding whitespace as Telegram does and move the entities with the text.

    As tdlib's `fix_formatted_text`: all trailing whitespace goes, but leading spaces and
    newlines only up to the first entity, so a message that starts with an indented code
    block keeps the indentation."""
    right = text.rstrip()
    total = utf16_len(right)
    kept = []
    for entity in entities:
        end = min(total, entity["offset"] + entity["length"])
        if end > entity["offset"]:
            kept.append({**entity, "length": end - entity["offset"]})
    first = min((entity["offset"] for entity in kept), default=len(right))
    lead = 0  # the characters skipped are spaces and newlines: one UTF-16 unit each
    while lead < min(first, len(right)) and right[lead] in " \n":
        lead += 1
    return right[lead:], [{**entity, "offset": entity["offset"] - lead} for entity in kept]


# -- state ----------------------------------------------------------------------------------


@dataclass
class FakeChat:
    """A chat the fake knows, and the bot's standing in it."""

    id: int
    type: str = "supergroup"  # private | group | supergroup | channel
    title: str | None = None
    is_forum: bool = False
    username: str | None = None
    first_name: str | None = None  # private chats
    #: administrator | member | left | kicked
    bot_status: str = "administrator"
    can_manage_topics: bool = True
    can_delete_messages: bool = True
    owner: dict[str, Any] | None = None
    members: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_group(self) -> bool:
        return self.type in ("group", "supergroup")

    @property
    def bot_is_admin(self) -> bool:
        return self.bot_status == "administrator"

    def to_api(self) -> dict[str, Any]:
        chat: dict[str, Any] = {"id": self.id, "type": self.type}
        for key in ("title", "username", "first_name"):
            value = getattr(self, key)
            if value is not None:
                chat[key] = value
        if self.is_forum:
            chat["is_forum"] = True
        return chat


def default_chats() -> list[FakeChat]:
    """The forum "Agents", a plain supergroup, a basic group and Alice's private chat."""
    return [
        FakeChat(FORUM_ID, "supergroup", "Agents", is_forum=True, owner=ALICE, members=[BOB]),
        FakeChat(SUPERGROUP_ID, "supergroup", "Plain supergroup", owner=ALICE, members=[BOB]),
        FakeChat(GROUP_ID, "group", "Plain group", bot_status="member", owner=ALICE),
        FakeChat(PRIVATE_ID, "private", first_name="Alice", username="alice", bot_status="member"),
    ]


@dataclass
class FakeTopic:
    chat_id: int
    message_thread_id: int
    name: str
    icon_color: int
    icon_custom_emoji_id: str | None = None
    created_by_bot: bool = True
    closed: bool = False
    deleted: bool = False
    #: (name, time) of every rename
    renames: list[tuple[str, float]] = field(default_factory=list)

    def to_api(self) -> dict[str, Any]:
        topic: dict[str, Any] = {
            "message_thread_id": self.message_thread_id,
            "name": self.name,
            "icon_color": self.icon_color,
        }
        if self.icon_custom_emoji_id:
            topic["icon_custom_emoji_id"] = self.icon_custom_emoji_id
        return topic


@dataclass(frozen=True)
class MessageVersion:
    """One earlier content of an edited message."""

    text: str
    html: str | None
    entities: list[dict[str, Any]]
    reply_markup: dict[str, Any] | None
    time: float


@dataclass
class FakeMessage:
    chat: FakeChat
    message_id: int
    #: the topic, None outside topics (the General topic of a forum)
    message_thread_id: int | None
    sender: dict[str, Any]
    from_bot: bool
    #: plain text as users see it (tags removed, entities decoded, trimmed)
    text: str
    entities: list[dict[str, Any]]
    #: the raw text the bot sent with parse_mode HTML, else None
    html: str | None
    reply_markup: dict[str, Any] | None
    date: int
    time: float
    reply_to_message_id: int | None = None
    edits: list[MessageVersion] = field(default_factory=list)
    edit_date: int | None = None
    deleted: bool = False
    #: a forum_topic_created (etc.) service message, not a text message
    service: dict[str, Any] | None = None

    @property
    def chat_id(self) -> int:
        return self.chat.id

    @property
    def buttons(self) -> list[dict[str, Any]]:
        """The inline keyboard's buttons, row after row."""
        if not self.reply_markup:
            return []
        return [button for row in self.reply_markup["inline_keyboard"] for button in row]

    @property
    def callback_data(self) -> list[str]:
        return [b["callback_data"] for b in self.buttons if "callback_data" in b]


@dataclass
class Call:
    """One request the fake answered, accepted or not."""

    method: str
    params: dict[str, Any]
    time: float
    status: int = 0
    description: str | None = None
    result: Any = None

    def param(self, name: str) -> Any:
        """A parameter with JSON-encoded values (reply_markup, entities, ...) decoded."""
        value = self.params.get(name)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                return json.loads(value)
        return value


@dataclass
class PressedButton:
    """A callback query `press()` put in the update queue."""

    id: str
    chat_id: int
    message_id: int
    data: str
    user: dict[str, Any]
    time: float
    answered_at: float | None = None


@dataclass(frozen=True)
class CallbackAnswer:
    query_id: str
    text: str | None
    show_alert: bool
    url: str | None
    cache_time: int | None
    time: float
    pressed_at: float

    @property
    def latency(self) -> float:
        """Seconds from the press to the answer (on the fake's clock)."""
        return self.time - self.pressed_at


@dataclass
class _Failure:
    status: int
    retry_after: int | None
    description: str | None
    times: int


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        description: str,
        retry_after: int | None = None,
        migrate_to_chat_id: int | None = None,
    ) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after
        self.migrate_to_chat_id = migrate_to_chat_id


def _bad(description: str) -> ApiError:
    return ApiError(400, f"Bad Request: {description}")


_ALL = object()


# -- the fake -------------------------------------------------------------------------------


class FakeBotApi(InLoopServer):
    """A Telegram Bot API server for one bot, served on 127.0.0.1 by `async with`."""

    platform_name = "the fake Bot API server"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        chats: list[FakeChat] | None = None,
        limits: Limits | None = None,
        bot_username: str = BOT_USERNAME,
        bot_first_name: str = "AEP Test Bot",
        clock: Callable[[], float] = time.monotonic,
        strict_html: bool = True,
        private_topics: bool = False,
    ) -> None:
        self.token = token
        head = token.split(":", 1)[0]
        self.bot_user: dict[str, Any] = {
            "id": int(head) if head.isdigit() else BOT_ID,
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
        }
        self.limits = limits or Limits()
        self.clock = clock
        self.strict_html = strict_html
        self.private_topics = private_topics

        self.chats: dict[int, FakeChat] = {}
        self.users: dict[int, dict[str, Any]] = {ALICE["id"]: ALICE, BOB["id"]: BOB}
        for chat in default_chats() if chats is None else chats:
            self.add_chat(chat)

        #: every request, in arrival order
        self.calls: list[Call] = []
        #: 429s for rate-limit breaches (not injected failures)
        self.violations: list[Violation] = []
        self.violation_counts: Counter[str] = Counter()
        #: answerCallbackQuery calls that were accepted
        self.answers: list[CallbackAnswer] = []
        #: callback queries made by press(), by id
        self.pressed: dict[str, PressedButton] = {}
        #: the last allowed_updates a getUpdates call sent (None: never sent)
        self.allowed_updates: list[str] | None = None
        #: updates discarded because allowed_updates excluded their type
        self.dropped_updates: list[dict[str, Any]] = []
        #: getUpdates calls cut short by a newer concurrent getUpdates (two pollers)
        self.conflicts: list[float] = []
        #: setMyCommands state: (scope JSON, language_code) -> commands
        self.commands: dict[tuple[str, str], list[dict[str, str]]] = {}
        #: deleteWebhook calls: drop_pending_updates of each
        self.webhook_deletes: list[bool] = []
        #: basic groups that became supergroups: old id -> new id (`upgrade()`)
        self.migrated: dict[int, int] = {}

        self._topics: dict[int, dict[int, FakeTopic]] = defaultdict(dict)
        self._messages: dict[int, dict[int, FakeMessage]] = defaultdict(dict)
        self._next_message_id: dict[int, itertools.count[int]] = defaultdict(
            lambda: itertools.count(2)
        )
        self._updates: deque[dict[str, Any]] = deque()
        self._update_ids = itertools.count(700000001)
        self._query_ids = itertools.count(4_200_000_000_000_000_001)
        self._failures: dict[str, deque[_Failure]] = defaultdict(deque)
        self._sent_per_chat: dict[int, deque[float]] = defaultdict(deque)
        self._sent_all: deque[float] = deque()
        self._poll_generation = 0
        self._updates_changed = asyncio.Event()
        self._closing = False

        super().__init__(
            Starlette(
                routes=[
                    Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                    Route("/{path:path}", self._elsewhere, methods=["GET", "POST"]),
                ]
            )
        )
        self._methods: dict[str, tuple[str, Callable[..., Any]]] = {
            name.lower(): (name, handler)
            for name, handler in {
                "getMe": self._get_me,
                "logOut": self._true,
                "close": self._true,
                "getUpdates": self._get_updates,
                "deleteWebhook": self._delete_webhook,
                "getWebhookInfo": self._get_webhook_info,
                "setMyCommands": self._set_my_commands,
                "getMyCommands": self._get_my_commands,
                "deleteMyCommands": self._delete_my_commands,
                "getChat": self._get_chat,
                "getChatMember": self._get_chat_member,
                "getChatAdministrators": self._get_chat_administrators,
                "sendChatAction": self._send_chat_action,
                "createForumTopic": self._create_forum_topic,
                "editForumTopic": self._edit_forum_topic,
                "closeForumTopic": self._close_forum_topic,
                "reopenForumTopic": self._reopen_forum_topic,
                "deleteForumTopic": self._delete_forum_topic,
                "sendMessage": self._send_message,
                "editMessageText": self._edit_message_text,
                "editMessageReplyMarkup": self._edit_message_reply_markup,
                "deleteMessage": self._delete_message,
                "answerCallbackQuery": self._answer_callback_query,
            }.items()
        }

    # -- serving ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What to give PTB as base_url: `http://127.0.0.1:PORT/bot`."""
        return self.url("/bot")

    def channel_block(self, **extra: Any) -> dict[str, Any]:
        """A `telegram` channel block for this fake: the default bot in the forum."""
        return {
            "token": DEFAULT_TOKEN,
            "chat_id": FORUM_ID,
            "api_base_url": self.base_url,
            **extra,
        }

    async def closing(self) -> None:
        """Wake every waiting getUpdates so the server can stop."""
        self._closing = True
        self._notify()

    # -- inspection ------------------------------------------------------------------------

    def messages(
        self,
        chat_id: int,
        thread: Any = _ALL,
        *,
        deleted: bool = False,
        from_bot: bool | None = None,
        service: bool = False,
    ) -> list[FakeMessage]:
        """Messages in a chat, oldest first: all of them, or one topic's
        (`thread=message_thread_id`; `thread=None` is outside any topic). Deleted ones only
        with `deleted=True`; service messages (topic created) only with `service=True`."""
        found = []
        for message in self._messages[chat_id].values():
            if thread is not _ALL and message.message_thread_id != thread:
                continue
            if message.deleted and not deleted:
                continue
            if from_bot is not None and message.from_bot != from_bot:
                continue
            if message.service is not None and not service:
                continue
            found.append(message)
        return found

    def message(self, chat_id: int, message_id: int) -> FakeMessage:
        """One message (deleted ones too); KeyError if it never existed."""
        return self._messages[chat_id][message_id]

    def topics(self, chat_id: int, *, deleted: bool = False) -> list[FakeTopic]:
        return [t for t in self._topics[chat_id].values() if deleted or not t.deleted]

    def topic(self, chat_id: int, message_thread_id: int) -> FakeTopic:
        return self._topics[chat_id][message_thread_id]

    def calls_to(self, method: str, *, status: int | None = None) -> list[Call]:
        return [
            c for c in self.calls if c.method == method and (status is None or c.status == status)
        ]

    def sent_times(self, chat_id: int | None = None) -> list[float]:
        """Times of the accepted rate-limited calls (all chats, or one)."""
        return [
            c.time
            for c in self.calls
            if c.status == 200
            and c.method in self.limits.counted_methods
            and (chat_id is None or self._chat_key(c.params) == chat_id)
        ]

    @property
    def pending_updates(self) -> list[dict[str, Any]]:
        """Updates not yet confirmed by a getUpdates offset."""
        return list(self._updates)

    async def wait_until(
        self, predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition"
    ) -> Any:
        """Poll `predicate` (every 10 ms) until it returns something truthy; returns that."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if loop.time() >= deadline:
                raise TimeoutError(f"{what} not met within {timeout} s")
            await asyncio.sleep(0.01)

    # -- injection -------------------------------------------------------------------------

    def add_chat(self, chat: FakeChat) -> FakeChat:
        self.chats[chat.id] = chat
        for user in [chat.owner, *chat.members]:
            if user is not None:
                self.users[user["id"]] = user
        if chat.type == "private" and chat.id not in self.users:
            self.users[chat.id] = {
                "id": chat.id,
                "is_bot": False,
                "first_name": chat.first_name or "User",
                **({"username": chat.username} if chat.username else {}),
            }
        return chat

    def set_admin(
        self,
        chat_id: int,
        admin: bool = True,
        *,
        can_manage_topics: bool = True,
        can_delete_messages: bool = True,
    ) -> None:
        """Make the bot an admin with these rights, or (admin=False) a plain member."""
        chat = self.chats[chat_id]
        chat.bot_status = "administrator" if admin else "member"
        chat.can_manage_topics = can_manage_topics
        chat.can_delete_messages = can_delete_messages

    def start_private_chat(self, user: dict[str, Any]) -> FakeChat:
        """`user` opens a private chat with the bot and presses Start: from now on the bot may
        write to them (`chat_id` = their user id)."""
        return self.add_chat(
            FakeChat(
                user["id"],
                "private",
                first_name=user.get("first_name"),
                username=user.get("username"),
                bot_status="member",
            )
        )

    def set_bot_status(self, chat_id: int, status: str) -> None:
        """administrator | member | left | kicked (left/kicked: sends get 403)."""
        self.chats[chat_id].bot_status = status

    def set_forum(self, chat_id: int, is_forum: bool = True) -> None:
        self.chats[chat_id].is_forum = is_forum

    def upgrade(self, chat_id: int, new_id: int | None = None, *, forum: bool = True) -> FakeChat:
        """A basic group becomes a supergroup (turning on Topics does that): a new chat with a
        new id (`-100` and the old digits by default), the same title, members and bot status.
        Calls naming the old id get Telegram's 400 with `migrate_to_chat_id`."""
        old = self.chats.pop(chat_id)
        if old.type != "group":
            raise ValueError(f"chat {chat_id} is a {old.type}, not a basic group")
        new = FakeChat(
            new_id if new_id is not None else int(f"-100{abs(chat_id)}"),
            "supergroup",
            old.title,
            is_forum=forum,
            bot_status=old.bot_status,
            can_manage_topics=old.can_manage_topics,
            can_delete_messages=old.can_delete_messages,
            owner=old.owner,
            members=list(old.members),
        )
        self.migrated[chat_id] = new.id
        return self.add_chat(new)

    def fail_next(
        self,
        method: str,
        status: int = 500,
        *,
        retry_after: int | None = None,
        times: int = 1,
        description: str | None = None,
    ) -> None:
        """Answer the next `times` calls to `method` ("*": any method) with `status`,
        doing nothing. 429 carries `retry_after` (default 1)."""
        if status == 429 and retry_after is None:
            retry_after = 1
        self._failures[method.lower()].append(_Failure(status, retry_after, description, times))

    def press(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        from_user: dict[str, Any] | None = None,
        *,
        check_button: bool = True,
    ) -> str:
        """A user presses a button: queue a callback_query update; returns the query id.

        The message must exist; with check_button the data must be one of its buttons'."""
        message = self._messages[chat_id].get(message_id)
        if message is None or message.deleted:
            raise LookupError(f"no message {message_id} in chat {chat_id} to press a button of")
        if check_button and data not in message.callback_data:
            raise ValueError(
                f"message {message_id} has no button with callback_data {data!r}; "
                f"it has {message.callback_data}"
            )
        user = from_user or ALICE
        query_id = str(next(self._query_ids))
        self.pressed[query_id] = PressedButton(
            query_id, chat_id, message_id, data, user, self.clock()
        )
        self._enqueue(
            {
                "callback_query": {
                    "id": query_id,
                    "from": user,
                    "message": self._message_to_api(message),
                    "chat_instance": str(abs(chat_id) * 31 + 17),
                    "data": data,
                }
            }
        )
        return query_id

    def say(
        self,
        chat_id: int,
        text: str,
        from_user: dict[str, Any] | None = None,
        message_thread_id: int | None = None,
        reply_to_message_id: int | None = None,
    ) -> FakeMessage:
        """A user writes `text` in the chat (or topic): store it and queue a message update.
        A text starting with "/" carries a bot_command entity."""
        chat = self.chats[chat_id]
        if message_thread_id is not None:
            topic = self._topics[chat_id].get(message_thread_id)
            if topic is None or topic.deleted:
                raise LookupError(f"no topic {message_thread_id} in chat {chat_id}")
        if reply_to_message_id is not None:
            replied = self._messages[chat_id].get(reply_to_message_id)
            if replied is None or replied.deleted:
                raise LookupError(f"no message {reply_to_message_id} in chat {chat_id}")
            if message_thread_id is None:
                message_thread_id = replied.message_thread_id
        user = from_user or (self.users.get(chat_id) if chat.type == "private" else None) or ALICE
        entities = []
        if text.startswith("/"):
            command = text.split(maxsplit=1)[0]
            entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(command)})
        message = self._store(
            chat,
            message_thread_id,
            user,
            from_bot=False,
            text=text,
            entities=entities,
            html=None,
            markup=None,
            reply_to=reply_to_message_id,
        )
        self._enqueue({"message": self._message_to_api(message)})
        return message

    # -- plumbing --------------------------------------------------------------------------

    def _notify(self) -> None:
        event, self._updates_changed = self._updates_changed, asyncio.Event()
        event.set()

    def _enqueue(self, update: dict[str, Any]) -> None:
        self._updates.append({"update_id": next(self._update_ids), **update})
        self._notify()

    def _store(
        self,
        chat: FakeChat,
        thread: int | None,
        sender: dict[str, Any],
        *,
        from_bot: bool,
        text: str,
        entities: list[dict[str, Any]],
        html: str | None,
        markup: dict[str, Any] | None,
        reply_to: int | None = None,
        service: dict[str, Any] | None = None,
        message_id: int | None = None,
    ) -> FakeMessage:
        message = FakeMessage(
            chat=chat,
            message_id=message_id or next(self._next_message_id[chat.id]),
            message_thread_id=thread,
            sender=sender,
            from_bot=from_bot,
            text=text,
            entities=entities,
            html=html,
            reply_markup=markup,
            date=int(time.time()),
            time=self.clock(),
            reply_to_message_id=reply_to,
            service=service,
        )
        self._messages[chat.id][message.message_id] = message
        return message

    def _message_to_api(self, message: FakeMessage, *, nested: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "message_id": message.message_id,
            "from": message.sender,
            "date": message.date,
            "chat": message.chat.to_api(),
        }
        if message.message_thread_id is not None:
            body["message_thread_id"] = message.message_thread_id
            if message.chat.is_forum or message.chat.type == "private":
                body["is_topic_message"] = True
        if message.service is not None:
            body.update(message.service)
            return body
        if not nested:
            replied = None
            if message.reply_to_message_id is not None:
                replied = self._messages[message.chat_id].get(message.reply_to_message_id)
            elif message.message_thread_id is not None:
                # Telegram's quirk: a topic message without a reply "replies" to the topic's
                # forum_topic_created service message.
                replied = self._messages[message.chat_id].get(message.message_thread_id)
            if replied is not None and not replied.deleted:
                body["reply_to_message"] = self._message_to_api(replied, nested=True)
        if message.edit_date is not None:
            body["edit_date"] = message.edit_date
        body["text"] = message.text
        if message.entities:
            body["entities"] = message.entities
        if message.reply_markup is not None:
            body["reply_markup"] = message.reply_markup
        return body

    async def _read_params(self, request: Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query_params)
        body = await request.body()
        if not body:
            return params
        content_type = request.headers.get("content-type", "")
        kind = content_type.split(";", 1)[0].strip().lower()
        if kind == "application/json":
            try:
                data = json.loads(body)
            except ValueError:
                raise _bad("can't parse JSON request body") from None
            if isinstance(data, dict):
                params.update(data)
        elif kind == "multipart/form-data":
            parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
            )
            for part in parsed.iter_parts():  # type: ignore[attr-defined]
                name = part.get_param("name", header="content-disposition")
                if not name:
                    continue
                if part.get_filename() is not None:
                    params[name] = {"file": part.get_filename(), "size": len(part.get_content())}
                else:
                    params[name] = part.get_content()
        else:
            params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        return params

    async def _endpoint(self, request: Request) -> Response:
        token = request.path_params["token"]
        asked = request.path_params["method"]
        try:
            params = await self._read_params(request)
        except ApiError as error:
            params, early = {}, error
        else:
            early = None
        known = self._methods.get(asked.lower())
        call = Call(known[0] if known else asked, params, self.clock())
        self.calls.append(call)
        if token != self.token:
            return self._error(call, ApiError(401, "Unauthorized"))
        if known is None:
            return self._error(call, ApiError(404, "Not Found"))
        if early is not None:
            return self._error(call, early)
        name, handler = known
        try:
            self._injected_failure(name)
            if name == "getUpdates":
                result = await handler(params, request)
            else:
                result = handler(params)
        except ApiError as error:
            return self._error(call, error)
        call.status = 200
        call.result = result
        return JSONResponse({"ok": True, "result": result})

    async def _elsewhere(self, request: Request) -> Response:
        """Any other path (a base_url without "/bot", say): Telegram's JSON 404, recorded."""
        call = Call(request.url.path, dict(request.query_params), self.clock())
        self.calls.append(call)
        return self._error(call, ApiError(404, "Not Found"))

    def _error(self, call: Call, error: ApiError) -> Response:
        call.status = error.status
        call.description = error.description
        body: dict[str, Any] = {
            "ok": False,
            "error_code": error.status,
            "description": error.description,
        }
        if error.retry_after is not None:
            body["parameters"] = {"retry_after": error.retry_after}
        if error.migrate_to_chat_id is not None:
            body["parameters"] = {"migrate_to_chat_id": error.migrate_to_chat_id}
        return JSONResponse(body, status_code=error.status)

    def _injected_failure(self, method: str) -> None:
        for key in (method.lower(), "*"):
            queue = self._failures.get(key)
            if not queue:
                continue
            failure = queue[0]
            failure.times -= 1
            if failure.times <= 0:
                queue.popleft()
            description = failure.description or {
                429: f"Too Many Requests: retry after {failure.retry_after}",
                500: "Internal Server Error",
                502: "Bad Gateway",
            }.get(failure.status, f"Error {failure.status}")
            raise ApiError(failure.status, description, failure.retry_after)

    # -- rate limits -----------------------------------------------------------------------

    def _chat_key(self, params: dict[str, Any]) -> int | None:
        try:
            return self._chat(params).id
        except ApiError:
            return None

    @staticmethod
    def _wait(times: deque[float], window: Window, now: float) -> float:
        while times and times[0] <= now - 60.0 * 60:
            times.popleft()
        return sliding_wait(times, window, now)

    def _admit(self, method: str, chat: FakeChat) -> None:
        """Refuse with 429 if this message-producing call breaks a rate limit, else count it.
        Call only once every other check passed, right before the call takes effect."""
        if method not in self.limits.counted_methods:
            return
        now = self.clock()
        waits: list[tuple[float, str]] = []
        sent = self._sent_per_chat[chat.id]
        if self.limits.per_chat is not None:
            waits.append((self._wait(sent, self.limits.per_chat, now), "per_chat"))
        if self.limits.per_group is not None and chat.is_group:
            waits.append((self._wait(sent, self.limits.per_group, now), "per_group"))
        if self.limits.global_ is not None:
            waits.append((self._wait(self._sent_all, self.limits.global_, now), "global"))
        wait, kind = max(waits, default=(0.0, ""))
        if wait > 0:
            retry_after = max(1, math.ceil(wait))
            self.violations.append(Violation(kind, method, chat.id, now, retry_after))
            self.violation_counts[kind] += 1
            raise ApiError(429, f"Too Many Requests: retry after {retry_after}", retry_after)
        sent.append(now)
        self._sent_all.append(now)

    # -- parameters ------------------------------------------------------------------------

    @staticmethod
    def _int(params: dict[str, Any], name: str, default: int | None = None) -> int | None:
        value = params.get(name)
        if value is None or value == "":
            return default
        try:
            return int(value)
        except (TypeError, ValueError):
            raise _bad(f"invalid {name} specified") from None

    @staticmethod
    def _bool(params: dict[str, Any], name: str) -> bool:
        value = params.get(name)
        if isinstance(value, str):
            return value.strip().lower() in ("true", "1")
        return bool(value)

    @staticmethod
    def _json(params: dict[str, Any], name: str, what: str | None = None) -> Any:
        value = params.get(name)
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                raise _bad(f"can't parse {what or name} JSON object") from None
        return value

    def _chat(self, params: dict[str, Any]) -> FakeChat:
        raw = params.get("chat_id")
        if raw is None or raw == "":
            raise _bad("chat_id is empty")
        if isinstance(raw, str) and raw.startswith("@"):
            for chat in self.chats.values():
                if chat.username and chat.username.lower() == raw[1:].lower():
                    return chat
            raise _bad("chat not found")
        try:
            chat_id = int(raw)
        except (TypeError, ValueError):
            raise _bad("chat not found") from None
        chat = self.chats.get(chat_id)
        if chat is None and chat_id in self.migrated:
            raise ApiError(
                400,
                "Bad Request: group chat was upgraded to a supergroup chat",
                migrate_to_chat_id=self.migrated[chat_id],
            )
        if chat is None:
            raise _bad("chat not found")
        return chat

    def _writable_chat(self, params: dict[str, Any]) -> FakeChat:
        self._refuse_unstarted_private_chat(params)
        chat = self._chat(params)
        if chat.bot_status in ("left", "kicked"):
            if chat.type == "private":
                raise ApiError(403, "Forbidden: bot was blocked by the user")
            where = "supergroup chat" if chat.type == "supergroup" else f"{chat.type} chat"
            if chat.bot_status == "kicked":
                raise ApiError(403, f"Forbidden: bot was kicked from the {where}")
            raise ApiError(403, f"Forbidden: bot is not a member of the {where}")
        return chat

    def _refuse_unstarted_private_chat(self, params: dict[str, Any]) -> None:
        """A person the bot knows (from a group) who never opened a private chat with it:
        Telegram refuses to write to them first with 403 (a bot cannot start a conversation;
        the person must send it /start). An id nobody knows stays 400 "chat not found"."""
        try:
            chat_id = int(params.get("chat_id") or 0)
        except (TypeError, ValueError):
            return
        user = self.users.get(chat_id)
        if chat_id > 0 and chat_id not in self.chats and user is not None and not user["is_bot"]:
            raise ApiError(403, "Forbidden: bot can't initiate conversation with a user")

    def _text(self, params: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str | None]:
        """Validate text + parse_mode (+ entities): (plain text, entities, html or None)."""
        raw = params.get("text")
        if raw is None or raw == "":
            raise _bad("message text is empty")
        raw = str(raw)
        mode = str(params.get("parse_mode") or "")
        html: str | None = None
        if mode == "":
            entities = self._json(params, "entities") or []
            text = raw
        elif mode.lower() == "html":
            try:
                text, entities = parse_html(
                    raw, strict_ampersand=self.strict_html, strict_nesting=self.strict_html
                )
            except HtmlParseError as error:
                raise _bad(f"can't parse entities: {error}") from None
            html = raw
        else:
            raise ApiError(400, _FAKE_WORDING["parse_mode"])
        text, entities = finish_text(text, entities)
        if not text:
            raise _bad("message text is empty")
        if utf16_len(text) > self.limits.message_length:
            raise _bad("message is too long")
        return text, entities, html

    def _markup(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """Validate reply_markup; returns the inline keyboard to show, or None."""
        markup = self._json(params, "reply_markup", "reply keyboard markup")
        if markup is None:
            return None
        if not isinstance(markup, dict):
            raise _bad("can't parse reply keyboard markup JSON object")
        if "inline_keyboard" not in markup:
            return None  # reply keyboards / force_reply / remove: not part of the message
        rows = markup["inline_keyboard"]
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise _bad(
                'field "inline_keyboard" of the InlineKeyboardMarkup should be an Array of Arrays'
            )
        limits = self.limits
        total = 0
        for row in rows:
            if len(row) > limits.buttons_per_row:
                raise ApiError(
                    400, _FAKE_WORDING["too_many_in_row"].format(n=limits.buttons_per_row)
                )
            total += len(row)
            for button in row:
                self._check_button(button)
        if total > limits.buttons_per_message:
            raise ApiError(
                400, _FAKE_WORDING["too_many_buttons"].format(n=limits.buttons_per_message)
            )
        if total == 0:
            return None
        return {"inline_keyboard": rows}

    def _check_button(self, button: Any) -> None:
        if not isinstance(button, dict):
            raise _bad("can't parse inline keyboard button: InlineKeyboardButton must be an Object")
        if not isinstance(button.get("text"), str) or not button["text"]:
            raise _bad("BUTTON_TEXT_INVALID")
        actions = set(button) - {"text", "style", "icon_custom_emoji_id"}
        if not actions:
            raise _bad(
                "can't parse inline keyboard button: Text buttons are unallowed in the inline"
                " keyboard"
            )
        if "callback_data" in button:
            data = button["callback_data"]
            size = len(data.encode("utf-8")) if isinstance(data, str) else 0
            if not 1 <= size <= self.limits.callback_data_bytes:
                raise _bad("BUTTON_DATA_INVALID")
        if "url" in button:
            url = button["url"]
            if not isinstance(url, str) or not re.match(r"^(https?|tg)://\S+$", url):
                raise _bad("BUTTON_URL_INVALID")

    def _topic(self, chat: FakeChat, thread: int | None) -> FakeTopic | None:
        """The live topic a send goes to, or 400 "message thread not found"."""
        if thread is None:
            return None
        topic = self._topics[chat.id].get(thread)
        if topic is None or topic.deleted:
            raise _bad("message thread not found")
        return topic

    def _supports_topics(self, chat: FakeChat) -> bool:
        return chat.is_forum or (chat.type == "private" and self.private_topics)

    def _may_manage_topics(self, chat: FakeChat) -> bool:
        if chat.type == "private":
            return True
        return chat.bot_is_admin and chat.can_manage_topics

    def _existing_topic(self, params: dict[str, Any]) -> tuple[FakeChat, FakeTopic]:
        chat = self._writable_chat(params)
        if not self._supports_topics(chat):
            raise _bad("the chat is not a forum")
        thread = self._int(params, "message_thread_id")
        topic = self._topics[chat.id].get(thread) if thread is not None else None
        if topic is None or topic.deleted:
            raise _bad("TOPIC_ID_INVALID")
        return chat, topic

    def _bot_message(self, chat: FakeChat, message_id: int | None, missing: str) -> FakeMessage:
        message = self._messages[chat.id].get(message_id) if message_id is not None else None
        if message is None or message.deleted:
            raise _bad(missing)
        return message

    # -- methods ---------------------------------------------------------------------------

    def _true(self, params: dict[str, Any]) -> bool:
        return True

    def _get_me(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
            "has_topics_enabled": self.private_topics,
        }

    async def _get_updates(self, params: dict[str, Any], request: Request) -> list[Any]:
        offset = self._int(params, "offset")
        limit = min(100, max(1, self._int(params, "limit", 100) or 100))
        try:
            timeout = max(0.0, float(params.get("timeout") or 0))
        except ValueError:
            raise _bad("invalid timeout specified") from None
        if "allowed_updates" in params:
            allowed = self._json(params, "allowed_updates")
            if not isinstance(allowed, list):
                raise _bad("can't parse allowed_updates JSON object")
            self.allowed_updates = [str(kind) for kind in allowed]
        if offset is not None:
            if offset < 0:
                while len(self._updates) > -offset:
                    self._updates.popleft()
            else:
                while self._updates and self._updates[0]["update_id"] < offset:
                    self._updates.popleft()
        self._poll_generation += 1
        generation = self._poll_generation
        self._notify()  # an older poll still waiting now sees it was superseded
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            ready = self._deliverable(limit)
            if ready or self._closing:
                return ready
            if generation != self._poll_generation:
                await asyncio.sleep(0.05)  # let a dropped connection be noticed first
                if await request.is_disconnected():
                    return []
                self.conflicts.append(self.clock())
                raise ApiError(409, CONFLICT)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            event = self._updates_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), remaining)

    def _deliverable(self, limit: int) -> list[dict[str, Any]]:
        allowed = set(self.allowed_updates or ()) or DEFAULT_UPDATE_TYPES
        kept: deque[dict[str, Any]] = deque()
        for update in self._updates:
            kind = next(key for key in update if key != "update_id")
            if kind in allowed:
                kept.append(update)
            else:
                self.dropped_updates.append(update)
        self._updates = kept
        return list(itertools.islice(kept, limit))

    def _delete_webhook(self, params: dict[str, Any]) -> bool:
        drop = self._bool(params, "drop_pending_updates")
        self.webhook_deletes.append(drop)
        if drop:
            self._updates.clear()
        return True

    def _get_webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": "", "has_custom_certificate": False, "pending_update_count": 0}

    def _commands_key(self, params: dict[str, Any]) -> tuple[str, str]:
        scope = self._json(params, "scope") or {"type": "default"}
        return json.dumps(scope, sort_keys=True), str(params.get("language_code") or "")

    def _set_my_commands(self, params: dict[str, Any]) -> bool:
        commands = self._json(params, "commands")
        if not isinstance(commands, list):
            raise _bad("can't parse commands JSON object")
        if len(commands) > 100:
            raise _bad("BOT_COMMANDS_TOO_MUCH")
        for command in commands:
            name = command.get("command") if isinstance(command, dict) else None
            if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_]{1,32}", name):
                raise _bad("BOT_COMMAND_INVALID")
            description = command.get("description")
            if not isinstance(description, str) or not 1 <= len(description) <= 256:
                raise _bad("BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands[self._commands_key(params)] = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    def _get_my_commands(self, params: dict[str, Any]) -> list[dict[str, str]]:
        return self.commands.get(self._commands_key(params), [])

    def _delete_my_commands(self, params: dict[str, Any]) -> bool:
        self.commands.pop(self._commands_key(params), None)
        return True

    def _get_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        return {
            **chat.to_api(),
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }

    def _member(self, chat: FakeChat, user: dict[str, Any]) -> dict[str, Any]:
        if user["id"] == self.bot_user["id"]:
            status = chat.bot_status
        elif chat.owner is not None and user["id"] == chat.owner["id"]:
            return {"status": "creator", "user": user, "is_anonymous": False}
        elif (chat.type == "private" and user["id"] == chat.id) or any(
            m["id"] == user["id"] for m in chat.members
        ):
            status = "member"
        else:
            status = "left"
        if status == "administrator":
            return {
                "status": "administrator",
                "user": user,
                "can_be_edited": False,
                "is_anonymous": False,
                "can_manage_chat": True,
                "can_delete_messages": chat.can_delete_messages,
                "can_manage_video_chats": False,
                "can_restrict_members": False,
                "can_promote_members": False,
                "can_change_info": False,
                "can_invite_users": True,
                "can_post_stories": False,
                "can_edit_stories": False,
                "can_delete_stories": False,
                "can_pin_messages": True,
                "can_manage_topics": chat.can_manage_topics,
            }
        if status == "kicked":
            return {"status": "kicked", "user": user, "until_date": 0}
        return {"status": status, "user": user}

    def _get_chat_member(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat(params)
        user_id = self._int(params, "user_id")
        if user_id == self.bot_user["id"]:
            user = self.bot_user
        elif user_id in self.users:
            user = self.users[user_id]
        else:
            raise _bad("user not found")
        return self._member(chat, user)

    def _get_chat_administrators(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        chat = self._chat(params)
        if chat.type == "private":
            raise _bad("there are no administrators in the private chat")
        admins = []
        if chat.owner is not None:
            admins.append(self._member(chat, chat.owner))
        if chat.bot_is_admin:
            admins.append(self._member(chat, self.bot_user))
        return admins

    def _send_chat_action(self, params: dict[str, Any]) -> bool:
        chat = self._writable_chat(params)
        self._topic(chat, self._int(params, "message_thread_id"))
        return True

    def _create_forum_topic(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._writable_chat(params)
        if not self._supports_topics(chat):
            raise _bad("the chat is not a forum")
        if not self._may_manage_topics(chat):
            raise _bad("not enough rights to create a topic")
        name = str(params.get("name") or "")
        self._check_topic_name(name)
        color = self._int(params, "icon_color", ICON_COLORS[0])
        if color not in ICON_COLORS:
            raise ApiError(400, _FAKE_WORDING["icon_color"])
        emoji = params.get("icon_custom_emoji_id") or None
        self._admit("createForumTopic", chat)
        thread = next(self._next_message_id[chat.id])
        topic = FakeTopic(chat.id, thread, name, int(color or 0), emoji)
        self._topics[chat.id][thread] = topic
        created: dict[str, Any] = {"name": name, "icon_color": topic.icon_color}
        if emoji:
            created["icon_custom_emoji_id"] = emoji
        self._store(
            chat,
            thread,
            self.bot_user,
            from_bot=True,
            text="",
            entities=[],
            html=None,
            markup=None,
            service={"forum_topic_created": created},
            message_id=thread,
        )
        return topic.to_api()

    def _check_topic_name(self, name: str) -> None:
        if not name:
            raise ApiError(400, _FAKE_WORDING["topic_name_empty"])
        if len(name) > self.limits.topic_name:
            raise ApiError(400, _FAKE_WORDING["topic_name_long"].format(n=self.limits.topic_name))

    def _check_manage(self, chat: FakeChat, topic: FakeTopic) -> None:
        if not (self._may_manage_topics(chat) or topic.created_by_bot):
            raise ApiError(400, _FAKE_WORDING["manage_topics"])

    def _edit_forum_topic(self, params: dict[str, Any]) -> bool:
        chat, topic = self._existing_topic(params)
        self._check_manage(chat, topic)
        name = params.get("name")
        emoji = params.get("icon_custom_emoji_id")
        if name is not None:
            self._check_topic_name(str(name))
        if (name is None or name == topic.name) and (
            emoji is None or (emoji or None) == topic.icon_custom_emoji_id
        ):
            raise _bad("TOPIC_NOT_MODIFIED")
        self._admit("editForumTopic", chat)
        if name is not None and name != topic.name:
            topic.name = str(name)
            topic.renames.append((topic.name, self.clock()))
        if emoji is not None:
            topic.icon_custom_emoji_id = emoji or None
        return True

    def _close_forum_topic(self, params: dict[str, Any]) -> bool:
        chat, topic = self._existing_topic(params)
        self._check_manage(chat, topic)
        if topic.closed:
            raise _bad("TOPIC_NOT_MODIFIED")
        self._admit("closeForumTopic", chat)
        topic.closed = True
        return True

    def _reopen_forum_topic(self, params: dict[str, Any]) -> bool:
        chat, topic = self._existing_topic(params)
        self._check_manage(chat, topic)
        if not topic.closed:
            raise _bad("TOPIC_NOT_MODIFIED")
        self._admit("reopenForumTopic", chat)
        topic.closed = False
        return True

    def _delete_forum_topic(self, params: dict[str, Any]) -> bool:
        chat, topic = self._existing_topic(params)
        if chat.type != "private" and not (chat.bot_is_admin and chat.can_delete_messages):
            raise _bad("not enough rights to delete a topic")
        topic.deleted = True
        for message in self._messages[chat.id].values():
            if message.message_thread_id == topic.message_thread_id:
                message.deleted = True
        return True

    def _send_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat = self._writable_chat(params)
        text, entities, html = self._text(params)
        thread = self._int(params, "message_thread_id")
        reply = self._json(params, "reply_parameters") or {}
        reply_to = reply.get("message_id") if isinstance(reply, dict) else None
        if reply_to is None:
            reply_to = self._int(params, "reply_to_message_id")
        tolerate = bool(
            reply.get("allow_sending_without_reply") if isinstance(reply, dict) else False
        ) or self._bool(params, "allow_sending_without_reply")
        if reply_to is not None:
            replied = self._messages[chat.id].get(int(reply_to))
            if replied is None or replied.deleted:
                if not tolerate:
                    raise _bad("message to be replied not found")
                reply_to = None
            elif thread is None:
                thread = replied.message_thread_id
        topic = self._topic(chat, thread)
        if topic is not None and topic.closed and not self._may_manage_topics(chat):
            raise _bad("TOPIC_CLOSED")
        markup = self._markup(params)
        self._admit("sendMessage", chat)
        message = self._store(
            chat,
            thread,
            self.bot_user,
            from_bot=True,
            text=text,
            entities=entities,
            html=html,
            markup=markup,
            reply_to=int(reply_to) if reply_to is not None else None,
        )
        return self._message_to_api(message)

    def _editable(self, params: dict[str, Any]) -> tuple[FakeChat, FakeMessage]:
        if params.get("inline_message_id"):
            raise _bad("MESSAGE_ID_INVALID")
        chat = self._writable_chat(params)
        message = self._bot_message(
            chat, self._int(params, "message_id"), "message to edit not found"
        )
        if not message.from_bot or message.service is not None:
            raise _bad("message can't be edited")
        return chat, message

    def _apply_edit(
        self,
        method: str,
        chat: FakeChat,
        message: FakeMessage,
        text: str,
        entities: list[dict[str, Any]],
        html: str | None,
        markup: dict[str, Any] | None,
    ) -> dict[str, Any]:
        def canonical(ents: list[dict[str, Any]]) -> list[str]:
            return sorted(json.dumps(e, sort_keys=True) for e in ents)

        if (
            text == message.text
            and canonical(entities) == canonical(message.entities)
            and markup == message.reply_markup
        ):
            raise ApiError(400, NOT_MODIFIED)
        self._admit(method, chat)
        message.edits.append(
            MessageVersion(
                message.text, message.html, message.entities, message.reply_markup, self.clock()
            )
        )
        message.text, message.entities, message.html = text, entities, html
        message.reply_markup = markup
        message.edit_date = int(time.time())
        return self._message_to_api(message)

    def _edit_message_text(self, params: dict[str, Any]) -> dict[str, Any]:
        chat, message = self._editable(params)
        text, entities, html = self._text(params)
        markup = self._markup(params)  # absent: the inline keyboard goes away
        return self._apply_edit("editMessageText", chat, message, text, entities, html, markup)

    def _edit_message_reply_markup(self, params: dict[str, Any]) -> dict[str, Any]:
        chat, message = self._editable(params)
        markup = self._markup(params)
        return self._apply_edit(
            "editMessageReplyMarkup",
            chat,
            message,
            message.text,
            message.entities,
            message.html,
            markup,
        )

    def _delete_message(self, params: dict[str, Any]) -> bool:
        chat = self._writable_chat(params)
        message = self._bot_message(
            chat, self._int(params, "message_id"), "message to delete not found"
        )
        if not message.from_bot and not (chat.bot_is_admin and chat.can_delete_messages):
            raise _bad("message can't be deleted")
        message.deleted = True
        return True

    def _answer_callback_query(self, params: dict[str, Any]) -> bool:
        query_id = str(params.get("callback_query_id") or "")
        query = self.pressed.get(query_id)
        now = self.clock()
        deadline = self.limits.answer_deadline
        if (
            query is None
            or query.answered_at is not None
            or (deadline is not None and now - query.time > deadline)
        ):
            raise ApiError(400, QUERY_TOO_OLD)
        text = params.get("text")
        if text is not None and utf16_len(str(text)) > self.limits.answer_text:
            raise _bad("MESSAGE_TOO_LONG")
        query.answered_at = now
        self.answers.append(
            CallbackAnswer(
                query_id=query_id,
                text=str(text) if text is not None else None,
                show_alert=self._bool(params, "show_alert"),
                url=params.get("url"),
                cache_time=self._int(params, "cache_time"),
                time=now,
                pressed_at=query.time,
            )
        )
        return True


__all__ = [
    "ALICE",
    "BOB",
    "BOT_ID",
    "BOT_USERNAME",
    "DEFAULT_TOKEN",
    "FORUM_ID",
    "GROUP_ID",
    "NOT_MODIFIED",
    "PRIVATE_ID",
    "QUERY_TOO_OLD",
    "SUPERGROUP_ID",
    "Call",
    "CallbackAnswer",
    "FakeBotApi",
    "FakeChat",
    "FakeMessage",
    "FakeTopic",
    "HtmlParseError",
    "Limits",
    "ManualClock",
    "MessageVersion",
    "PressedButton",
    "Violation",
    "Window",
    "default_chats",
    "finish_text",
    "parse_html",
    "utf16_len",
]
