"""A fake Discord for tests: REST and gateway on loopback, the real wire format, real limits.

Point the real discord.py at it and drive it with the real client::

    async with FakeDiscord() as fake:
        with point_discord_py(fake):
            client = discord.Client(intents=INTENTS, guild_ready_timeout=0.05)
            await client.login(DEFAULT_TOKEN)
            runner = asyncio.create_task(client.connect(reconnect=False))
            await client.wait_until_ready()
            text = client.get_channel(TEXT_CHANNEL_ID)
            thread = await text.create_thread(name="s1", type=discord.ChannelType.public_thread)
            card = await thread.send("Run the tests?", view=MyView())
            fake.press(card.id, "allow", ALICE)
            ...
            await client.close()
            await runner
        assert fake.violations == []

`point_discord_py(fake)` sets `discord.http.Route.BASE` (REST, interaction callbacks and
webhooks all read it) and `DiscordWebSocket.DEFAULT_GATEWAY` for the block and restores them.

The server is uvicorn inside the test's own event loop (like the fake Telegram Bot API next
door), so a test may read and change the fake's state between awaits without locks. REST is
under `/api/v10`, answering JSON with `Content-Type: application/json` exactly (discord.py
treats anything else as text); the gateway is `/gateway`, plain text JSON frames: HELLO (op 10),
IDENTIFY (op 2) -> READY + GUILD_CREATE, heartbeats (op 1 -> op 11, after `heartbeat_rtt`: a
round trip to Discord's gateway), RESUME (op 6) of a known
session replays what it missed, an unknown one gets INVALID_SESSION. REST changes are dispatched
to every identified session its intents allow (MESSAGE_CREATE/UPDATE/DELETE, THREAD_CREATE/
UPDATE), including the bot's own messages, as Discord does; without the privileged
MESSAGE_CONTENT intent other users' messages arrive with empty content, embeds and components.

What it enforces (defaults are Discord's, change them with `Limits`; `Limits.loose()` keeps
every size limit and drops the rate limits):

- Rate limits, fixed windows as Discord's buckets are: a bucket per route and major parameter
  (`Limits.buckets`: 5 messages per 5 s per channel, ...), announced with `X-RateLimit-*`
  headers on every answer of that route (`Limits.rate_headers=False` hides them, like a shared
  or undisclosed limit, so a client can only learn it from 429s); the unannounced 2 renames per
  10 minutes of a channel or thread (`Limits.renames`); a global 50 requests a second for the
  bot token (interaction callbacks and interaction webhooks are exempt, as on Discord). Over a
  limit: 429, `{"message": "You are being rate limited.", "retry_after": <float>, "global":
  <bool>}`, `Retry-After`, `X-RateLimit-*` and `Via` headers (discord.py treats a 429 without
  `Via` as a Cloudflare ban and does not retry).
- Messages: content <= 2000 characters, not empty, <= 10 embeds (title 256, description
  4096, <= 25 fields, field name 256 / value 1024, footer 2048, author 256, all of them
  together <= 6000, a colour 0-16777215; an edit is checked as a send is), components
  (<= 5 action rows, <= 5 buttons a row, a select alone in its row, `custom_id` 1-100 and
  unique in the message, label <= 80, select options 1-25), a `message_reference` to an
  existing message. Breaking one is a 400 with Discord's error JSON
  (code 50035 "Invalid Form Body" with the `errors` tree, or 50006 for an empty message).
- Threads: public (type 11) or private (no type, as Discord does) in a text channel, a post
  with its first message in a forum (the starter message has the thread's id), names 1-100;
  a message to an archived thread unarchives it unless locked; editing a message in an
  archived thread is 400 "Thread is archived" (50083).
- Interactions: answered once (40060 "Interaction has already been acknowledged." on the
  second answer) within `Limits.interaction_deadline` (3 s; later: 404 "Unknown interaction",
  10062); the token lasts 15 minutes for follow-ups and `@original`. The first follow-up after
  a deferred (type 5) answer fills the loading message, as Discord does.
- Permissions of the bot in the channel (roles and overwrites; `set_role_permissions`,
  `set_overwrite`): 403 "Missing Permissions" (50013) or "Missing Access" (50001).
- Direct messages: `POST /users/@me/channels` `{"recipient_id"}` opens (or returns the same)
  DM channel (type 1) with a user Discord knows (`users`; another id: 400 "Invalid
  Recipient(s)", 50033); a message there is 403 "Cannot send messages to this user" (50007)
  when the person shares no server with the bot (`remove_member`) or does not take DMs from
  it (`close_dms`: they turned off DMs from server members, or blocked the bot). DM messages
  reach the gateway only with the DIRECT_MESSAGES intent, without a guild, as on Discord.
- The privileged intents the application may use (`privileged_intents`): identifying with
  another one closes the gateway with 4014, a wrong token with 4004.

Rate limits are checked before the body, so a refused request still uses its slot, as on
Discord. `allowed_mentions` (absent: everything allowed) decides who a message notifies
(`FakeMessage.pings`: "user:ID", "role:ID", "everyone", "here"); the bot may mention everyone.
GUILD_CREATE carries the guild's members only with the GUILD_MEMBERS intent (else just the
bot, as on Discord); members are always in interactions, messages and `GET .../members/{id}`.

Every 400 for a limit, every 429 and every interaction answered late or never is a
`Violation` in `fake.violations` (and `fake.violation_counts[kind]`), so a test can assert that
a well-behaved channel caused none. Injected failures (`fail_next`) are not violations.

Error texts are Discord's where known; the ones this fake had to invent say "(fake)".

Inspection: `calls`, `calls_to()`, `channel()`, `threads()`, `messages()`, `message()`,
`dm_channel()`, `dms()`,
`ephemeral()`, `interactions`, `interaction()`, `responses`, `unanswered()`, `commands()`,
`sessions`, `connected`, `heartbeats`, `gateway_closes`, `violations`, `violation_counts`.
Injection: `press()` (a button or a select; `seen=` one a client still shows after an edit
took it away), `submit_modal()`, `slash()`, `say()`,
`fail_next()`, `set_role_permissions()`, `set_overwrite()`, `add_member()`,
`remove_member()`, `close_dms()`, `reconnect()`,
`join_guild()` (with `FakeDiscord(in_guild=False)`: the bot invited later; `other_guilds` are
more servers it is in, listed and empty). GET `/channels/{id}/messages` pages with `after` and
`before` as Discord does.
Waiting: `wait_until()`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import email.parser
import email.policy
import hashlib
import json
import math
import re
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from aep_bridge.testing import FixedWindow, InLoopServer, ManualClock, Window

# -- well-known ids ------------------------------------------------------------------------

DISCORD_EPOCH_MS = 1420070400000

#: the bot user; its application has the same id, as for every bot made in the portal
BOT_ID = 1000000000000000001
APPLICATION_ID = BOT_ID
DEFAULT_TOKEN = (
    base64.b64encode(str(BOT_ID).encode()).decode().rstrip("=")
    + ".FakeTs.fake-token-for-tests-only-0123456789abcd"
)
BOT_USERNAME = "aep-test-bot"

GUILD_ID = 1000000000000000100
#: a text channel "agents": sessions as public threads
TEXT_CHANNEL_ID = 1000000000000000201
#: a forum channel "agent-sessions": sessions as posts
FORUM_CHANNEL_ID = 1000000000000000202
#: a text channel "notifications"
NOTIFY_CHANNEL_ID = 1000000000000000203

#: the role whose members may answer prompts (put it in the channel's approver roles)
APPROVER_ROLE_ID = 1000000000000000301
#: the bot's own managed role, carrying BOT_PERMISSIONS
BOT_ROLE_ID = 1000000000000000302


def _user(
    user_id: int, username: str, global_name: str | None, *, bot: bool = False
) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": str(user_id),
        "username": username,
        "discriminator": "0",
        "global_name": global_name,
        "avatar": None,
        "public_flags": 0,
    }
    if bot:
        user["bot"] = True
    return user


#: the guild owner, an approver
ALICE: dict[str, Any] = _user(1000000000000000401, "alice", "Alice")
#: an approver
BOB: dict[str, Any] = _user(1000000000000000402, "bob", "Bob")
#: a member without the approver role
MALLORY: dict[str, Any] = _user(1000000000000000403, "mallory", "Mallory")

# permission bits (Discord's)
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
MANAGE_MESSAGES = 1 << 13
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
MENTION_EVERYONE = 1 << 17
ADD_REACTIONS = 1 << 6
ADMINISTRATOR = 1 << 3
USE_APPLICATION_COMMANDS = 1 << 31
MANAGE_THREADS = 1 << 34
CREATE_PUBLIC_THREADS = 1 << 35
CREATE_PRIVATE_THREADS = 1 << 36
SEND_MESSAGES_IN_THREADS = 1 << 38
ALL_PERMISSIONS = (1 << 51) - 1

#: what @everyone may do in the fake guild
EVERYONE_PERMISSIONS = (
    VIEW_CHANNEL
    | SEND_MESSAGES
    | READ_MESSAGE_HISTORY
    | ADD_REACTIONS
    | EMBED_LINKS
    | ATTACH_FILES
    | USE_APPLICATION_COMMANDS
    | CREATE_PUBLIC_THREADS
    | SEND_MESSAGES_IN_THREADS
)
#: the bot role's permissions: what a session-mirroring bot needs, and MENTION_EVERYONE so an
#: unescaped @everyone in agent text really pings (tests see it in `FakeMessage.pings`)
BOT_PERMISSIONS = (
    EVERYONE_PERMISSIONS
    | CREATE_PRIVATE_THREADS
    | MANAGE_THREADS
    | MANAGE_MESSAGES
    | MENTION_EVERYONE
)

# intents (Discord's bits)
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_PRESENCES = 1 << 8
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = {
    "members": INTENT_GUILD_MEMBERS,
    "presences": INTENT_GUILD_PRESENCES,
    "message_content": INTENT_MESSAGE_CONTENT,
}
#: application flags for the privileged intents of an unverified bot ("limited" variants)
_INTENT_APP_FLAGS = {"presences": 1 << 13, "members": 1 << 15, "message_content": 1 << 19}

# channel and message types
GUILD_TEXT = 0
DM_CHANNEL = 1
GUILD_CATEGORY = 4
PUBLIC_THREAD = 11
PRIVATE_THREAD = 12
GUILD_FORUM = 15
THREAD_TYPES = (PUBLIC_THREAD, PRIVATE_THREAD)

EPHEMERAL = 1 << 6
LOADING = 1 << 7
IS_COMPONENTS_V2 = 1 << 15

ARCHIVE_DURATIONS = (60, 1440, 4320, 10080)

#: interaction callback types this fake answers
CALLBACK_TYPES = {4, 5, 6, 7, 9}

#: error texts whose real wording is unknown: the fake's own (see the module docstring)
_FAKE_WORDING = {
    "row_type": "Top-level components must be action rows (fake)",
    "select_alone": "A select menu must be alone in its action row (fake)",
    "component_type": "Component type {t} is not supported by this fake (fake)",
    "callback_type": "Interaction callback type {t} is not supported by this fake (fake)",
    "callback_kind": "Callback type {t} is not valid for this interaction (fake)",
    "not_acknowledged": "The interaction has not been acknowledged yet (fake)",
    "rename": "You are being rate limited. (fake: 2 renames per 10 minutes per channel)",
}


# -- limits ---------------------------------------------------------------------------------


#: per-route buckets (route key "METHOD /template"), each per major parameter (channel, guild,
#: webhook); Discord does not document them, these are what it announces in its headers
DEFAULT_BUCKETS: Mapping[str, Window] = {
    "POST /channels/{channel_id}/messages": Window(5, 5.0),
    "PATCH /channels/{channel_id}/messages/{message_id}": Window(5, 5.0),
    "DELETE /channels/{channel_id}/messages/{message_id}": Window(5, 1.0),
    "POST /channels/{channel_id}/threads": Window(10, 10.0),
    "POST /channels/{channel_id}/messages/{message_id}/threads": Window(10, 10.0),
    "PATCH /channels/{channel_id}": Window(5, 15.0),
    "POST /webhooks/{application_id}/{token}": Window(5, 5.0),
    "PATCH /webhooks/{application_id}/{token}/messages/{message_id}": Window(5, 5.0),
}


@dataclass(frozen=True)
class Limits:
    """What the fake enforces; the defaults are Discord's (`Limits.strict()`)."""

    buckets: Mapping[str, Window] = field(default_factory=lambda: dict(DEFAULT_BUCKETS))
    #: renames (name or topic changes) of one channel or thread; not in any header
    renames: Window | None = Window(2, 600.0)
    global_: Window | None = Window(50, 1.0)
    #: send X-RateLimit-* headers on answers that were not 429s
    rate_headers: bool = True

    content_length: int = 2000
    embeds_per_message: int = 10
    embed_total: int = 6000
    embed_title: int = 256
    embed_description: int = 4096
    embed_fields: int = 25
    field_name: int = 256
    field_value: int = 1024
    footer_text: int = 2048
    author_name: int = 256
    action_rows: int = 5
    row_buttons: int = 5
    custom_id: int = 100
    button_label: int = 80
    select_options: int = 25
    select_placeholder: int = 150
    option_text: int = 100
    modal_title: int = 45
    text_input_label: int = 45
    thread_name: int = 100
    commands_per_scope: int = 100
    #: seconds after an interaction within which it must be answered; None: forever
    interaction_deadline: float | None = 3.0
    #: seconds an interaction token works for follow-ups and @original
    token_lifetime: float = 900.0

    @classmethod
    def strict(cls, **changes: Any) -> Limits:
        """Discord's limits, rate limits included."""
        return cls(**changes)

    @classmethod
    def loose(cls, **changes: Any) -> Limits:
        """Every size and interaction limit, but no rate limit."""
        return cls(**{"buckets": {}, "renames": None, "global_": None, **changes})


@dataclass(frozen=True)
class Violation:
    """A request refused because it broke one of Discord's limits, or an interaction left
    unanswered past its deadline."""

    #: rate_limit | rename_limit | global_rate_limit | invalid_form | empty_message |
    #: interaction_late | interaction_unanswered | interaction_answered_twice
    kind: str
    method: str
    path: str
    time: float
    detail: str = ""
    retry_after: float | None = None


# -- state ----------------------------------------------------------------------------------


def _iso(moment: dt.datetime | None = None) -> str:
    return (moment or dt.datetime.now(dt.UTC)).isoformat()


@dataclass
class FakeRole:
    id: int
    name: str
    permissions: int
    position: int = 0
    managed: bool = False

    def to_api(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "name": self.name,
            "color": 0,
            "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
            "hoist": False,
            "icon": None,
            "unicode_emoji": None,
            "position": self.position,
            "permissions": str(self.permissions),
            "managed": self.managed,
            "mentionable": False,
            "flags": 0,
            **({"tags": {"bot_id": str(BOT_ID)}} if self.managed else {}),
        }


@dataclass
class FakeMember:
    user: dict[str, Any]
    roles: list[int] = field(default_factory=list)
    nick: str | None = None
    joined_at: str = field(default_factory=_iso)

    @property
    def id(self) -> int:
        return int(self.user["id"])

    def to_api(self, *, with_user: bool = True) -> dict[str, Any]:
        member: dict[str, Any] = {
            "roles": [str(r) for r in self.roles],
            "nick": self.nick,
            "avatar": None,
            "banner": None,
            "joined_at": self.joined_at,
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "pending": False,
            "flags": 0,
            "communication_disabled_until": None,
        }
        if with_user:
            member["user"] = self.user
        return member


@dataclass(frozen=True)
class Overwrite:
    target: int
    kind: int  # 0 role, 1 member
    allow: int
    deny: int

    def to_api(self) -> dict[str, Any]:
        return {
            "id": str(self.target),
            "type": self.kind,
            "allow": str(self.allow),
            "deny": str(self.deny),
        }


@dataclass
class FakeChannel:
    """A guild channel: text (0), forum (15), or a thread (11 public, 12 private); or a
    direct message channel (1) between the bot and `recipient`."""

    id: int
    type: int
    name: str
    parent_id: int | None = None
    position: int = 0
    topic: str | None = None
    overwrites: list[Overwrite] = field(default_factory=list)
    # threads
    owner_id: int | None = None
    archived: bool = False
    locked: bool = False
    invitable: bool = True
    auto_archive_duration: int = 1440
    archive_timestamp: str = field(default_factory=_iso)
    create_timestamp: str = field(default_factory=_iso)
    applied_tags: list[int] = field(default_factory=list)
    message_count: int = 0
    total_message_sent: int = 0
    last_message_id: int | None = None
    time: float = 0.0
    #: (old name, new name, time) of every rename
    renames: list[tuple[str, str, float]] = field(default_factory=list)
    deleted: bool = False
    #: a DM channel's other end (a user object)
    recipient: dict[str, Any] | None = None

    @property
    def is_thread(self) -> bool:
        return self.type in THREAD_TYPES

    def to_api(self) -> dict[str, Any]:
        if self.type == DM_CHANNEL:  # no guild, no name: the person at the other end
            return {
                "id": str(self.id),
                "type": DM_CHANNEL,
                "last_message_id": (
                    None if self.last_message_id is None else str(self.last_message_id)
                ),
                "flags": 0,
                "recipients": [self.recipient],
            }
        channel: dict[str, Any] = {
            "id": str(self.id),
            "type": self.type,
            "guild_id": str(GUILD_ID),
            "name": self.name,
            "parent_id": None if self.parent_id is None else str(self.parent_id),
            "last_message_id": None if self.last_message_id is None else str(self.last_message_id),
            "rate_limit_per_user": 0,
            "flags": 0,
        }
        if self.is_thread:
            channel.update(
                {
                    "owner_id": str(self.owner_id),
                    "message_count": self.message_count,
                    "member_count": 1,
                    "total_message_sent": self.total_message_sent,
                    "applied_tags": [str(t) for t in self.applied_tags],
                    "thread_metadata": {
                        "archived": self.archived,
                        "auto_archive_duration": self.auto_archive_duration,
                        "archive_timestamp": self.archive_timestamp,
                        "locked": self.locked,
                        "create_timestamp": self.create_timestamp,
                        **({"invitable": self.invitable} if self.type == PRIVATE_THREAD else {}),
                    },
                }
            )
            return channel
        channel.update(
            {
                "position": self.position,
                "permission_overwrites": [o.to_api() for o in self.overwrites],
                "nsfw": False,
                "topic": self.topic,
                "default_auto_archive_duration": 1440,
                "default_thread_rate_limit_per_user": 0,
            }
        )
        if self.type == GUILD_FORUM:
            channel.update(
                {
                    "available_tags": [],
                    "default_reaction_emoji": None,
                    "default_sort_order": None,
                    "default_forum_layout": 0,
                }
            )
        return channel


def default_channels() -> list[FakeChannel]:
    """ "agents" (text), "agent-sessions" (forum) and "notifications" (text)."""
    return [
        FakeChannel(TEXT_CHANNEL_ID, GUILD_TEXT, "agents", position=0),
        FakeChannel(FORUM_CHANNEL_ID, GUILD_FORUM, "agent-sessions", position=1),
        FakeChannel(NOTIFY_CHANNEL_ID, GUILD_TEXT, "notifications", position=2),
    ]


@dataclass(frozen=True)
class MessageVersion:
    """One earlier content of an edited message."""

    content: str
    embeds: list[dict[str, Any]]
    components: list[dict[str, Any]]
    flags: int
    time: float


@dataclass
class FakeMessage:
    id: int
    channel_id: int
    author: dict[str, Any]
    content: str
    embeds: list[dict[str, Any]]
    components: list[dict[str, Any]]
    time: float
    timestamp: str
    flags: int = 0
    type: int = 0
    #: the message this one replies to (message_reference.message_id)
    reply_to: int | None = None
    allowed_mentions: dict[str, Any] | None = None
    #: who is notified: "user:ID", "role:ID", "everyone", "here"
    pings: set[str] = field(default_factory=set)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    #: the interaction this message answers (a response or a follow-up)
    interaction_id: int | None = None
    #: the only user who sees it (an ephemeral message)
    ephemeral_to: int | None = None
    edits: list[MessageVersion] = field(default_factory=list)
    edited_timestamp: str | None = None
    deleted: bool = False
    nonce: Any = None

    @property
    def from_bot(self) -> bool:
        return int(self.author["id"]) == BOT_ID

    @property
    def service(self) -> bool:
        """A system message (thread created, ...), not something anyone wrote."""
        return self.type not in (0, 19, 20)

    @property
    def interactive(self) -> list[dict[str, Any]]:
        """Buttons and selects, in order, at any depth."""
        return [c for c in _walk(self.components) if c.get("type") in _INTERACTIVE]

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [c for c in _walk(self.components) if c.get("type") == 2]

    @property
    def custom_ids(self) -> list[str]:
        return [c["custom_id"] for c in self.interactive if "custom_id" in c]

    def component(self, custom_id: str) -> dict[str, Any]:
        for item in self.interactive:
            if item.get("custom_id") == custom_id:
                return item
        raise KeyError(
            f"message {self.id} has no component {custom_id!r}; it has {self.custom_ids}"
        )


_INTERACTIVE = {2, 3, 5, 6, 7, 8}
_SELECTS = {3, 5, 6, 7, 8}


def _walk(components: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every component at any depth (rows, their items, labels' and sections' children)."""
    for item, _ in _walk_paths(components, []):
        yield item


def _walk_paths(
    components: list[dict[str, Any]], path: list[str | int]
) -> Iterator[tuple[dict[str, Any], list[str | int]]]:
    """Every component with its path in the request body, for Discord's error tree."""
    for index, item in enumerate(components):
        if not isinstance(item, dict):
            continue
        where: list[str | int] = [*path, index]
        yield item, where
        yield from _walk_paths(item.get("components") or [], [*where, "components"])
        for key in ("component", "accessory"):
            child = item.get(key)
            if isinstance(child, dict):
                yield child, [*where, key]
                yield from _walk_paths(child.get("components") or [], [*where, key, "components"])


@dataclass(frozen=True)
class _AsSeen:
    """A message's components as a user's client shows an earlier version of it."""

    id: int
    components: list[dict[str, Any]]

    def component(self, custom_id: str) -> dict[str, Any]:
        for item in _walk(self.components):
            if item.get("type") in _INTERACTIVE and item.get("custom_id") == custom_id:
                return item
        raise KeyError(f"message {self.id} never showed a component {custom_id!r}")


@dataclass(frozen=True)
class InteractionResponse:
    """An accepted interaction callback."""

    interaction_id: int
    type: int
    data: dict[str, Any]
    time: float
    latency: float


@dataclass
class FakeInteraction:
    """An INTERACTION_CREATE the fake dispatched (press, select, modal submit, slash)."""

    id: int
    token: str
    type: int  # 2 command, 3 component, 5 modal submit
    user: dict[str, Any]
    channel_id: int
    data: dict[str, Any]
    time: float
    message_id: int | None = None
    #: accepted callbacks (one; Discord refuses a second)
    responses: list[InteractionResponse] = field(default_factory=list)
    #: times of callbacks refused for being late
    late: list[float] = field(default_factory=list)
    #: the message @original names, once answered
    original_id: int | None = None
    #: the modal a type 9 answer opened
    modal: dict[str, Any] | None = None
    followups: list[int] = field(default_factory=list)
    #: sessions the event reached
    delivered: int = 0

    @property
    def acknowledged(self) -> bool:
        return bool(self.responses)

    @property
    def response(self) -> InteractionResponse | None:
        return self.responses[0] if self.responses else None


@dataclass
class Call:
    """One REST request the fake answered, accepted or not."""

    method: str
    path: str
    #: the route template ("/channels/{channel_id}/messages"), None for unknown paths
    route: str | None
    json: Any
    query: dict[str, str]
    time: float
    status: int = 0
    code: int | None = None
    message: str | None = None
    result: Any = None

    @property
    def key(self) -> str:
        return f"{self.method} {self.route}"


@dataclass
class GatewaySession:
    """One gateway session (a connection that identified, and its resumes)."""

    session_id: str
    intents: int
    identify: dict[str, Any]
    time: float
    sequence: int = 0
    #: (seq, frame) of every dispatch, for RESUME
    sent: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    connected: bool = True
    #: closed cleanly by the client (code 1000/1001): Discord does not let it resume
    ended: bool = False
    #: which connection carries the session (a resume makes a new one)
    generation: int = 0
    resumes: int = 0
    heartbeats: int = 0
    outbox: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)

    def wants(self, intent: int) -> bool:
        """Whether the session's intents cover an event (0: an event every session gets)."""
        return intent == 0 or bool(self.intents & intent)


@dataclass
class _Failure:
    status: int
    times: int
    retry_after: float | None
    message: str | None


def _rate_headers(bucket: FixedWindow, now: float) -> dict[str, str]:
    """The X-RateLimit-* headers Discord sends for a bucket."""
    reset_after = bucket.reset_after(now)
    return {
        "X-RateLimit-Limit": str(bucket.window.count),
        "X-RateLimit-Remaining": str(max(0, bucket.window.count - bucket.used)),
        "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
        "X-RateLimit-Reset-After": f"{reset_after:.3f}",
    }


class ApiError(Exception):
    """An error answer: Discord's JSON `{"message", "code"[, "errors"]}` with a status."""

    def __init__(
        self,
        status: int,
        message: str,
        code: int = 0,
        *,
        errors: dict[str, Any] | None = None,
        violation: str | None = None,
        retry_after: float | None = None,
        is_global: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.errors = errors
        self.violation = violation
        self.retry_after = retry_after
        self.is_global = is_global
        self.headers = headers or {}


def _form_error(path: list[str | int], code: str, message: str) -> ApiError:
    """Discord's 400 "Invalid Form Body" (50035) with the error at `path` in the body."""
    tree: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        tree = {str(key): tree}
    return ApiError(400, "Invalid Form Body", 50035, errors=tree, violation="invalid_form")


def _too_long(path: list[str | int], limit: int) -> ApiError:
    return _form_error(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")


def _bad_length(path: list[str | int], low: int, high: int) -> ApiError:
    return _form_error(path, "BASE_TYPE_BAD_LENGTH", f"Must be between {low} and {high} in length.")


def _fake_form(path: list[str | int], text: str) -> ApiError:
    return _form_error(path, "INVALID_FORM_BODY_FAKE", text)


def _missing_access() -> ApiError:
    return ApiError(403, "Missing Access", 50001)


def _missing_permissions() -> ApiError:
    return ApiError(403, "Missing Permissions", 50013)


def _unknown(what: str, code: int) -> ApiError:
    return ApiError(404, f"Unknown {what}", code)


def _snowflake(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


_MENTION = re.compile(r"<@(!|&)?(\d+)>|@(everyone|here)")
_COMMAND_NAME = re.compile(r"^[-_'\w]{1,32}$")


# -- the fake -------------------------------------------------------------------------------


class FakeDiscord(InLoopServer):
    """Discord's REST API and gateway for one bot in one guild, on 127.0.0.1 by `async with`."""

    platform_name = "the fake Discord server"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
        channels: list[FakeChannel] | None = None,
        privileged_intents: frozenset[str] | set[str] = frozenset({"message_content"}),
        heartbeat_interval: float = 41.25,
        heartbeat_rtt: float = 0.1,
        in_guild: bool = True,
    ) -> None:
        self.token = token
        #: whether the bot is in the guild yet (False: invited later, with `join_guild()`)
        self.in_guild = in_guild
        #: other servers the bot is in, as (id, name): listed by GET /users/@me/guilds, with
        #: nothing in them (their other routes answer Unknown Guild)
        self.other_guilds: list[tuple[int, str]] = []
        self.limits = limits or Limits()
        self.clock = clock
        self.privileged_intents = set(privileged_intents)
        self.heartbeat_interval = heartbeat_interval
        #: how long after a heartbeat its ACK is sent. discord.py counts a heartbeat as sent
        #: once the send returns on its keep-alive thread; an ACK read before that (loopback
        #: answers at once, Discord a round trip later) it measures from the heartbeat
        #: before, and warns "Can't keep up ... 41.3s behind"
        self.heartbeat_rtt = heartbeat_rtt
        self.bot_user: dict[str, Any] = {
            **_user(BOT_ID, BOT_USERNAME, "AEP Test Bot", bot=True),
            "verified": True,
            "mfa_enabled": False,
            "flags": 0,
        }
        self.guild_name = "Agents HQ"
        self.owner_id = int(ALICE["id"])
        self.roles: dict[int, FakeRole] = {
            GUILD_ID: FakeRole(GUILD_ID, "@everyone", EVERYONE_PERMISSIONS, 0),
            APPROVER_ROLE_ID: FakeRole(APPROVER_ROLE_ID, "aep-approver", EVERYONE_PERMISSIONS, 1),
            BOT_ROLE_ID: FakeRole(BOT_ROLE_ID, BOT_USERNAME, BOT_PERMISSIONS, 2, managed=True),
        }
        self.members: dict[int, FakeMember] = {}
        for member in (
            FakeMember(self.bot_user, [BOT_ROLE_ID]),
            FakeMember(ALICE, [APPROVER_ROLE_ID]),
            FakeMember(BOB, [APPROVER_ROLE_ID]),
            FakeMember(MALLORY, []),
        ):
            self.members[member.id] = member
        #: every user Discord knows (a DM may be opened with any): members, and those who left
        self.users: dict[int, dict[str, Any]] = {m.id: m.user for m in self.members.values()}
        #: users who take no DM from the bot (`close_dms`)
        self.dms_closed: set[int] = set()
        #: user id -> their DM channel's id
        self._dms: dict[int, int] = {}
        self._channels: dict[int, FakeChannel] = {}
        for channel in default_channels() if channels is None else channels:
            self._channels[channel.id] = channel
        self._messages: dict[int, FakeMessage] = {}
        #: application commands: None (global) or a guild id -> name -> command
        self._commands: dict[int | None, dict[str, dict[str, Any]]] = {None: {}, GUILD_ID: {}}

        #: every REST request, in arrival order
        self.calls: list[Call] = []
        self.violations: list[Violation] = []
        self.violation_counts: Counter[str] = Counter()
        self.interactions: list[FakeInteraction] = []
        #: every gateway session, in identify order
        self.sessions: list[GatewaySession] = []
        #: heartbeats received on any connection (identified or not yet)
        self.heartbeats = 0
        #: close codes the fake sent (4004 bad token, 4014 disallowed intents, ...)
        self.gateway_closes: list[int] = []

        self._ids = 0
        self._buckets: dict[tuple[str, str], FixedWindow] = {}
        self._renames: dict[int, FixedWindow] = {}
        self._global = FixedWindow(self.limits.global_) if self.limits.global_ else None
        self._failures: dict[str, list[_Failure]] = {}
        self._sockets: dict[str, WebSocket] = {}
        self._timers: list[asyncio.TimerHandle] = []
        self._routes = self._route_table()

        super().__init__()
        self.app = Starlette(
            routes=[
                Route(
                    "/api/v10/{path:path}",
                    self._rest,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                ),
                WebSocketRoute("/gateway", self._gateway),
                Route("/{path:path}", self._elsewhere, methods=["GET", "POST", "PUT", "PATCH"]),
            ]
        )

    # -- serving ---------------------------------------------------------------------------

    @property
    def api_base_url(self) -> str:
        """What to give discord.py as `Route.BASE`: `http://127.0.0.1:PORT/api/v10`."""
        return self.url("/api/v10")

    @property
    def gateway_url(self) -> str:
        """What to give discord.py as `DiscordWebSocket.DEFAULT_GATEWAY`."""
        return self.ws_url("/gateway")

    async def closing(self) -> None:
        """Cancel the pending timers and end every gateway session so the server can stop."""
        for timer in self._timers:
            timer.cancel()
        for session in self.sessions:
            session.outbox.put_nowait(None)

    # -- inspection ------------------------------------------------------------------------

    def channel(self, channel_id: int) -> FakeChannel:
        """A channel or thread (deleted ones too); KeyError if it never existed."""
        return self._channels[channel_id]

    def threads(self, channel_id: int, *, archived: bool | None = None) -> list[FakeChannel]:
        """The threads (or forum posts) under a channel, oldest first."""
        return [
            c
            for c in self._channels.values()
            if c.parent_id == channel_id
            and c.is_thread
            and not c.deleted
            and (archived is None or c.archived == archived)
        ]

    def messages(
        self,
        channel_id: int,
        *,
        deleted: bool = False,
        service: bool = False,
        ephemeral: bool = False,
        from_bot: bool | None = None,
    ) -> list[FakeMessage]:
        """Messages in a channel or thread at their latest version (earlier ones in `.edits`),
        oldest first. Deleted, system and ephemeral ones only when asked for."""
        return [
            m
            for m in self._messages.values()
            if m.channel_id == channel_id
            and (deleted or not m.deleted)
            and (service or not m.service)
            and (ephemeral or m.ephemeral_to is None)
            and (from_bot is None or m.from_bot == from_bot)
        ]

    def dm_channel(self, user: dict[str, Any]) -> FakeChannel | None:
        """The DM channel the bot opened with `user`, if it opened one."""
        found = self._dms.get(int(user["id"]))
        return None if found is None else self._channels[found]

    def dms(self, user: dict[str, Any]) -> list[FakeMessage]:
        """The messages the bot sent `user` privately, oldest first."""
        channel = self.dm_channel(user)
        return [] if channel is None else self.messages(channel.id)

    def message(self, message_id: int) -> FakeMessage:
        """One message (deleted ones too); KeyError if it never existed."""
        return self._messages[message_id]

    def ephemeral(self, user: dict[str, Any]) -> list[FakeMessage]:
        """Messages only `user` saw (ephemeral answers), oldest first."""
        return [m for m in self._messages.values() if m.ephemeral_to == int(user["id"])]

    def interaction(self, interaction_id: int) -> FakeInteraction:
        for found in self.interactions:
            if found.id == interaction_id:
                return found
        raise KeyError(interaction_id)

    @property
    def responses(self) -> list[InteractionResponse]:
        """Every accepted interaction callback, in order."""
        return sorted((r for i in self.interactions for r in i.responses), key=lambda r: r.time)

    def unanswered(self) -> list[FakeInteraction]:
        """Interactions not answered within the deadline (the user saw "This interaction
        failed"), as of now on the fake's clock."""
        deadline = self.limits.interaction_deadline
        if deadline is None:
            return []
        now = self.clock()
        return [
            i
            for i in self.interactions
            if (not i.responses and now - i.time > deadline)
            or (i.responses and i.responses[0].time - i.time > deadline)
        ]

    def commands(self, guild_id: int | None = None) -> list[dict[str, Any]]:
        """The application commands registered globally (or in a guild)."""
        return list(self._commands.get(guild_id, {}).values())

    def calls_to(
        self, method: str, route: str | None = None, *, status: int | None = None
    ) -> list[Call]:
        """Calls by method and route template ("/channels/{channel_id}/messages")."""
        return [
            c
            for c in self.calls
            if c.method == method
            and (route is None or c.route == route)
            and (status is None or c.status == status)
        ]

    @property
    def connected(self) -> list[GatewaySession]:
        return [s for s in self.sessions if s.connected]

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

    def add_member(self, user: dict[str, Any], roles: list[int] | None = None) -> FakeMember:
        member = FakeMember(user, list(roles or []))
        self.members[member.id] = member
        self.users[member.id] = user
        return member

    def remove_member(self, user: dict[str, Any]) -> None:
        """`user` leaves the guild: they share no server with the bot, which may not DM them."""
        self.members.pop(int(user["id"]), None)

    def close_dms(self, user: dict[str, Any], closed: bool = True) -> None:
        """`user` takes no DM from the bot (DMs from server members off, or the bot blocked);
        `closed=False` opens them again."""
        if closed:
            self.dms_closed.add(int(user["id"]))
        else:
            self.dms_closed.discard(int(user["id"]))

    def join_guild(self) -> None:
        """The bot is added to the guild (someone opened its invite link): it is listed by
        GET /users/@me/guilds from now on, and connected sessions get GUILD_CREATE."""
        self.in_guild = True
        for session in self.sessions:
            if session.wants(INTENT_GUILDS) and not session.ended:
                self._send(session, "GUILD_CREATE", self._guild_to_api(full=True, session=session))

    def set_role_permissions(self, role_id: int, permissions: int) -> None:
        """Change a role's guild permissions (BOT_ROLE_ID: the bot's own)."""
        self.roles[role_id].permissions = permissions

    def set_overwrite(
        self, channel_id: int, target_id: int, *, allow: int = 0, deny: int = 0
    ) -> None:
        """A channel permission overwrite for a role (or the guild id: @everyone) or member."""
        channel = self._channels[channel_id]
        kind = 0 if target_id in self.roles else 1
        channel.overwrites = [o for o in channel.overwrites if o.target != target_id]
        channel.overwrites.append(Overwrite(target_id, kind, allow, deny))

    def fail_next(
        self,
        route: str,
        status: int = 500,
        *,
        times: int = 1,
        retry_after: float | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next `times` calls to `route` ("POST /channels/{channel_id}/messages",
        or "*" for any) with `status`, doing nothing. A 429 carries `retry_after` (default 1)."""
        if status == 429 and retry_after is None:
            retry_after = 1.0
        self._failures.setdefault(route, []).append(_Failure(status, times, retry_after, message))

    def press(
        self,
        message: FakeMessage | int,
        custom_id: str,
        user: dict[str, Any] | None = None,
        *,
        values: list[str] | None = None,
        seen: int | None = None,
    ) -> FakeInteraction:
        """A user clicks a button (or picks `values` in a select) of a message: dispatch
        INTERACTION_CREATE. The component must be on the message and enabled, the values among
        a string select's options, as Discord's client only lets users do that.
        `seen=i`: the user's client still shows `message.edits[i]` (it has not redrawn the
        edit yet), so a button the edit removed can still be pressed: Discord sends the
        interaction all the same, with the message as it is now."""
        found = self._messages[message] if isinstance(message, int) else message
        found = self._messages[found.id]
        user = user or ALICE
        if found.deleted:
            raise LookupError(f"message {found.id} was deleted")
        if found.ephemeral_to is not None and found.ephemeral_to != int(user["id"]):
            raise LookupError(f"message {found.id} is ephemeral to someone else")
        shown = found if seen is None else _AsSeen(found.id, found.edits[seen].components)
        component = shown.component(custom_id)
        if component.get("disabled"):
            raise ValueError(f"component {custom_id!r} of message {found.id} is disabled")
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": component["type"]}
        if component["type"] in _SELECTS:
            chosen = list(values or [])
            low = component.get("min_values", 1)
            high = component.get("max_values", 1)
            if not low <= len(chosen) <= high:
                raise ValueError(f"select {custom_id!r} takes {low}-{high} values, not {chosen}")
            if component["type"] == 3:
                offered = [o["value"] for o in component.get("options", [])]
                if any(v not in offered for v in chosen):
                    raise ValueError(f"values {chosen} are not all among {offered}")
            data["values"] = chosen
        elif values is not None:
            raise ValueError(f"component {custom_id!r} is a button: no values")
        return self._interact(3, user, found.channel_id, data, message=found)

    def submit_modal(
        self,
        opened_by: FakeInteraction | int,
        values: Mapping[str, str | list[str]],
        user: dict[str, Any] | None = None,
    ) -> FakeInteraction:
        """A user fills in and submits the modal the bot opened in answer to `opened_by`:
        `values` maps each text input's (or select's) custom_id to its value."""
        opener = self.interaction(opened_by) if isinstance(opened_by, int) else opened_by
        if opener.modal is None:
            raise LookupError(f"interaction {opener.id} was not answered with a modal")
        modal = opener.modal
        unknown = set(values) - {c.get("custom_id") for c in _walk(modal.get("components", []))}
        if unknown:
            raise ValueError(f"the modal has no inputs {sorted(unknown)}")

        def fill(item: dict[str, Any]) -> dict[str, Any]:
            kind = item.get("type")
            out: dict[str, Any] = {"type": kind}
            if "id" in item:
                out["id"] = item["id"]
            if kind == 4:
                value = values.get(item["custom_id"], item.get("value") or "")
                if not isinstance(value, str):
                    raise ValueError(f"text input {item['custom_id']!r} takes a string")
                if item.get("required", True) and not value:
                    raise ValueError(f"text input {item['custom_id']!r} is required")
                low, high = item.get("min_length", 0), item.get("max_length", 4000)
                if value and not low <= len(value) <= high:
                    raise ValueError(f"text input {item['custom_id']!r} takes {low}-{high} chars")
                out.update(custom_id=item["custom_id"], value=value)
            elif kind in _SELECTS:
                chosen = values.get(item["custom_id"], [])
                out.update(custom_id=item["custom_id"], values=list(chosen))
            if "components" in item:
                out["components"] = [fill(c) for c in item["components"]]
            if isinstance(item.get("component"), dict):
                out["component"] = fill(item["component"])
            return out

        data = {
            "custom_id": modal["custom_id"],
            "components": [fill(c) for c in modal.get("components", [])],
        }
        message = self._messages.get(opener.message_id) if opener.message_id else None
        return self._interact(5, user or opener.user, opener.channel_id, data, message=message)

    def slash(
        self,
        name: str,
        options: Mapping[str, Any] | None = None,
        user: dict[str, Any] | None = None,
        channel: int = TEXT_CHANNEL_ID,
    ) -> FakeInteraction:
        """A user runs a registered slash command (guild commands first, then global) with
        `options` {name: value} (string, integer, boolean and number options)."""
        command = self._commands[GUILD_ID].get(name) or self._commands[None].get(name)
        if command is None or command.get("type", 1) != 1:
            raise LookupError(f"no slash command {name!r} is registered")
        declared = {o["name"]: o for o in command.get("options", [])}
        sent = []
        for key, value in (options or {}).items():
            if key not in declared:
                raise ValueError(f"/{name} has no option {key!r}")
            sent.append({"name": key, "type": declared[key]["type"], "value": value})
        missing = [o for o, d in declared.items() if d.get("required") and o not in (options or {})]
        if missing:
            raise ValueError(f"/{name} requires {missing}")
        data: dict[str, Any] = {"id": command["id"], "name": name, "type": 1}
        if sent:
            data["options"] = sent
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        return self._interact(2, user or ALICE, channel, data)

    def say(
        self,
        channel: int,
        text: str,
        user: dict[str, Any] | None = None,
        *,
        reply_to: FakeMessage | int | None = None,
    ) -> FakeMessage:
        """A user writes `text` in a channel or thread (replying to a message): store it and
        dispatch MESSAGE_CREATE. Writing in an archived, unlocked thread unarchives it."""
        user = user or ALICE
        target = self._channels[channel]
        if target.is_thread and target.archived:
            if target.locked:
                raise PermissionError(f"thread {channel} is locked")
            self._set_archived(target, False)
        reply_id = reply_to.id if isinstance(reply_to, FakeMessage) else reply_to
        if reply_id is not None and reply_id not in self._messages:
            raise LookupError(f"no message {reply_id} to reply to")
        message = self._store(
            channel,
            user,
            content=text,
            embeds=[],
            components=[],
            reply_to=reply_id,
            allowed_mentions=None,
        )
        self._dispatch_message("MESSAGE_CREATE", message)
        return message

    def reconnect(self) -> None:
        """Ask every connected client to reconnect (op 7); they resume their sessions."""
        for session in self.connected:
            session.outbox.put_nowait({"op": 7, "d": None})

    # -- plumbing --------------------------------------------------------------------------

    def _snowflake(self) -> int:
        """A new id from the current time, as Discord makes them (always increasing)."""
        now_ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        self._ids = max(self._ids + 1, now_ms << 22)
        return self._ids

    def _violate(
        self, kind: str, method: str, path: str, detail: str = "", retry_after: float | None = None
    ) -> None:
        self.violations.append(Violation(kind, method, path, self.clock(), detail, retry_after))
        self.violation_counts[kind] += 1

    def _member(self, user: dict[str, Any]) -> FakeMember:
        member = self.members.get(int(user["id"]))
        return member if member is not None else FakeMember(user)

    def _permissions(self, user_id: int, channel: FakeChannel | None) -> int:
        """Discord's permission computation: base from roles, then channel overwrites."""
        if user_id == self.owner_id:
            return ALL_PERMISSIONS
        member = self.members.get(user_id)
        if member is None:
            return 0
        base = self.roles[GUILD_ID].permissions
        for role in member.roles:
            if role in self.roles:
                base |= self.roles[role].permissions
        if base & ADMINISTRATOR:
            return ALL_PERMISSIONS
        if channel is not None and channel.is_thread and channel.parent_id is not None:
            channel = self._channels.get(channel.parent_id)
        if channel is None:
            return base
        overwrites = {o.target: o for o in channel.overwrites}
        everyone = overwrites.get(GUILD_ID)
        if everyone is not None:
            base = (base & ~everyone.deny) | everyone.allow
        allow = deny = 0
        for role in member.roles:
            found = overwrites.get(role)
            if found is not None:
                allow |= found.allow
                deny |= found.deny
        base = (base & ~deny) | allow
        own = overwrites.get(user_id)
        if own is not None:
            base = (base & ~own.deny) | own.allow
        return base if base & VIEW_CHANNEL else 0

    def _require(self, channel: FakeChannel, *needed: int) -> None:
        if channel.type == DM_CHANNEL:
            return  # no roles in a DM: whether the bot may write there is `_writable`'s
        have = self._permissions(BOT_ID, channel)
        if not have & VIEW_CHANNEL:
            raise _missing_access()
        for permission in needed:
            if not have & permission:
                raise _missing_permissions()

    def _store(
        self,
        channel_id: int,
        author: dict[str, Any],
        *,
        content: str,
        embeds: list[dict[str, Any]],
        components: list[dict[str, Any]],
        reply_to: int | None,
        allowed_mentions: dict[str, Any] | None,
        flags: int = 0,
        message_type: int | None = None,
        message_id: int | None = None,
        interaction_id: int | None = None,
        ephemeral_to: int | None = None,
        nonce: Any = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> FakeMessage:
        message = FakeMessage(
            id=message_id or self._snowflake(),
            channel_id=channel_id,
            author=author,
            content=content,
            embeds=[{"type": "rich", **e} for e in embeds],
            components=components,
            time=self.clock(),
            timestamp=_iso(),
            flags=flags,
            type=message_type if message_type is not None else (19 if reply_to else 0),
            reply_to=reply_to,
            allowed_mentions=allowed_mentions,
            interaction_id=interaction_id,
            ephemeral_to=ephemeral_to,
            nonce=nonce,
            attachments=attachments or [],
        )
        message.pings = self._pings(message)
        self._messages[message.id] = message
        channel = self._channels.get(channel_id)
        if channel is not None and ephemeral_to is None:
            channel.last_message_id = message.id
            if channel.is_thread and not message.service:
                channel.message_count += 1
                channel.total_message_sent += 1
        return message

    def _pings(self, message: FakeMessage) -> set[str]:
        """Who the message notifies, after allowed_mentions (absent: everything allowed)."""
        allowed = message.allowed_mentions
        parse = {"users", "roles", "everyone"} if allowed is None else set(allowed.get("parse", []))
        users = {str(u) for u in (allowed or {}).get("users", [])}
        roles = {str(r) for r in (allowed or {}).get("roles", [])}
        may_everyone = bool(self._permissions(int(message.author["id"]), None) & MENTION_EVERYONE)
        pings: set[str] = set()
        for match in _MENTION.finditer(message.content):
            kind, number, word = match.groups()
            if word:
                if "everyone" in parse and may_everyone:
                    pings.add(word)
            elif kind == "&":
                if "roles" in parse or number in roles:
                    pings.add(f"role:{number}")
            elif "users" in parse or number in users:
                pings.add(f"user:{number}")
        if message.reply_to is not None:
            replied = self._messages.get(message.reply_to)
            if replied is not None and (allowed is None or allowed.get("replied_user", False)):
                pings.add(f"user:{replied.author['id']}")
        return pings

    def _message_to_api(self, message: FakeMessage, *, nested: bool = False) -> dict[str, Any]:
        mentioned = [p.split(":", 1)[1] for p in message.pings if p.startswith("user:")]
        body: dict[str, Any] = {
            "id": str(message.id),
            "channel_id": str(message.channel_id),
            "author": message.author,
            "content": message.content,
            "timestamp": message.timestamp,
            "edited_timestamp": message.edited_timestamp,
            "tts": False,
            "mention_everyone": bool(message.pings & {"everyone", "here"}),
            "mentions": [
                self.members[int(u)].user if int(u) in self.members else {"id": u}
                for u in sorted(mentioned)
            ],
            "mention_roles": sorted(p.split(":", 1)[1] for p in message.pings if "role:" in p),
            "attachments": message.attachments,
            "embeds": message.embeds,
            "components": message.components,
            "pinned": False,
            "type": message.type,
            "flags": message.flags,
        }
        if message.nonce is not None:
            body["nonce"] = message.nonce
        if message.from_bot and message.interaction_id is not None:
            interaction = self.interaction(message.interaction_id)
            body["webhook_id"] = str(APPLICATION_ID)
            body["application_id"] = str(APPLICATION_ID)
            body["interaction_metadata"] = {
                "id": str(interaction.id),
                "type": interaction.type,
                "user": interaction.user,
                "authorizing_integration_owners": {"0": str(GUILD_ID)},
            }
        if message.reply_to is not None:
            body["message_reference"] = {
                "type": 0,
                "message_id": str(message.reply_to),
                "channel_id": str(message.channel_id),
                "guild_id": str(GUILD_ID),
            }
            replied = self._messages.get(message.reply_to)
            if not nested:
                body["referenced_message"] = (
                    None
                    if replied is None or replied.deleted
                    else self._message_to_api(replied, nested=True)
                )
        return body

    # -- gateway ---------------------------------------------------------------------------

    def _guild_to_api(self, *, full: bool, session: GatewaySession | None = None) -> dict[str, Any]:
        guild: dict[str, Any] = {
            "id": str(GUILD_ID),
            "name": self.guild_name,
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": str(self.owner_id),
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 1,
            "explicit_content_filter": 0,
            "roles": [r.to_api() for r in self.roles.values()],
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "application_id": None,
            "system_channel_id": None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "vanity_url_code": None,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "preferred_locale": "en-US",
            "public_updates_channel_id": None,
            "nsfw_level": 0,
            "premium_progress_bar_enabled": False,
        }
        if full:
            with_members = session is not None and session.wants(INTENT_GUILD_MEMBERS)
            members = [m.to_api() for m in self.members.values() if with_members or m.id == BOT_ID]
            guild.update(
                {
                    "unavailable": False,
                    "large": False,
                    "member_count": len(self.members),
                    "joined_at": _iso(),
                    "channels": [
                        c.to_api()
                        for c in self._channels.values()
                        if not c.is_thread and not c.deleted
                    ],
                    "threads": [
                        c.to_api()
                        for c in self._channels.values()
                        if c.is_thread and not c.deleted and not c.archived
                    ],
                    "members": members,
                    "voice_states": [],
                    "presences": [],
                    "stage_instances": [],
                    "guild_scheduled_events": [],
                    "soundboard_sounds": [],
                }
            )
        return guild

    def _send(self, session: GatewaySession, event: str, data: dict[str, Any]) -> None:
        session.sequence += 1
        frame = {"op": 0, "t": event, "s": session.sequence, "d": data}
        session.sent.append((session.sequence, frame))
        del session.sent[:-1000]
        if session.connected:
            session.outbox.put_nowait(frame)

    def _dispatch(self, event: str, data: dict[str, Any], intent: int) -> int:
        """Send an event to every identified session that asked for `intent`; how many."""
        reached = 0
        for session in self.sessions:
            if session.wants(intent) and not session.ended:
                self._send(session, event, data)
                reached += session.connected
        return reached

    def _dispatch_message(self, event: str, message: FakeMessage) -> None:
        if message.ephemeral_to is not None:
            return
        body = self._message_to_api(message)
        channel = self._channels.get(message.channel_id)
        if channel is not None and channel.type == DM_CHANNEL:
            self._dispatch(event, body, INTENT_DIRECT_MESSAGES)
            return
        body["guild_id"] = str(GUILD_ID)
        if int(message.author["id"]) in self.members:
            body["member"] = self._member(message.author).to_api(with_user=False)
        content_visible = message.from_bot or f"user:{BOT_ID}" in message.pings
        for session in self.sessions:
            if not session.wants(INTENT_GUILD_MESSAGES) or session.ended:
                continue
            data = body
            if not content_visible and not session.wants(INTENT_MESSAGE_CONTENT):
                data = {**body, "content": "", "embeds": [], "components": [], "attachments": []}
            self._send(session, event, data)

    def _dispatch_thread(self, event: str, thread: FakeChannel, **extra: Any) -> None:
        self._dispatch(event, {**thread.to_api(), **extra}, INTENT_GUILDS)

    async def _gateway(self, websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(
            json.dumps({"op": 10, "d": {"heartbeat_interval": int(self.heartbeat_interval * 1000)}})
        )
        session: GatewaySession | None = None
        writer: asyncio.Task[None] | None = None
        acks: set[asyncio.Task[None]] = set()
        generation = 0
        try:
            while True:
                try:
                    raw = await websocket.receive_text()
                except WebSocketDisconnect as gone:
                    if session is not None and gone.code in (1000, 1001):
                        session.ended = True  # a clean close ends the session: no resume
                    return
                frame = json.loads(raw)
                op, data = frame.get("op"), frame.get("d")
                if op == 1:
                    self.heartbeats += 1
                    if session is not None:
                        session.heartbeats += 1
                    seq = session.sequence if session is not None else None
                    ack = asyncio.create_task(self._ack(websocket, seq))
                    acks.add(ack)
                    ack.add_done_callback(acks.discard)
                elif op == 2 and session is None:
                    session = await self._identify(websocket, data)
                    if session is None:
                        return
                    generation = session.generation
                    writer = asyncio.create_task(self._write(websocket, session))
                elif op == 6 and session is None:
                    session = self._resume(data)
                    if session is None:
                        await websocket.send_text(json.dumps({"op": 9, "d": False}))
                        continue
                    generation = session.generation
                    writer = asyncio.create_task(self._write(websocket, session))
                elif op in (3, 4, 8):  # presence, voice, member requests: accepted, unused
                    continue
                else:
                    self.gateway_closes.append(4002)
                    await websocket.close(4002, "Error while decoding payload.")
                    return
        finally:
            for pending in list(acks):
                pending.cancel()
            # a resume on a newer connection may have taken the session over already
            if session is not None and session.generation == generation:
                session.connected = False
                session.outbox.put_nowait(None)
            if writer is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer, 2)

    async def _ack(self, websocket: WebSocket, seq: int | None) -> None:
        await asyncio.sleep(self.heartbeat_rtt)
        with contextlib.suppress(Exception):  # the connection closed meanwhile
            await websocket.send_text(json.dumps({"op": 11, "d": seq}))

    async def _identify(self, websocket: WebSocket, data: dict[str, Any]) -> GatewaySession | None:
        if data.get("token") != self.token:
            self.gateway_closes.append(4004)
            await websocket.close(4004, "Authentication failed.")
            return None
        intents = int(data.get("intents", 0))
        for name, bit in PRIVILEGED_INTENTS.items():
            if intents & bit and name not in self.privileged_intents:
                self.gateway_closes.append(4014)
                await websocket.close(4014, "Disallowed intent(s).")
                return None
        session = GatewaySession(secrets.token_hex(16), intents, data, self.clock())
        self.sessions.append(session)
        self._send(
            session,
            "READY",
            {
                "v": 10,
                "user": self.bot_user,
                "guilds": [{"id": str(GUILD_ID), "unavailable": True}] if self.in_guild else [],
                "session_id": session.session_id,
                "resume_gateway_url": self.gateway_url,
                "session_type": "normal",
                "shard": [0, 1],
                "application": {"id": str(APPLICATION_ID), "flags": self._application_flags()},
                "private_channels": [],
                "relationships": [],
                "presences": [],
                "guild_join_requests": [],
                "geo_ordered_rtc_regions": [],
                "user_settings": {},
                "auth": {},
            },
        )
        if session.wants(INTENT_GUILDS) and self.in_guild:
            self._send(session, "GUILD_CREATE", self._guild_to_api(full=True, session=session))
        return session

    def _resume(self, data: dict[str, Any]) -> GatewaySession | None:
        if data.get("token") != self.token:
            return None
        for session in self.sessions:
            if session.session_id == data.get("session_id") and not session.ended:
                if session.connected:  # the old connection is not seen closed yet: drop it
                    session.outbox.put_nowait(None)
                session.connected = True
                session.generation += 1
                session.resumes += 1
                session.outbox = asyncio.Queue()
                seq = int(data.get("seq") or 0)
                for number, frame in session.sent:
                    if number > seq:
                        session.outbox.put_nowait(frame)
                self._send(session, "RESUMED", {})
                return session
        return None

    async def _write(self, websocket: WebSocket, session: GatewaySession) -> None:
        outbox = session.outbox
        while True:
            frame = await outbox.get()
            if frame is None:
                with contextlib.suppress(Exception):
                    await websocket.close(1001)
                return
            try:
                await websocket.send_text(json.dumps(frame))
            except Exception:
                return
            if frame.get("op") == 7:
                with contextlib.suppress(Exception):
                    await websocket.close(4000, "reconnect")
                return

    def _application_flags(self) -> int:
        flags = 0
        for name in self.privileged_intents:
            flags |= _INTENT_APP_FLAGS.get(name, 0)
        return flags

    # -- interactions ----------------------------------------------------------------------

    def _interact(
        self,
        kind: int,
        user: dict[str, Any],
        channel_id: int,
        data: dict[str, Any],
        *,
        message: FakeMessage | None = None,
    ) -> FakeInteraction:
        channel = self._channels[channel_id]
        interaction = FakeInteraction(
            id=self._snowflake(),
            token="aW50ZXJhY3Rpb246" + secrets.token_urlsafe(40),
            type=kind,
            user=user,
            channel_id=channel_id,
            data=data,
            time=self.clock(),
            message_id=message.id if message is not None else None,
        )
        self.interactions.append(interaction)
        member = self._member(user).to_api()
        member["permissions"] = str(self._permissions(int(user["id"]), channel))
        body: dict[str, Any] = {
            "id": str(interaction.id),
            "application_id": str(APPLICATION_ID),
            "type": kind,
            "data": data,
            "guild_id": str(GUILD_ID),
            "guild": {"id": str(GUILD_ID), "locale": "en-US", "features": []},
            "channel_id": str(channel_id),
            "channel": channel.to_api(),
            "member": member,
            "token": interaction.token,
            "version": 1,
            "app_permissions": str(self._permissions(BOT_ID, channel)),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(GUILD_ID)},
            "context": 0,
            "attachment_size_limit": 26214400,
        }
        if message is not None:
            body["message"] = self._message_to_api(message)
        interaction.delivered = self._dispatch("INTERACTION_CREATE", body, 0)
        deadline = self.limits.interaction_deadline
        if deadline is not None:
            with contextlib.suppress(RuntimeError):
                loop = asyncio.get_running_loop()
                self._timers.append(loop.call_later(deadline, self._expire, interaction))
        return interaction

    def _expire(self, interaction: FakeInteraction) -> None:
        if not interaction.responses and not interaction.late:
            self._violate(
                "interaction_unanswered",
                "POST",
                f"/interactions/{interaction.id}/callback",
                f"not answered within {self.limits.interaction_deadline} s",
            )

    # -- REST plumbing ---------------------------------------------------------------------

    def _route_table(self) -> list[tuple[str, str, re.Pattern[str], Callable[..., Any]]]:
        table: list[tuple[str, str, Callable[..., Any]]] = [
            ("GET", "/users/@me", self._get_me),
            ("GET", "/users/@me/guilds", self._my_guilds),
            ("POST", "/users/@me/channels", self._open_dm),
            ("GET", "/oauth2/applications/@me", self._application),
            ("GET", "/applications/@me", self._application),
            ("GET", "/gateway", self._get_gateway),
            ("GET", "/gateway/bot", self._get_gateway_bot),
            ("GET", "/guilds/{guild_id}", self._get_guild),
            ("GET", "/guilds/{guild_id}/channels", self._get_guild_channels),
            ("GET", "/guilds/{guild_id}/roles", self._get_roles),
            ("GET", "/guilds/{guild_id}/threads/active", self._active_threads),
            ("GET", "/guilds/{guild_id}/members/{user_id}", self._get_member),
            ("GET", "/channels/{channel_id}", self._get_channel),
            ("PATCH", "/channels/{channel_id}", self._edit_channel),
            ("POST", "/channels/{channel_id}/threads", self._create_thread),
            ("POST", "/channels/{channel_id}/messages/{message_id}/threads", self._thread_from),
            ("PUT", "/channels/{channel_id}/thread-members/@me", self._no_content),
            ("GET", "/channels/{channel_id}/messages", self._get_messages),
            ("POST", "/channels/{channel_id}/messages", self._post_message),
            ("GET", "/channels/{channel_id}/messages/{message_id}", self._get_message),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self._edit_message),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}", self._delete_message),
            ("POST", "/channels/{channel_id}/typing", self._no_content),
            ("POST", "/interactions/{interaction_id}/{token}/callback", self._callback),
            ("POST", "/webhooks/{application_id}/{token}", self._followup),
            ("GET", "/webhooks/{application_id}/{token}/messages/{message_id}", self._wh_get),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/{message_id}", self._wh_edit),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/{message_id}", self._wh_del),
            ("GET", "/applications/{application_id}/commands", self._get_commands),
            ("PUT", "/applications/{application_id}/commands", self._put_commands),
            ("POST", "/applications/{application_id}/commands", self._post_command),
            (
                "GET",
                "/applications/{application_id}/guilds/{guild_id}/commands",
                self._get_commands,
            ),
            (
                "PUT",
                "/applications/{application_id}/guilds/{guild_id}/commands",
                self._put_commands,
            ),
            (
                "POST",
                "/applications/{application_id}/guilds/{guild_id}/commands",
                self._post_command,
            ),
        ]
        compiled: list[tuple[str, str, re.Pattern[str], Callable[..., Any]]] = []
        for method, template, handler in table:
            pattern = re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
            pattern = re.sub(r"{(\w+)}", r"(?P<\1>[^/]+)", pattern)
            compiled.append((method, template, re.compile(f"^{pattern}$"), handler))
        return compiled

    async def _read_body(self, request: Request) -> tuple[Any, list[dict[str, Any]]]:
        """The JSON body (or a multipart's payload_json) and any uploaded files."""
        body = await request.body()
        if not body:
            return None, []
        content_type = request.headers.get("content-type", "")
        kind = content_type.split(";", 1)[0].strip().lower()
        if kind == "multipart/form-data":
            parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
            )
            payload: Any = None
            files = []
            for part in parsed.iter_parts():
                name = part.get_param("name", header="content-disposition")
                if name == "payload_json":
                    payload = json.loads(part.get_content())
                elif part.get_filename() is not None:
                    content = part.get_content()
                    files.append(
                        {
                            "id": str(self._snowflake()),
                            "filename": part.get_filename(),
                            "size": len(content),
                            "url": f"https://cdn.invalid/{part.get_filename()}",
                            "proxy_url": f"https://cdn.invalid/{part.get_filename()}",
                        }
                    )
            return payload, files
        try:
            return json.loads(body), []
        except ValueError:
            raise ApiError(400, "400: Bad Request", 50109) from None

    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
        headers = {"Via": "1.1 google", **(headers or {})}
        if status == 204:
            return Response(status_code=204, headers=headers)
        return _JsonResponse(body, status, headers)

    async def _elsewhere(self, request: Request) -> Response:
        call = Call(
            request.method, request.url.path, None, None, dict(request.query_params), self.clock()
        )
        self.calls.append(call)
        call.status, call.code, call.message = 404, 0, "404: Not Found"
        return _JsonResponse({"message": "404: Not Found", "code": 0}, 404, {"Via": "1.1 google"})

    async def _rest(self, request: Request) -> Response:
        path = "/" + request.path_params["path"]
        method = request.method
        matched = None
        for route_method, template, pattern, handler in self._routes:
            found = pattern.match(path) if route_method == method else None
            if found:
                matched = (template, handler, found.groupdict())
                break
        call = Call(
            method,
            path,
            matched[0] if matched else None,
            None,
            dict(request.query_params),
            self.clock(),
        )
        self.calls.append(call)
        headers: dict[str, str] = {}
        try:
            call.json, files = await self._read_body(request)
            if matched is None:
                raise ApiError(404, "404: Not Found", 0)
            template, handler, params = matched
            interaction_route = template.startswith(("/interactions/", "/webhooks/"))
            if (
                not interaction_route
                and request.headers.get("authorization") != f"Bot {self.token}"
            ):
                raise ApiError(401, "401: Unauthorized", 0)
            self._injected_failure(f"{method} {template}")
            bucket = self._bucket(method, template, params)
            if not interaction_route:
                self._admit_global(method, path)
            if bucket is not None:
                headers = self._admit_bucket(bucket, method, template, path)
            if method == "PATCH" and template == "/channels/{channel_id}":
                self._admit_rename(params, call.json, method, path, headers)
            status, result = handler(params=params, body=call.json, files=files, request=request)
        except ApiError as error:
            call.status, call.code, call.message = error.status, error.code, error.message
            if error.violation:
                self._violate(error.violation, method, path, _describe(error), error.retry_after)
            body: dict[str, Any] = {"message": error.message, "code": error.code}
            if error.errors is not None:
                body["errors"] = error.errors
            if error.status == 429:
                body = {
                    "message": error.message,
                    "retry_after": error.retry_after,
                    "global": error.is_global,
                }
            return _JsonResponse(
                body, error.status, {"Via": "1.1 google", **headers, **error.headers}
            )
        call.status, call.result = status, result
        if not self.limits.rate_headers:
            headers = {}
        return self._answer(status, result, headers)

    def _injected_failure(self, key: str) -> None:
        for name in (key, "*"):
            queue = self._failures.get(name)
            if not queue:
                continue
            failure = queue[0]
            failure.times -= 1
            if failure.times <= 0:
                queue.pop(0)
            if failure.status == 429:
                retry = failure.retry_after or 1.0
                raise ApiError(
                    429,
                    failure.message or "You are being rate limited.",
                    retry_after=retry,
                    headers={"Retry-After": str(math.ceil(retry))},
                )
            raise ApiError(failure.status, failure.message or f"{failure.status}: injected", 0)

    @staticmethod
    def _major(params: dict[str, str]) -> str:
        for key in ("channel_id", "guild_id"):
            if key in params:
                return params[key]
        if "token" in params:
            return (
                f"{params.get('application_id') or params.get('interaction_id')}+{params['token']}"
            )
        return ""

    def _bucket(self, method: str, template: str, params: dict[str, str]) -> FixedWindow | None:
        window = self.limits.buckets.get(f"{method} {template}")
        if window is None:
            return None
        key = (f"{method} {template}", self._major(params))
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = FixedWindow(window)
        return bucket

    def _admit_global(self, method: str, path: str) -> None:
        if self._global is None:
            return
        now = self.clock()
        wait = self._global.wait(now)
        if wait > 0:
            raise ApiError(
                429,
                "You are being rate limited.",
                retry_after=round(wait, 3),
                is_global=True,
                violation="global_rate_limit",
                headers={
                    "Retry-After": str(max(1, math.ceil(wait))),
                    "X-RateLimit-Global": "true",
                    "X-RateLimit-Scope": "global",
                },
            )
        self._global.take(now)

    def _admit_bucket(
        self, bucket: FixedWindow, method: str, template: str, path: str
    ) -> dict[str, str]:
        now = self.clock()
        name = hashlib.md5(f"{method} {template}".encode()).hexdigest()
        wait = bucket.wait(now)
        if wait > 0:
            raise ApiError(
                429,
                "You are being rate limited.",
                retry_after=round(wait, 3),
                violation="rate_limit",
                headers={
                    **_rate_headers(bucket, now),
                    "X-RateLimit-Bucket": name,
                    "X-RateLimit-Scope": "user",
                    "Retry-After": str(max(1, math.ceil(wait))),
                },
            )
        bucket.take(now)
        return {**_rate_headers(bucket, now), "X-RateLimit-Bucket": name}

    def _admit_rename(
        self,
        params: dict[str, str],
        body: Any,
        method: str,
        path: str,
        headers: dict[str, str],
    ) -> None:
        """Discord's unannounced 2 renames per 10 minutes per channel: the 429 carries the
        route bucket's headers, which still show requests remaining."""
        window = self.limits.renames
        channel = self._channels.get(_snowflake(params["channel_id"]) or 0)
        if window is None or channel is None or not isinstance(body, dict):
            return
        changes = ("name" in body and body["name"] != channel.name) or (
            "topic" in body and body["topic"] != channel.topic
        )
        if not changes:
            return
        bucket = self._renames.setdefault(channel.id, FixedWindow(window))
        now = self.clock()
        wait = bucket.wait(now)
        if wait > 0:
            raise ApiError(
                429,
                "You are being rate limited.",
                retry_after=round(wait, 3),
                violation="rename_limit",
                headers={
                    **headers,
                    "X-RateLimit-Scope": "shared",
                    "Retry-After": str(max(1, math.ceil(wait))),
                },
            )
        bucket.take(now)

    def _guild(self, params: dict[str, str]) -> None:
        if _snowflake(params.get("guild_id")) != GUILD_ID or not self.in_guild:
            raise _unknown("Guild", 10004)

    def _get_channel_obj(self, params: dict[str, str]) -> FakeChannel:
        channel = self._channels.get(_snowflake(params.get("channel_id")) or 0)
        if channel is None or channel.deleted:
            raise _unknown("Channel", 10003)
        return channel

    # -- REST: identity, guild, channels ---------------------------------------------------

    def _get_me(self, **_: Any) -> tuple[int, Any]:
        return 200, self.bot_user

    def _my_guilds(self, **_: Any) -> tuple[int, Any]:
        mine = [(GUILD_ID, self.guild_name)] if self.in_guild else []
        return 200, [
            {
                "id": str(guild_id),
                "name": name,
                "icon": None,
                "banner": None,
                "owner": False,
                "permissions": str(self._permissions(BOT_ID, None) if guild_id == GUILD_ID else 0),
                "features": [],
            }
            for guild_id, name in [*mine, *self.other_guilds]
        ]

    def _open_dm(self, body: Any, **_: Any) -> tuple[int, Any]:
        """Open the DM channel with a user, or return the one open (its id never changes)."""
        recipient = _snowflake(body.get("recipient_id") if isinstance(body, dict) else None)
        user = self.users.get(recipient or 0)
        if recipient is None or user is None or recipient == BOT_ID:
            raise ApiError(400, "Invalid Recipient(s)", 50033)
        channel_id = self._dms.get(recipient)
        if channel_id is None:
            channel_id = self._snowflake()
            self._dms[recipient] = channel_id
            self._channels[channel_id] = FakeChannel(
                channel_id, DM_CHANNEL, "", recipient=user, time=self.clock()
            )
        return 200, self._channels[channel_id].to_api()

    def _application(self, **_: Any) -> tuple[int, Any]:
        return 200, {
            "id": str(APPLICATION_ID),
            "name": "AEP Test",
            "icon": None,
            "description": "",
            "summary": "",
            "type": None,
            "rpc_origins": [],
            "bot_public": True,
            "bot_require_code_grant": False,
            "bot": self.bot_user,
            "owner": ALICE,
            "team": None,
            "verify_key": "0" * 64,
            "flags": self._application_flags(),
            "tags": [],
            "redirect_uris": [],
            "interactions_endpoint_url": None,
            "approximate_guild_count": 1,
        }

    def _get_gateway(self, **_: Any) -> tuple[int, Any]:
        return 200, {"url": self.gateway_url}

    def _get_gateway_bot(self, **_: Any) -> tuple[int, Any]:
        return 200, {
            "url": self.gateway_url,
            "shards": 1,
            "session_start_limit": {
                "total": 1000,
                "remaining": 999,
                "reset_after": 86_400_000,
                "max_concurrency": 1,
            },
        }

    def _get_guild(self, params: dict[str, str], request: Request, **_: Any) -> tuple[int, Any]:
        self._guild(params)
        guild = self._guild_to_api(full=False)
        if request.query_params.get("with_counts") in ("true", "1"):
            guild["approximate_member_count"] = len(self.members)
            guild["approximate_presence_count"] = 0
        return 200, guild

    def _get_guild_channels(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        self._guild(params)
        return 200, [
            c.to_api() for c in self._channels.values() if not c.is_thread and not c.deleted
        ]

    def _get_roles(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        self._guild(params)
        return 200, [r.to_api() for r in self.roles.values()]

    def _active_threads(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        self._guild(params)
        threads = [
            c.to_api()
            for c in self._channels.values()
            if c.is_thread and not c.archived and not c.deleted
        ]
        return 200, {"threads": threads, "members": []}

    def _get_member(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        self._guild(params)
        member = self.members.get(_snowflake(params["user_id"]) or 0)
        if member is None:
            raise _unknown("Member", 10007)
        return 200, member.to_api()

    def _get_channel(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        channel = self._get_channel_obj(params)
        if not self._permissions(BOT_ID, channel) & VIEW_CHANNEL:
            raise _missing_access()
        return 200, channel.to_api()

    def _no_content(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        self._require(self._get_channel_obj(params))
        return 204, None

    # -- REST: threads ---------------------------------------------------------------------

    def _check_thread_fields(self, body: dict[str, Any]) -> tuple[str, int]:
        name = body.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= self.limits.thread_name:
            raise _bad_length(["name"], 1, self.limits.thread_name)
        duration = body.get("auto_archive_duration") or 1440
        if duration not in ARCHIVE_DURATIONS:
            raise _form_error(
                ["auto_archive_duration"],
                "BASE_TYPE_CHOICES",
                f"Value must be one of {set(ARCHIVE_DURATIONS)}.",
            )
        return name, int(duration)

    def _new_thread(
        self, parent: FakeChannel, kind: int, name: str, duration: int, thread_id: int | None = None
    ) -> FakeChannel:
        thread = FakeChannel(
            id=thread_id or self._snowflake(),
            type=kind,
            name=name,
            parent_id=parent.id,
            owner_id=BOT_ID,
            auto_archive_duration=duration,
            time=self.clock(),
        )
        self._channels[thread.id] = thread
        return thread

    def _create_thread(
        self, params: dict[str, str], body: Any, files: list[dict[str, Any]], **_: Any
    ) -> tuple[int, Any]:
        parent = self._get_channel_obj(params)
        body = body if isinstance(body, dict) else {}
        if parent.type == GUILD_FORUM:
            self._require(parent, SEND_MESSAGES)
            name, duration = self._check_thread_fields(body)
            first = body.get("message")
            if not isinstance(first, dict):
                raise _form_error(["message"], "BASE_TYPE_REQUIRED", "This field is required")
            content, embeds, components, flags = self._check_message(first, files, path=["message"])
            thread = self._new_thread(parent, PUBLIC_THREAD, name, duration)
            thread.applied_tags = [int(t) for t in body.get("applied_tags") or []]
            message = self._store(
                thread.id,
                self.bot_user,
                content=content,
                embeds=embeds,
                components=components,
                reply_to=None,
                allowed_mentions=first.get("allowed_mentions"),
                flags=flags,
                message_id=thread.id,
                attachments=files,
            )
            self._dispatch_thread("THREAD_CREATE", thread, newly_created=True)
            self._dispatch_message("MESSAGE_CREATE", message)
            return 201, {**thread.to_api(), "message": self._message_to_api(message)}
        if parent.type != GUILD_TEXT:
            raise ApiError(400, "Cannot execute action on this channel type", 50024)
        kind = body.get("type") or PRIVATE_THREAD
        if kind not in THREAD_TYPES:
            raise _form_error(["type"], "BASE_TYPE_CHOICES", "Value must be one of {11, 12}.")
        self._require(
            parent, CREATE_PUBLIC_THREADS if kind == PUBLIC_THREAD else CREATE_PRIVATE_THREADS
        )
        name, duration = self._check_thread_fields(body)
        thread = self._new_thread(parent, kind, name, duration)
        if kind == PRIVATE_THREAD:
            thread.invitable = bool(body.get("invitable", True))
        else:
            # Discord announces a public thread started without a message in the parent
            self._store(
                parent.id,
                self.bot_user,
                content=name,
                embeds=[],
                components=[],
                reply_to=None,
                allowed_mentions={"parse": []},
                message_type=18,
            )
        self._dispatch_thread("THREAD_CREATE", thread, newly_created=True)
        return 201, thread.to_api()

    def _thread_from(self, params: dict[str, str], body: Any, **_: Any) -> tuple[int, Any]:
        parent = self._get_channel_obj(params)
        if parent.type != GUILD_TEXT:
            raise ApiError(400, "Cannot execute action on this channel type", 50024)
        self._require(parent, CREATE_PUBLIC_THREADS)
        starter = self._messages.get(_snowflake(params["message_id"]) or 0)
        if starter is None or starter.deleted or starter.channel_id != parent.id:
            raise _unknown("Message", 10008)
        if starter.id in self._channels:
            raise ApiError(400, "A thread has already been created for this message", 160004)
        name, duration = self._check_thread_fields(body if isinstance(body, dict) else {})
        thread = self._new_thread(parent, PUBLIC_THREAD, name, duration, thread_id=starter.id)
        self._dispatch_thread("THREAD_CREATE", thread, newly_created=True)
        return 201, thread.to_api()

    def _set_archived(self, thread: FakeChannel, archived: bool) -> None:
        if thread.archived != archived:
            thread.archived = archived
            thread.archive_timestamp = _iso()
            self._dispatch_thread("THREAD_UPDATE", thread)

    def _edit_channel(self, params: dict[str, str], body: Any, **_: Any) -> tuple[int, Any]:
        channel = self._get_channel_obj(params)
        body = body if isinstance(body, dict) else {}
        if channel.is_thread:
            manage = bool(self._permissions(BOT_ID, channel) & MANAGE_THREADS)
            self._require(channel)
            if "locked" in body and not manage:
                raise _missing_permissions()
            if channel.locked and not manage:
                raise ApiError(400, "Thread is locked", 50083)
            if not manage and channel.owner_id != BOT_ID:
                raise _missing_permissions()
            if "name" in body:
                name = body["name"]
                if not isinstance(name, str) or not 1 <= len(name) <= self.limits.thread_name:
                    raise _bad_length(["name"], 1, self.limits.thread_name)
            if (
                "auto_archive_duration" in body
                and body["auto_archive_duration"] not in ARCHIVE_DURATIONS
            ):
                raise _form_error(
                    ["auto_archive_duration"],
                    "BASE_TYPE_CHOICES",
                    f"Value must be one of {set(ARCHIVE_DURATIONS)}.",
                )
            if (
                channel.archived
                and body.get("archived", True)
                and set(body) - {"archived", "locked"}
            ):
                raise ApiError(400, "Thread is archived", 50083)
        else:
            self._require(channel, 1 << 4)  # MANAGE_CHANNELS
        if "name" in body and body["name"] != channel.name:
            channel.renames.append((channel.name, body["name"], self.clock()))
            channel.name = body["name"]
        if "topic" in body and not channel.is_thread:
            channel.topic = body["topic"]
        if channel.is_thread:
            if "locked" in body:
                channel.locked = bool(body["locked"])
            if "invitable" in body and channel.type == PRIVATE_THREAD:
                channel.invitable = bool(body["invitable"])
            if "auto_archive_duration" in body:
                channel.auto_archive_duration = int(body["auto_archive_duration"])
            if "archived" in body and bool(body["archived"]) != channel.archived:
                channel.archived = bool(body["archived"])
                channel.archive_timestamp = _iso()
            self._dispatch_thread("THREAD_UPDATE", channel)
        else:
            self._dispatch("CHANNEL_UPDATE", channel.to_api(), INTENT_GUILDS)
        return 200, channel.to_api()

    # -- REST: messages --------------------------------------------------------------------

    def _check_message(
        self,
        body: dict[str, Any],
        files: list[dict[str, Any]] | None = None,
        *,
        path: list[str | int] | None = None,
        partial: bool = False,
    ) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]], int]:
        """Validate a message body as Discord does; (content, embeds, components, flags)."""
        base = path or []
        limits = self.limits
        content = body.get("content") or ""
        if not isinstance(content, str):
            content = str(content)
        flags = int(body.get("flags") or 0)
        v2 = bool(flags & IS_COMPONENTS_V2)
        if len(content) > limits.content_length:
            raise _too_long([*base, "content"], limits.content_length)
        embeds = body.get("embeds") or []
        if body.get("embed"):
            embeds = [body["embed"]]
        if len(embeds) > limits.embeds_per_message:
            raise _too_long([*base, "embeds"], limits.embeds_per_message)
        total = sum(
            self._check_embed(embed, [*base, "embeds", index]) for index, embed in enumerate(embeds)
        )
        if total > limits.embed_total:
            # the 6000 characters are for all the message's embeds together
            raise _form_error(
                [*base, "embeds"],
                "MAX_EMBED_SIZE_EXCEEDED",
                f"Embed size exceeds maximum size of {limits.embed_total}",
            )
        components = body.get("components") or []
        self._check_components(components, [*base, "components"], v2=v2)
        if v2 and (content or embeds):
            raise _form_error(
                [*base, "content"],
                "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
                "The 'content' and 'embeds' fields cannot be used when using"
                " MessageFlags.IS_COMPONENTS_V2",
            )
        if not partial and not (
            content or embeds or components or files or body.get("sticker_ids") or body.get("poll")
        ):
            raise ApiError(400, "Cannot send an empty message", 50006, violation="empty_message")
        return content, embeds, components, flags

    def _check_embed(self, embed: dict[str, Any], path: list[str | int]) -> int:
        """Check one embed's fields; its size (what counts toward the 6000)."""
        limits = self.limits
        total = 0

        def text(value: Any, where: list[str | int], limit: int) -> None:
            nonlocal total
            if value is None:
                return
            value = str(value)
            if len(value) > limit:
                raise _too_long([*path, *where], limit)
            total += len(value)

        text(embed.get("title"), ["title"], limits.embed_title)
        text(embed.get("description"), ["description"], limits.embed_description)
        text((embed.get("footer") or {}).get("text"), ["footer", "text"], limits.footer_text)
        text((embed.get("author") or {}).get("name"), ["author", "name"], limits.author_name)
        color = embed.get("color")
        if color is not None and (not isinstance(color, int) or not 0 <= color <= 0xFFFFFF):
            # (discord.py sends what it was given: an int out of range is Discord's to refuse)
            raise _form_error(
                [*path, "color"],
                "NUMBER_TYPE_MAX" if isinstance(color, int) and color > 0 else "NUMBER_TYPE_COERCE",
                "int value should be less than or equal to 16777215."
                if isinstance(color, int) and color > 0
                else f'Value "{color}" is not int.',
            )
        fields = embed.get("fields") or []
        if len(fields) > limits.embed_fields:
            raise _too_long([*path, "fields"], limits.embed_fields)
        for index, item in enumerate(fields):
            for key, limit in (("name", limits.field_name), ("value", limits.field_value)):
                value = item.get(key)
                if not value:
                    raise _form_error(
                        [*path, "fields", index, key],
                        "BASE_TYPE_REQUIRED",
                        "This field is required",
                    )
                text(value, ["fields", index, key], limit)
        if total > limits.embed_total:
            raise _form_error(
                path,
                "MAX_EMBED_SIZE_EXCEEDED",
                f"Embed size exceeds maximum size of {limits.embed_total}",
            )
        return total

    def _check_components(
        self, components: list[dict[str, Any]], path: list[str | int], *, v2: bool
    ) -> None:
        limits = self.limits
        seen: set[str] = set()
        if not v2:
            if len(components) > limits.action_rows:
                raise _too_long(path, limits.action_rows)
            for index, row in enumerate(components):
                if row.get("type") != 1:
                    raise _fake_form([*path, index, "type"], _FAKE_WORDING["row_type"])
                items = row.get("components") or []
                if not 1 <= len(items) <= limits.row_buttons:
                    raise _bad_length([*path, index, "components"], 1, limits.row_buttons)
                if any(i.get("type") in _SELECTS for i in items) and len(items) > 1:
                    raise _fake_form([*path, index, "components"], _FAKE_WORDING["select_alone"])
        for item, where in _walk_paths(components, path):
            kind = item.get("type")
            if kind not in _INTERACTIVE:
                if not v2 and kind != 1:
                    raise _fake_form(
                        [*where, "type"], _FAKE_WORDING["component_type"].format(t=kind)
                    )
                continue
            custom_id = item.get("custom_id")
            if kind == 2 and item.get("style") in (5, 6):
                if custom_id is not None:
                    raise _form_error(
                        [*where, "custom_id"],
                        "COMPONENT_LINK_BUTTON_CANNOT_HAVE_CUSTOM_ID",
                        "A link button cannot have a custom id",
                    )
            else:
                if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= limits.custom_id:
                    raise _bad_length([*where, "custom_id"], 1, limits.custom_id)
                if custom_id in seen:
                    raise _form_error(
                        [*where, "custom_id"],
                        "COMPONENT_CUSTOM_ID_DUPLICATED",
                        "Component custom id cannot be duplicated",
                    )
                seen.add(custom_id)
            if kind == 2:
                label = item.get("label")
                if label is not None and len(label) > limits.button_label:
                    raise _too_long([*where, "label"], limits.button_label)
                if not label and not item.get("emoji"):
                    raise _form_error(
                        [*where, "label"],
                        "BUTTON_COMPONENT_REQUIRES_LABEL_OR_EMOJI",
                        "A button must have a label or an emoji",
                    )
            elif kind in _SELECTS:
                placeholder = item.get("placeholder")
                if placeholder and len(placeholder) > limits.select_placeholder:
                    raise _too_long([*where, "placeholder"], limits.select_placeholder)
                if kind == 3:
                    options = item.get("options") or []
                    if not 1 <= len(options) <= limits.select_options:
                        raise _bad_length([*where, "options"], 1, limits.select_options)
                    for number, option in enumerate(options):
                        for key in ("label", "value", "description"):
                            value = option.get(key)
                            if value is not None and len(value) > limits.option_text:
                                raise _too_long(
                                    [*where, "options", number, key], limits.option_text
                                )

    def _check_modal(self, data: dict[str, Any]) -> None:
        limits = self.limits
        title = data.get("title") or ""
        if not 1 <= len(title) <= limits.modal_title:
            raise _bad_length(["data", "title"], 1, limits.modal_title)
        custom_id = data.get("custom_id") or ""
        if not 1 <= len(custom_id) <= limits.custom_id:
            raise _bad_length(["data", "custom_id"], 1, limits.custom_id)
        components = data.get("components") or []
        if not 1 <= len(components) <= 5:
            raise _bad_length(["data", "components"], 1, 5)
        for item, where in _walk_paths(components, ["data", "components"]):
            label = item.get("label")
            if item.get("type") == 4 and label and len(label) > limits.text_input_label:
                raise _too_long([*where, "label"], limits.text_input_label)

    def _writable(self, channel: FakeChannel) -> None:
        """The bot may post here: permissions, and an archived thread is unarchived first."""
        if channel.type == GUILD_FORUM:
            raise ApiError(400, "Cannot send messages in a non-text channel", 50008)
        if channel.type == DM_CHANNEL:
            person = int((channel.recipient or {}).get("id", 0))
            if person not in self.members or person in self.dms_closed:
                raise ApiError(403, "Cannot send messages to this user", 50007)
        elif channel.is_thread:
            self._require(channel, SEND_MESSAGES_IN_THREADS)
            if channel.archived:
                if channel.locked and not self._permissions(BOT_ID, channel) & MANAGE_THREADS:
                    raise ApiError(400, "Thread is locked", 50083)
                self._set_archived(channel, False)
        else:
            self._require(channel, SEND_MESSAGES)

    def _post_message(
        self, params: dict[str, str], body: Any, files: list[dict[str, Any]], **_: Any
    ) -> tuple[int, Any]:
        channel = self._get_channel_obj(params)
        body = body if isinstance(body, dict) else {}
        content, embeds, components, flags = self._check_message(body, files)
        reply_to = None
        reference = body.get("message_reference")
        if isinstance(reference, dict) and reference.get("message_id"):
            reply_to = _snowflake(reference["message_id"])
            replied = self._messages.get(reply_to or 0)
            if replied is None or replied.deleted or replied.channel_id != channel.id:
                if reference.get("fail_if_not_exists", True):
                    raise _form_error(
                        ["message_reference"],
                        "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                        "Unknown message",
                    )
                reply_to = None
        self._writable(channel)
        message = self._store(
            channel.id,
            self.bot_user,
            content=content,
            embeds=embeds,
            components=components,
            reply_to=reply_to,
            allowed_mentions=body.get("allowed_mentions"),
            flags=flags & ~EPHEMERAL,
            nonce=body.get("nonce"),
            attachments=files,
        )
        self._dispatch_message("MESSAGE_CREATE", message)
        return 200, self._message_to_api(message)

    def _get_messages(self, params: dict[str, str], request: Request, **_: Any) -> tuple[int, Any]:
        channel = self._get_channel_obj(params)
        self._require(channel, READ_MESSAGE_HISTORY)
        limit = min(100, int(request.query_params.get("limit", 50)))
        after = _snowflake(request.query_params.get("after"))
        before = _snowflake(request.query_params.get("before"))
        found = [
            m
            for m in self.messages(channel.id, service=True)
            if (after is None or m.id > after) and (before is None or m.id < before)
        ]
        # newest first; with `after`, the oldest `limit` after it (as Discord pages forward)
        found = found[:limit][::-1] if after is not None else found[::-1][:limit]
        return 200, [self._message_to_api(m) for m in found]

    def _channel_message(self, params: dict[str, str]) -> tuple[FakeChannel, FakeMessage]:
        channel = self._get_channel_obj(params)
        message = self._messages.get(_snowflake(params["message_id"]) or 0)
        if (
            message is None
            or message.deleted
            or message.channel_id != channel.id
            or message.ephemeral_to
        ):
            raise _unknown("Message", 10008)
        return channel, message

    def _get_message(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        channel, message = self._channel_message(params)
        self._require(channel, READ_MESSAGE_HISTORY)
        return 200, self._message_to_api(message)

    def _apply_edit(
        self, message: FakeMessage, body: dict[str, Any], files: list[dict[str, Any]] | None = None
    ) -> None:
        """Change the fields the body names (Discord keeps the others), keeping the old version."""
        merged = {
            "content": message.content,
            "embeds": message.embeds,
            "components": message.components,
            "flags": message.flags & ~LOADING,
        }
        merged.update({k: v for k, v in body.items() if k in merged or k == "embed"})
        if merged.get("content") is None:
            merged["content"] = ""
        content, embeds, components, flags = self._check_message(
            merged, files or message.attachments
        )
        message.edits.append(
            MessageVersion(
                message.content, message.embeds, message.components, message.flags, message.time
            )
        )
        message.content = content
        message.embeds = [{"type": "rich", **e} for e in embeds]
        message.components = components
        message.flags = (flags & ~(EPHEMERAL | LOADING)) | (message.flags & EPHEMERAL)
        if "allowed_mentions" in body:
            message.allowed_mentions = body["allowed_mentions"]
        message.time = self.clock()
        message.edited_timestamp = _iso()
        message.pings = self._pings(message)

    def _edit_message(
        self, params: dict[str, str], body: Any, files: list[dict[str, Any]], **_: Any
    ) -> tuple[int, Any]:
        channel, message = self._channel_message(params)
        self._require(channel)
        if not message.from_bot:
            raise ApiError(403, "Cannot edit a message authored by another user", 50005)
        if channel.is_thread and channel.archived:
            raise ApiError(400, "Thread is archived", 50083)
        self._apply_edit(message, body if isinstance(body, dict) else {}, files)
        self._dispatch_message("MESSAGE_UPDATE", message)
        return 200, self._message_to_api(message)

    def _delete(self, message: FakeMessage) -> None:
        message.deleted = True
        if message.ephemeral_to is None:
            self._dispatch(
                "MESSAGE_DELETE",
                {
                    "id": str(message.id),
                    "channel_id": str(message.channel_id),
                    "guild_id": str(GUILD_ID),
                },
                INTENT_GUILD_MESSAGES,
            )

    def _delete_message(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        channel, message = self._channel_message(params)
        if not message.from_bot:
            self._require(channel, MANAGE_MESSAGES)
        else:
            self._require(channel)
        self._delete(message)
        return 204, None

    # -- REST: interactions ----------------------------------------------------------------

    def _callback(
        self,
        params: dict[str, str],
        body: Any,
        files: list[dict[str, Any]],
        request: Request,
        **_: Any,
    ) -> tuple[int, Any]:
        interaction_id = _snowflake(params["interaction_id"])
        try:
            interaction = self.interaction(interaction_id or 0)
        except KeyError:
            raise _unknown("interaction", 10062) from None
        if params["token"] != interaction.token:
            raise _unknown("interaction", 10062)
        now = self.clock()
        deadline = self.limits.interaction_deadline
        if interaction.responses:
            raise ApiError(
                400,
                "Interaction has already been acknowledged.",
                40060,
                violation="interaction_answered_twice",
            )
        if deadline is not None and now - interaction.time > deadline:
            interaction.late.append(now)
            raise ApiError(404, "Unknown interaction", 10062, violation="interaction_late")
        body = body if isinstance(body, dict) else {}
        kind = body.get("type")
        data = body.get("data") or {}
        if kind not in CALLBACK_TYPES:
            raise _fake_form(["type"], _FAKE_WORDING["callback_type"].format(t=kind))
        source = self._messages.get(interaction.message_id or 0)
        if kind in (6, 7) and source is None:
            raise ApiError(400, _FAKE_WORDING["callback_kind"].format(t=kind), 50035)
        if kind == 9 and interaction.type == 5:
            raise ApiError(400, _FAKE_WORDING["callback_kind"].format(t=kind), 50035)
        message: FakeMessage | None = None
        if kind in (4, 5):
            ephemeral = bool(int(data.get("flags") or 0) & EPHEMERAL)
            if kind == 4:
                content, embeds, components, flags = self._check_message(data, files, path=["data"])
            else:
                content, embeds, components, flags = (
                    "",
                    [],
                    [],
                    LOADING | (EPHEMERAL if ephemeral else 0),
                )
            message = self._store(
                interaction.channel_id,
                self.bot_user,
                content=content,
                embeds=embeds,
                components=components,
                reply_to=None,
                allowed_mentions=data.get("allowed_mentions"),
                flags=flags,
                message_type=20 if interaction.type == 2 else 0,
                interaction_id=interaction.id,
                ephemeral_to=int(interaction.user["id"]) if ephemeral else None,
                attachments=files,
            )
            interaction.original_id = message.id
        elif kind == 7:
            assert source is not None
            self._apply_edit(source, data, files)
            message = source
            interaction.original_id = source.id
        elif kind == 6:
            assert source is not None
            interaction.original_id = source.id
        elif kind == 9:
            self._check_modal(data)
            interaction.modal = data
        interaction.responses.append(
            InteractionResponse(interaction.id, kind, data, now, now - interaction.time)
        )
        if message is not None:
            self._dispatch_message(
                "MESSAGE_CREATE" if kind in (4, 5) else "MESSAGE_UPDATE", message
            )
        if request.query_params.get("with_response") not in ("1", "true", "True"):
            return 204, None
        answer: dict[str, Any] = {"id": str(interaction.id), "type": interaction.type}
        resource: dict[str, Any] = {"type": kind}
        if message is not None:
            answer["response_message_id"] = str(message.id)
            answer["response_message_loading"] = kind == 5
            answer["response_message_ephemeral"] = message.ephemeral_to is not None
            resource["message"] = self._message_to_api(message)
        return 200, {"interaction": answer, "resource": resource}

    def _token_interaction(self, params: dict[str, str]) -> FakeInteraction:
        if _snowflake(params["application_id"]) != APPLICATION_ID:
            raise _unknown("Webhook", 10015)
        for interaction in self.interactions:
            if interaction.token == params["token"]:
                if self.clock() - interaction.time > self.limits.token_lifetime:
                    raise ApiError(401, "Invalid Webhook Token", 50027)
                return interaction
        raise _unknown("Webhook", 10015)

    def _token_message(self, params: dict[str, str]) -> tuple[FakeInteraction, FakeMessage]:
        interaction = self._token_interaction(params)
        wanted = params["message_id"]
        if wanted == "@original":
            if interaction.original_id is None:
                raise ApiError(404, "Unknown Message", 10008)
            message_id = interaction.original_id
        else:
            message_id = _snowflake(wanted) or 0
            if message_id not in interaction.followups and message_id != interaction.original_id:
                raise ApiError(404, "Unknown Message", 10008)
        message = self._messages[message_id]
        if message.deleted:
            raise ApiError(404, "Unknown Message", 10008)
        return interaction, message

    def _followup(
        self, params: dict[str, str], body: Any, files: list[dict[str, Any]], **_: Any
    ) -> tuple[int, Any]:
        interaction = self._token_interaction(params)
        if not interaction.responses:
            raise ApiError(400, _FAKE_WORDING["not_acknowledged"], 10015)
        body = body if isinstance(body, dict) else {}
        original = self._messages.get(interaction.original_id or 0)
        if (
            original is not None
            and original.flags & LOADING
            and not interaction.followups
            and interaction.responses[0].type == 5
        ):
            # the first follow-up after a deferred answer fills the loading message
            self._apply_edit(original, body, files)
            interaction.followups.append(original.id)
            self._dispatch_message("MESSAGE_UPDATE", original)
            return 200, self._message_to_api(original)
        content, embeds, components, flags = self._check_message(body, files)
        ephemeral = bool(flags & EPHEMERAL)
        message = self._store(
            interaction.channel_id,
            self.bot_user,
            content=content,
            embeds=embeds,
            components=components,
            reply_to=None,
            allowed_mentions=body.get("allowed_mentions"),
            flags=flags,
            interaction_id=interaction.id,
            ephemeral_to=int(interaction.user["id"]) if ephemeral else None,
            attachments=files,
        )
        interaction.followups.append(message.id)
        self._dispatch_message("MESSAGE_CREATE", message)
        return 200, self._message_to_api(message)

    def _wh_get(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        message = self._token_message(params)[1]
        return 200, self._message_to_api(message)

    def _wh_edit(
        self, params: dict[str, str], body: Any, files: list[dict[str, Any]], **_: Any
    ) -> tuple[int, Any]:
        message = self._token_message(params)[1]
        channel = self._channels.get(message.channel_id)
        if channel is not None and channel.is_thread and channel.archived:
            raise ApiError(400, "Thread is archived", 50083)
        self._apply_edit(message, body if isinstance(body, dict) else {}, files)
        self._dispatch_message("MESSAGE_UPDATE", message)
        return 200, self._message_to_api(message)

    def _wh_del(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        message = self._token_message(params)[1]
        self._delete(message)
        return 204, None

    # -- REST: application commands --------------------------------------------------------

    def _command_scope(self, params: dict[str, str]) -> int | None:
        if _snowflake(params["application_id"]) != APPLICATION_ID:
            raise ApiError(403, "Missing Access", 50001)
        if "guild_id" in params:
            self._guild(params)
            return GUILD_ID
        return None

    def _check_command(self, command: Any, path: list[str | int]) -> dict[str, Any]:
        if not isinstance(command, dict):
            raise _form_error(
                path, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType"
            )
        kind = command.get("type", 1)
        name = command.get("name")
        if (
            not isinstance(name, str)
            or not _COMMAND_NAME.match(name)
            or (kind == 1 and name != name.lower())
        ):
            raise _form_error(
                [*path, "name"],
                "APPLICATION_COMMAND_INVALID_NAME",
                "Command name is invalid",
            )
        description = command.get("description") or ""
        if kind == 1 and not 1 <= len(description) <= 100:
            raise _bad_length([*path, "description"], 1, 100)
        options = command.get("options") or []
        if len(options) > 25:
            raise _too_long([*path, "options"], 25)
        for index, option in enumerate(options):
            if (
                not _COMMAND_NAME.match(option.get("name") or "")
                or option["name"] != option["name"].lower()
            ):
                raise _form_error(
                    [*path, "options", index, "name"],
                    "APPLICATION_COMMAND_INVALID_NAME",
                    "Command name is invalid",
                )
            if not 1 <= len(option.get("description") or "") <= 100:
                raise _bad_length([*path, "options", index, "description"], 1, 100)
            if len(option.get("choices") or []) > 25:
                raise _too_long([*path, "options", index, "choices"], 25)
        return command

    def _register(
        self, scope: int | None, command: dict[str, Any], known: dict[str, Any]
    ) -> dict[str, Any]:
        previous = known.get(command["name"])
        stored = {
            "type": 1,
            "default_member_permissions": None,
            "contexts": None,
            "integration_types": [0],
            "nsfw": False,
            "options": [],
            "description": "",
            **command,
            "id": previous["id"] if previous else str(self._snowflake()),
            "application_id": str(APPLICATION_ID),
            "version": str(self._snowflake()),
        }
        if scope is not None:
            stored["guild_id"] = str(scope)
        return stored

    def _get_commands(self, params: dict[str, str], **_: Any) -> tuple[int, Any]:
        return 200, self.commands(self._command_scope(params))

    def _put_commands(self, params: dict[str, str], body: Any, **_: Any) -> tuple[int, Any]:
        scope = self._command_scope(params)
        if not isinstance(body, list):
            raise _form_error([], "LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
        if len(body) > self.limits.commands_per_scope:
            raise _too_long([], self.limits.commands_per_scope)
        checked = [self._check_command(c, [i]) for i, c in enumerate(body)]
        names = [(c.get("type", 1), c["name"]) for c in checked]
        if len(set(names)) != len(names):
            raise _form_error(
                [],
                "APPLICATION_COMMANDS_DUPLICATE_NAME",
                "Application command names must be unique",
            )
        known = self._commands[scope]
        self._commands[scope] = {c["name"]: self._register(scope, c, known) for c in checked}
        return 200, self.commands(scope)

    def _post_command(self, params: dict[str, str], body: Any, **_: Any) -> tuple[int, Any]:
        scope = self._command_scope(params)
        command = self._check_command(body, [])
        known = self._commands[scope]
        created = command["name"] not in known
        known[command["name"]] = self._register(scope, command, known)
        return (201 if created else 200), known[command["name"]]


def _describe(error: ApiError) -> str:
    """A short text for a violation: the error and where in the body it was."""
    if error.errors is None:
        return error.message
    path: list[str] = []
    tree = error.errors
    while "_errors" not in tree and len(tree) == 1:
        key = next(iter(tree))
        path.append(key)
        tree = tree[key]
    detail = "; ".join(e["message"] for e in tree.get("_errors", []))
    return f"{'.'.join(path)}: {detail}"


class _JsonResponse(Response):
    """JSON with `Content-Type: application/json` and nothing after it: discord.py compares
    the header with `==` and treats `application/json; charset=utf-8` as text."""

    def __init__(self, body: Any, status: int, headers: dict[str, str]) -> None:
        super().__init__(
            json.dumps(body, separators=(",", ":")).encode(),
            status_code=status,
            headers={**headers, "Content-Type": "application/json"},
        )


@contextlib.contextmanager
def point_discord_py(fake: FakeDiscord) -> Iterator[None]:
    """Point discord.py (imported here, only when used) at the fake for the block: its REST
    base (which interaction callbacks and webhooks share) and its default gateway."""
    import discord.gateway
    import discord.http
    import yarl

    base = discord.http.Route.BASE
    gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = fake.api_base_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    try:
        yield
    finally:
        discord.http.Route.BASE = base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway


__all__ = [
    "ALICE",
    "APPLICATION_ID",
    "APPROVER_ROLE_ID",
    "BOB",
    "BOT_ID",
    "BOT_PERMISSIONS",
    "BOT_ROLE_ID",
    "DEFAULT_TOKEN",
    "FORUM_CHANNEL_ID",
    "GUILD_ID",
    "MALLORY",
    "NOTIFY_CHANNEL_ID",
    "TEXT_CHANNEL_ID",
    "FakeChannel",
    "FakeDiscord",
    "FakeInteraction",
    "FakeMessage",
    "Limits",
    "ManualClock",
    "Violation",
    "Window",
    "point_discord_py",
]
