"""A fake Slack for tests: the Web API and Socket Mode on loopback, Slack's wire format and limits.

Drive it with the real slack-sdk and slack-bolt, pointed at it by `base_url`::

    async with FakeSlack() as fake:                     # Limits.real(); Limits.loose() for the kit
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_base_url)
        app = AsyncApp(client=client)

        @app.action(re.compile(r"^aep_answer_\\d+$"))
        async def pressed(ack, body): await ack()

        handler = AsyncSocketModeHandler(app, APP_TOKEN)   # apps.connections.open via app.client
        await handler.connect_async()
        await fake.wait_until(lambda: fake.connected, what="socket")
        posted = await client.chat_postMessage(channel=C0AGENTS, text="Run?", blocks=[...])
        envelope = await fake.press(ALICE, fake.message(C0AGENTS, posted["ts"]), "aep_answer_0")
        assert envelope.acked
        await handler.close_async()
        assert fake.violations == [] and fake.unanswered() == []

The server is uvicorn inside the test's own event loop (like the fake Discord next door), so a
test may read and change the fake's state between awaits without locks. The Web API is
`POST|GET /api/<method>`: the token in `Authorization: Bearer` (or a `token` argument), arguments
from the query string, a JSON body or a form body (blocks and views as JSON text), as slack-sdk
sends them; answers are JSON `{"ok": true, ...}` or `{"ok": false, "error": "..."}` with HTTP 200,
except rate limits (429). Every answer to the bot token carries `x-oauth-scopes` (`fake.scopes`);
a method needing a scope the bot lacks answers `missing_scope` with `needed` and `provided`.
Socket Mode is `/socket?ticket=...` (the URL `apps.connections.open` gives): `hello` on connect,
then envelopes `{"envelope_id", "type", "payload", "accepts_response_payload"}`; acks are
`{"envelope_id"[, "payload"]}`. WebSocket pings are answered by the server.

Workspace: the bot `U0BOT` (`B0BOT`, app `A0APP`) in team `T0FAKE` (`https://fake-team.slack.com/`),
users ALICE, BOB, MALLORY, the user group S0OPS (ALICE), channels C0AGENTS (everyone and the bot),
C0NOTIFY (Alice, Bob and the bot), C0OTHER (Alice; the bot is not in it), the slash command `/aep`.
The bot's own posts and edits in a channel it is in come back as `message` events (edits as
`message_changed`), as on Slack (`FakeSlack(bot_events=False)` turns that off).

What it enforces (`Limits.real()`, the default; `Limits.loose()` keeps every size limit, the ack
deadline and trigger expiry, and drops the rate limits):

- Rate limits, fixed windows: `chat.postMessage` 1 per 1.0 s per channel (threads included),
  `chat.update` 50 per 60 s (Tier 3), `conversations.list`, `users.conversations` and
  `usergroups.users.list` 20 per 60 s (Tier 2), `conversations.info` 50 per 60 s, all per
  workspace. Over one: HTTP 429, `Retry-After` (whole seconds, rounded up),
  `{"ok": false, "error": "ratelimited"}`; a refused call does not use a slot.
  `apps.connections.open` (Tier 1) is not limited: slack-sdk sleeps 30 s on its 429, which
  would stall every reconnect test. Slack's undocumented total size of a message's blocks
  (`msg_blocks_too_long`, about 13,000 characters) is not enforced either.
- Messages: text or blocks required (`no_text`); text over 40,000 characters is truncated (a
  violation); blocks: <= 50, known types, section text <= 3000 and fields <= 10 of <= 2000,
  header <= 150, context <= 10 elements, actions 1-25 elements, `block_id` <= 255 and unique,
  buttons (text plain_text <= 75, `action_id` <= 255 and unique in its block, value <= 2000,
  url <= 3000, style primary/danger), selects (options 1-100, option text <= 75, value <= 150),
  text objects (plain_text/mrkdwn, not empty; `emoji` only on plain_text). Breaking one:
  `invalid_blocks` with Slack's `[json-pointer:/blocks/0/text/text]` messages.
- Channels: `channel_not_found`, `not_in_channel` (posting where the bot is not),
  `thread_not_found` (a `thread_ts` that is no message there: Slack's own answer is not
  documented, the fake refuses so a test sees it; a reply's ts threads under its parent, as
  on Slack), `message_not_found` /
  `cant_update_message` for `chat.update`, `user_not_in_channel` for an ephemeral.
- Modals: `views.open` needs a `trigger_id` the fake issued (with a press or a slash command),
  unused (`exchanged_trigger_id`) and younger than 3 s (`expired_trigger_id`); the view: type
  modal, title/submit/close plain_text <= 24, <= 100 blocks, a submit button when it has inputs,
  `callback_id` <= 255, `private_metadata` <= 3000 (else `invalid_arguments`).
- Acks: every envelope must be acked within 3 s (`fake.unanswered()`; late or missing acks
  are violations once `unanswered()` or `wait_ack` sees them); acking an unknown envelope or
  one twice is a violation.
- Tokens: a wrong one is `invalid_auth`, none `not_authed`; the app token only opens Socket
  Mode, the bot token never does (`not_allowed_token_type`). Unknown methods: `unknown_method`.

- Direct messages: `conversations.open` (`users`: one user id; scope `im:write`, Tier 3: 50
  per 60 s) opens the bot's DM with a person (`fake.ims`: user id -> `D...`), answering
  `already_open` the second time; `cannot_dm_bot` for a bot's id (the bot's own, or a user
  with `is_bot`), `user_not_found` for an unknown id, `user_disabled` for one `deleted`.
  A post in a DM counts against that DM's own one-a-second window; with
  `fake.messages_tab = False` (App Home > Messages Tab off) it is `messages_tab_disabled`.
  These refusals, which the bridge cannot foresee, are not violations. No `message.im`
  events come back (the manifest subscribes to none).

`apps.connections.open` with `fake.socket_mode = False` answers `socket_mode_not_enabled`, a
code the fake invented (Slack's is not documented).

Every refusal above (not auth errors a test provokes on purpose, nor `fail_next`) is a
`Violation` in `fake.violations` (and `fake.violation_counts[kind]`), so a test can assert that a
well-behaved channel caused none.

Inspection: `calls`, `calls_to()`, `messages()`, `message()`, `thread()`, `dms()`, `ephemeral()`,
`views`, `view()`, `envelopes`, `acks`, `unanswered()`, `connected`, `sockets`, `responses`
(what came to a `response_url`: an ephemeral by default, `in_channel`, `replace_original`,
`delete_original`, as Slack does), `violations`.
Injection: `press()`, `submit()`, `say()`, `slash()`, `fail_next()`, `drop_socket()`,
`refresh_socket()`, `add_user()`, `users`, `groups`, `channels`, `scopes`.
Waiting: `wait_until()`, `wait_ack()`. Config: `make_config(fake, **overrides)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from aep_bridge.testing import FixedWindow, InLoopServer, Window

# -- the workspace ---------------------------------------------------------------------------

BOT_TOKEN = "xoxb-fake-bot"
APP_TOKEN = "xapp-fake-app"
TEAM_ID = "T0FAKE"
TEAM_NAME = "Fake Team"
TEAM_DOMAIN = "fake-team"
TEAM_URL = "https://fake-team.slack.com/"
APP_ID = "A0APP"
BOT_ID = "B0BOT"
BOT_USER_ID = "U0BOT"
BOT_NAME = "aep-bot"

#: the bot scopes of the app's manifest (what `auth.test` announces in `x-oauth-scopes`)
BOT_SCOPES: tuple[str, ...] = (
    "chat:write",
    "channels:history",
    "groups:history",
    "channels:read",
    "groups:read",
    "commands",
    "usergroups:read",
    "users:read",
    "im:write",
)

#: an approver (in the user group S0OPS)
ALICE: dict[str, Any] = {"id": "U0ALICE", "name": "alice", "real_name": "Alice"}
#: a member, not in S0OPS
BOB: dict[str, Any] = {"id": "U0BOB", "name": "bob", "real_name": "Bob"}
#: a stranger
MALLORY: dict[str, Any] = {"id": "U0MALLORY", "name": "mallory", "real_name": "Mallory"}
#: the user group whose members may answer (put it in `approver_roles`)
S0OPS = "S0OPS"
#: sessions go here; everyone and the bot are in it
C0AGENTS = "C0AGENTS"
#: heads-ups go here; Alice, Bob and the bot
C0NOTIFY = "C0NOTIFY"
#: a channel the bot is not in
C0OTHER = "C0OTHER"

#: scope each method needs (public channels; the fake has no private ones by default)
METHOD_SCOPES: Mapping[str, str] = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "conversations.info": "channels:read",
    "conversations.list": "channels:read",
    "conversations.members": "channels:read",
    "users.conversations": "channels:read",
    "usergroups.users.list": "usergroups:read",
    "users.info": "users:read",
    "conversations.open": "im:write",
}


# -- limits ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What the fake enforces; the defaults are Slack's (`Limits.real()`)."""

    #: method -> window, counted per channel
    per_channel: Mapping[str, Window] = field(
        default_factory=lambda: {"chat.postMessage": Window(1, 1.0)}
    )
    #: method -> window, counted per workspace (Slack's tiers)
    per_workspace: Mapping[str, Window] = field(
        default_factory=lambda: {
            "chat.update": Window(50, 60.0),
            "conversations.info": Window(50, 60.0),
            "conversations.list": Window(20, 60.0),
            "users.conversations": Window(20, 60.0),
            "usergroups.users.list": Window(20, 60.0),
            "conversations.open": Window(50, 60.0),
        }
    )
    text: int = 40_000
    blocks: int = 50
    modal_blocks: int = 100
    section_text: int = 3000
    section_fields: int = 10
    field_text: int = 2000
    header_text: int = 150
    markdown_text: int = 12_000
    context_elements: int = 10
    actions_elements: int = 25
    block_id: int = 255
    action_id: int = 255
    button_text: int = 75
    button_value: int = 2000
    url: int = 3000
    select_options: int = 100
    option_text: int = 75
    option_value: int = 150
    choice_options: int = 10
    label: int = 2000
    placeholder: int = 150
    input_max_length: int = 3000
    view_title: int = 24
    callback_id: int = 255
    private_metadata: int = 3000
    #: seconds within which an envelope must be acked
    ack_deadline: float = 3.0
    #: seconds a trigger_id works for views.open
    trigger_lifetime: float = 3.0

    @classmethod
    def real(cls, **changes: Any) -> Limits:
        """Slack's limits, rate limits included."""
        return cls(**changes)

    @classmethod
    def loose(cls, **changes: Any) -> Limits:
        """Every size limit, the ack deadline and trigger expiry, but no rate limit."""
        return cls(**{"per_channel": {}, "per_workspace": {}, **changes})


@dataclass(frozen=True)
class Violation:
    """A request Slack would refuse (or mangle), or an envelope acked late, twice or never."""

    #: Slack's error code (ratelimited, invalid_blocks, invalid_arguments, no_text,
    #: channel_not_found, not_in_channel, thread_not_found, message_not_found,
    #: cant_update_message, user_not_in_channel, invalid_trigger_id, exchanged_trigger_id,
    #: expired_trigger_id, missing_scope, unknown_method, ...) or the fake's own:
    #: text_truncated | ack_late | ack_missing | ack_unknown | ack_twice | bad_frame |
    #: bad_response_url
    kind: str
    method: str
    time: float
    detail: str = ""


# -- the model -------------------------------------------------------------------------------


@dataclass
class FakeChannel:
    id: str
    name: str
    members: set[str]
    is_private: bool = False
    created: int = 1_700_000_000
    #: a direct message between the bot and `user` (`conversations.open`)
    is_im: bool = False
    user: str | None = None

    def to_api(self) -> dict[str, Any]:
        if self.is_im:  # as conversations.info gives an IM
            return {
                "id": self.id,
                "created": self.created,
                "is_im": True,
                "is_org_shared": False,
                "user": self.user,
                "is_user_deleted": False,
                "priority": 0,
                "context_team_id": TEAM_ID,
            }
        return {
            "id": self.id,
            "name": self.name,
            "name_normalized": self.name,
            "is_channel": not self.is_private,
            "is_group": self.is_private,
            "is_im": False,
            "is_mpim": False,
            "is_private": self.is_private,
            "is_archived": False,
            "is_general": False,
            "is_shared": False,
            "is_org_shared": False,
            "is_ext_shared": False,
            "is_member": BOT_USER_ID in self.members,
            "created": self.created,
            "creator": ALICE["id"],
            "context_team_id": TEAM_ID,
            "topic": {"value": "", "creator": "", "last_set": 0},
            "purpose": {"value": "", "creator": "", "last_set": 0},
            "num_members": len(self.members),
        }


@dataclass(frozen=True)
class MessageVersion:
    """An earlier text and blocks of an edited message."""

    text: str
    blocks: list[dict[str, Any]]
    time: float


@dataclass
class FakeMessage:
    """A message in a channel (a thread reply has `thread_ts`, the parent's ts)."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    user: str
    time: float
    thread_ts: str | None = None
    bot_id: str | None = None
    #: who wrote the thread's parent (replies only)
    parent_user: str | None = None
    edits: list[MessageVersion] = field(default_factory=list)
    reply_broadcast: bool = False
    #: the envelope that told the app about it (messages users wrote with `say`)
    envelope_id: str | None = None

    @property
    def from_bot(self) -> bool:
        return self.bot_id is not None

    @property
    def buttons(self) -> list[dict[str, Any]]:
        """Every button (actions elements and section accessories), in order."""
        return [e for e, _ in _interactive(self.blocks) if e.get("type") == "button"]

    @property
    def action_ids(self) -> list[str]:
        return [e["action_id"] for e, _ in _interactive(self.blocks) if "action_id" in e]

    def to_api(self) -> dict[str, Any]:
        """The message as Slack gives it (in answers, events and interactive payloads)."""
        out: dict[str, Any] = {
            "type": "message",
            "user": self.user,
            "text": self.text,
            "ts": self.ts,
            "team": TEAM_ID,
        }
        if self.blocks:
            out["blocks"] = self.blocks
        if self.bot_id:
            out.update(
                bot_id=self.bot_id,
                app_id=APP_ID,
                bot_profile={"id": self.bot_id, "app_id": APP_ID, "name": BOT_NAME},
            )
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
            if self.parent_user:
                out["parent_user_id"] = self.parent_user
        if self.edits:
            out["edited"] = {"user": self.user, "ts": _ts_of(self.time)}
        return out


@dataclass
class FakeEphemeral:
    """A message only `user` saw (chat.postEphemeral, a slash command's ack, a response_url)."""

    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    time: float


@dataclass
class FakeView:
    """A modal the app opened with views.open."""

    id: str
    view: dict[str, Any]
    user: str
    trigger_id: str
    time: float
    #: closed: submitted and accepted (an ack without response_action errors)
    closed: bool = False
    #: the ack payloads of its submissions, in order
    submissions: list[dict[str, Any] | None] = field(default_factory=list)

    @property
    def callback_id(self) -> str:
        return str(self.view.get("callback_id", ""))

    @property
    def private_metadata(self) -> str:
        return str(self.view.get("private_metadata", ""))

    @property
    def blocks(self) -> list[dict[str, Any]]:
        return list(self.view.get("blocks", []))


@dataclass
class Envelope:
    """One Socket Mode envelope the fake sent, and its ack."""

    id: str
    type: str  # events_api | interactive | slash_commands
    payload: dict[str, Any]
    time: float
    ack_time: float | None = None
    ack_payload: dict[str, Any] | None = None
    acks: int = 0
    #: recorded as a violation already (late or missing)
    flagged: bool = False
    #: the connection it went out on
    connection: SocketConnection | None = field(default=None, repr=False)

    def lost(self, deadline: float) -> bool:
        """An event whose connection closed before its deadline, unacked: Slack would retry
        it on another connection, so it is not held against the app (the fake does not
        redeliver it)."""
        closed = self.connection.closed_at if self.connection is not None else None
        return (
            self.type == "events_api"
            and self.ack_time is None
            and closed is not None
            and closed - self.time <= deadline
        )

    @property
    def acked(self) -> bool:
        return self.ack_time is not None

    @property
    def delay(self) -> float | None:
        return None if self.ack_time is None else self.ack_time - self.time


@dataclass
class Call:
    """One Web API request, accepted or not."""

    method: str
    args: dict[str, Any]
    token: str
    time: float
    ok: bool = False
    error: str | None = None
    status: int = 200
    result: Any = None


@dataclass
class SocketConnection:
    websocket: WebSocket
    ticket: str
    time: float
    connected: bool = True
    closed_at: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class _Failure:
    status: int
    error: str
    times: int
    retry_after: int


class SlackError(Exception):
    """An `{"ok": false, "error": ...}` answer."""

    def __init__(
        self,
        error: str,
        *,
        status: int = 200,
        violation: bool = True,
        detail: str = "",
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.violation = violation
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra


def _ts_of(seconds: float) -> str:
    micros = int(seconds * 1_000_000)
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


def _interactive(
    blocks: list[dict[str, Any]],
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(element, block) for every interactive element: actions elements and accessories."""
    for block in blocks:
        if not isinstance(block, dict):
            continue
        elements = block.get("elements") if block.get("type") == "actions" else None
        for element in elements or []:
            if isinstance(element, dict):
                yield element, block
        accessory = block.get("accessory")
        if isinstance(accessory, dict):
            yield accessory, block
        if block.get("type") == "input" and isinstance(block.get("element"), dict):
            yield block["element"], block


# -- Block Kit -------------------------------------------------------------------------------

_MESSAGE_BLOCKS = {
    "section",
    "actions",
    "context",
    "divider",
    "header",
    "image",
    "rich_text",
    "markdown",
}
_SELECTS = {"static_select", "multi_static_select"}
_CHOICES = {"checkboxes", "radio_buttons"}
_INPUT_ELEMENTS = {"plain_text_input", "number_input", *_SELECTS, *_CHOICES}
_ACTION_ELEMENTS = {"button", "overflow", *_SELECTS, *_CHOICES}


class BlockChecker:
    """Slack's Block Kit rules, collecting errors as Slack words them (with a JSON pointer)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.errors: list[str] = []

    def fail(self, pointer: str, message: str) -> None:
        self.errors.append(f"{message} [json-pointer:{pointer}]")

    def length(self, value: Any, limit: int, pointer: str, *, required: bool = True) -> None:
        if value is None and not required:
            return
        if not isinstance(value, str):
            self.fail(pointer, "must be a string")
        elif required and not value:
            self.fail(pointer, "must be more than 0 characters")
        elif len(value) > limit:
            self.fail(pointer, f"must be less than {limit + 1} characters")

    def text(
        self, obj: Any, limit: int, pointer: str, *, plain: bool = False, required: bool = True
    ) -> None:
        if obj is None and not required:
            return
        if not isinstance(obj, dict):
            self.fail(pointer, "must provide an object")
            return
        kind = obj.get("type")
        if kind not in ("plain_text", "mrkdwn") or (plain and kind != "plain_text"):
            wanted = "plain_text" if plain else "plain_text or mrkdwn"
            self.fail(f"{pointer}/type", f"must be {wanted}")
            return
        if "emoji" in obj and kind != "plain_text":
            self.fail(f"{pointer}/emoji", "emoji is only allowed on plain_text")
        self.length(obj.get("text"), limit, f"{pointer}/text")

    def options(self, options: Any, limit: int, pointer: str, *, mrkdwn: bool = False) -> None:
        if not isinstance(options, list) or not 1 <= len(options) <= limit:
            self.fail(pointer, f"must provide between 1 and {limit} items")
            return
        values = []
        for index, option in enumerate(options):
            where = f"{pointer}/{index}"
            if not isinstance(option, dict):
                self.fail(where, "must provide an object")
                continue
            text_limit = 2000 if mrkdwn else self.limits.option_text
            self.text(option.get("text"), text_limit, f"{where}/text", plain=not mrkdwn)
            self.length(option.get("value"), self.limits.option_value, f"{where}/value")
            values.append(option.get("value"))
        if len(set(map(str, values))) != len(values):
            self.fail(pointer, "option values must be unique")

    def element(self, element: Any, pointer: str, allowed: set[str]) -> str | None:
        """Check one element; its action_id."""
        if not isinstance(element, dict):
            self.fail(pointer, "must provide an object")
            return None
        kind = element.get("type")
        if kind not in allowed:
            self.fail(f"{pointer}/type", f"unsupported element type {kind!r}")
            return None
        action_id = element.get("action_id")
        self.length(action_id, self.limits.action_id, f"{pointer}/action_id", required=False)
        if kind == "button":
            self.text(element.get("text"), self.limits.button_text, f"{pointer}/text", plain=True)
            self.length(
                element.get("value"),
                self.limits.button_value,
                f"{pointer}/value",
                required=False,
            )
            self.length(element.get("url"), self.limits.url, f"{pointer}/url", required=False)
            if element.get("style") not in (None, "primary", "danger"):
                self.fail(f"{pointer}/style", "must be primary or danger")
        elif kind in _SELECTS or kind == "overflow":
            limit = 5 if kind == "overflow" else self.limits.select_options
            self.options(element.get("options"), limit, f"{pointer}/options")
            self.text(
                element.get("placeholder"),
                self.limits.placeholder,
                f"{pointer}/placeholder",
                plain=True,
                required=False,
            )
        elif kind in _CHOICES:
            self.options(
                element.get("options"),
                self.limits.choice_options,
                f"{pointer}/options",
                mrkdwn=True,
            )
        elif kind == "plain_text_input":
            for key in ("max_length", "min_length"):
                value = element.get(key)
                if value is not None and (
                    not isinstance(value, int) or not 0 <= value <= self.limits.input_max_length
                ):
                    self.fail(
                        f"{pointer}/{key}",
                        f"must be between 0 and {self.limits.input_max_length}",
                    )
        elif kind == "number_input" and not isinstance(element.get("is_decimal_allowed"), bool):
            self.fail(f"{pointer}/is_decimal_allowed", "must provide a boolean")
        return action_id if isinstance(action_id, str) else None

    def blocks(self, blocks: Any, pointer: str = "/blocks", *, modal: bool = False) -> None:
        limit = self.limits.modal_blocks if modal else self.limits.blocks
        if not isinstance(blocks, list):
            self.fail(pointer, "must provide an array")
            return
        if len(blocks) > limit:
            self.fail(pointer, f"no more than {limit} items allowed")
        allowed = _MESSAGE_BLOCKS | ({"input"} if modal else set())
        block_ids: set[str] = set()
        for index, block in enumerate(blocks):
            where = f"{pointer}/{index}"
            if not isinstance(block, dict):
                self.fail(where, "must provide an object")
                continue
            kind = block.get("type")
            if kind not in allowed:
                self.fail(f"{where}/type", f"unsupported type {kind!r}")
                continue
            block_id = block.get("block_id")
            if block_id is not None:
                self.length(block_id, self.limits.block_id, f"{where}/block_id")
                if block_id in block_ids:
                    self.fail(f"{where}/block_id", "block_id must be unique")
                block_ids.add(str(block_id))
            self.block(kind, block, where)

    def block(self, kind: str, block: dict[str, Any], where: str) -> None:
        if kind == "section":
            if block.get("text") is None and not block.get("fields"):
                self.fail(where, "must provide either text or fields")
            self.text(block.get("text"), self.limits.section_text, f"{where}/text", required=False)
            fields = block.get("fields") or []
            if len(fields) > self.limits.section_fields:
                self.fail(f"{where}/fields", f"no more than {self.limits.section_fields} items")
            for i, item in enumerate(fields):
                self.text(item, self.limits.field_text, f"{where}/fields/{i}")
            if block.get("accessory") is not None:
                self.element(block["accessory"], f"{where}/accessory", _ACTION_ELEMENTS)
        elif kind == "header":
            self.text(block.get("text"), self.limits.header_text, f"{where}/text", plain=True)
        elif kind == "markdown":
            self.length(block.get("text"), self.limits.markdown_text, f"{where}/text")
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= (
                self.limits.context_elements
            ):
                self.fail(f"{where}/elements", "must provide between 1 and 10 items")
                return
            for i, item in enumerate(elements):
                if isinstance(item, dict) and item.get("type") == "image":
                    continue
                self.text(item, self.limits.section_text, f"{where}/elements/{i}")
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= (
                self.limits.actions_elements
            ):
                self.fail(
                    f"{where}/elements",
                    f"must provide between 1 and {self.limits.actions_elements} items",
                )
                return
            seen: set[str] = set()
            for i, item in enumerate(elements):
                action_id = self.element(item, f"{where}/elements/{i}", _ACTION_ELEMENTS)
                if action_id is not None:
                    if action_id in seen:
                        self.fail(
                            f"{where}/elements/{i}/action_id",
                            "action_id must be unique in the block",
                        )
                    seen.add(action_id)
        elif kind == "image":
            self.length(block.get("image_url"), self.limits.url, f"{where}/image_url")
            self.length(block.get("alt_text"), 2000, f"{where}/alt_text")
        elif kind == "input":
            self.text(block.get("label"), self.limits.label, f"{where}/label", plain=True)
            self.text(
                block.get("hint"), self.limits.label, f"{where}/hint", plain=True, required=False
            )
            self.element(block.get("element"), f"{where}/element", _INPUT_ELEMENTS)


# -- the fake --------------------------------------------------------------------------------


class FakeSlack(InLoopServer):
    """Slack's Web API and Socket Mode for one app in one workspace, on 127.0.0.1."""

    platform_name = "the fake Slack"

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        bot_events: bool = True,
    ) -> None:
        self.limits = limits or Limits.real()
        self.clock = clock
        #: the bot's own posts and edits come back as message events (as on Slack)
        self.bot_events = bot_events
        self.bot_token = BOT_TOKEN
        self.app_token = APP_TOKEN
        #: the bot token's scopes (remove one to see `missing_scope`)
        self.scopes: set[str] = set(BOT_SCOPES)
        #: whether Socket Mode is on for the app (off: apps.connections.open is refused)
        self.socket_mode = True
        self.users: dict[str, dict[str, Any]] = {u["id"]: dict(u) for u in (ALICE, BOB, MALLORY)}
        self.groups: dict[str, set[str]] = {S0OPS: {ALICE["id"]}}
        everyone = {ALICE["id"], BOB["id"], MALLORY["id"]}
        self.channels: dict[str, FakeChannel] = {
            C0AGENTS: FakeChannel(C0AGENTS, "agents", {*everyone, BOT_USER_ID}),
            C0NOTIFY: FakeChannel(C0NOTIFY, "notifications", {ALICE["id"], BOB["id"], BOT_USER_ID}),
            C0OTHER: FakeChannel(C0OTHER, "random", {ALICE["id"]}),
        }
        #: slash commands the app's manifest declares
        self.commands: set[str] = {"/aep"}
        #: the app's App Home > Messages Tab (off: a post in a DM is `messages_tab_disabled`)
        self.messages_tab = True
        #: user id -> the bot's DM with them (`conversations.open`)
        self.ims: dict[str, str] = {}

        self.calls: list[Call] = []
        self.violations: list[Violation] = []
        self.violation_counts: Counter[str] = Counter()
        self.envelopes: list[Envelope] = []
        self.views: list[FakeView] = []
        self.sockets: list[SocketConnection] = []
        #: what came to a response_url: (url path, body)
        self.responses: list[tuple[str, dict[str, Any]]] = []
        self._messages: dict[tuple[str, str], FakeMessage] = {}
        self._ephemerals: list[FakeEphemeral] = []
        self._last_ts = 0
        self._tickets: set[str] = set()
        self._triggers: dict[str, tuple[float, str, bool]] = {}  # id -> (time, user, used)
        #: response_url path -> (user, channel, the pressed message)
        self._response_targets: dict[str, tuple[str, str, FakeMessage | None]] = {}
        self._buckets: dict[tuple[str, str], FixedWindow] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = 0
        self._methods: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "conversations.info": self._conversations_info,
            "conversations.list": self._conversations_list,
            "conversations.members": self._conversations_members,
            "users.conversations": self._users_conversations,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.getPermalink": self._permalink,
            "views.open": self._views_open,
            "users.info": self._users_info,
            "usergroups.users.list": self._group_users,
            "conversations.open": self._conversations_open,
        }
        super().__init__()
        self.app = Starlette(
            routes=[
                Route("/api/{method}", self._api, methods=["GET", "POST"]),
                Route("/actions/{rest:path}", self._response_url, methods=["POST"]),
                WebSocketRoute("/socket", self._socket),
            ]
        )

    # -- serving -------------------------------------------------------------------------------

    @property
    def api_base_url(self) -> str:
        """slack-sdk's `base_url`: `http://127.0.0.1:PORT/api/`."""
        return self.url("/api/")

    async def closing(self) -> None:
        """Cancel the pending tasks and close every Socket Mode connection so the server can
        stop."""
        for task in list(self._tasks):
            task.cancel()
        for connection in self.connected:
            with contextlib.suppress(Exception):
                await connection.websocket.close(1001)

    # -- inspection ----------------------------------------------------------------------------

    def messages(self, channel: str, *, thread_ts: str | None = None) -> list[FakeMessage]:
        """Messages in a channel, oldest first: all of them, or one thread's (parent first)."""
        return [
            m
            for m in sorted(self._messages.values(), key=lambda m: m.ts)
            if m.channel == channel
            and (thread_ts is None or m.ts == thread_ts or m.thread_ts == thread_ts)
        ]

    def message(self, channel: str, ts: str) -> FakeMessage:
        """A message by channel and ts; KeyError if there is none."""
        return self._messages[(channel, ts)]

    def dms(self, user: dict[str, Any] | str) -> list[FakeMessage]:
        """The bot's messages in its direct message with `user` (none if never opened)."""
        im = self.ims.get(user if isinstance(user, str) else user["id"])
        return [] if im is None else self.messages(im)

    def thread(self, channel: str, ts: str) -> list[FakeMessage]:
        """The replies under the parent message `ts`, oldest first (the parent not included)."""
        return [m for m in self.messages(channel, thread_ts=ts) if m.ts != ts]

    def parents(self, channel: str) -> list[FakeMessage]:
        """Top-level messages of a channel (not thread replies), oldest first."""
        return [m for m in self.messages(channel) if m.thread_ts in (None, m.ts)]

    def ephemeral(self, user: dict[str, Any] | str) -> list[FakeEphemeral]:
        """What only `user` saw, oldest first."""
        user_id = user if isinstance(user, str) else user["id"]
        return [e for e in self._ephemerals if e.user == user_id]

    def view(self, view_id: str) -> FakeView:
        for found in self.views:
            if found.id == view_id:
                return found
        raise KeyError(view_id)

    @property
    def acks(self) -> list[float]:
        """The ack delay of every acked envelope, in sending order."""
        return [e.delay for e in self.envelopes if e.delay is not None]

    def unanswered(self) -> list[Envelope]:
        """Envelopes not acked within the deadline (Slack showed an error or retried), as of
        now; each is recorded as a violation once."""
        deadline = self.limits.ack_deadline
        now = self.clock()
        found = [
            e
            for e in self.envelopes
            if (e.ack_time is None and now - e.time > deadline and not e.lost(deadline))
            or (e.delay is not None and e.delay > deadline)
        ]
        for envelope in found:
            if not envelope.flagged:
                envelope.flagged = True
                kind = "ack_missing" if envelope.ack_time is None else "ack_late"
                self._violate(kind, envelope.type, f"envelope {envelope.id}")
        return found

    def calls_to(self, method: str, *, ok: bool | None = None) -> list[Call]:
        return [c for c in self.calls if c.method == method and (ok is None or c.ok == ok)]

    @property
    def connected(self) -> list[SocketConnection]:
        return [s for s in self.sockets if s.connected]

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

    async def wait_ack(self, envelope: Envelope) -> Envelope:
        """Wait until the envelope is acked or its deadline (plus a margin) has passed."""
        with contextlib.suppress(TimeoutError):
            await self.wait_until(
                lambda: envelope.acked, self.limits.ack_deadline + 0.5, what="the ack"
            )
        self.unanswered()
        return envelope

    # -- injection -----------------------------------------------------------------------------

    def add_user(
        self, user_id: str, name: str, *, channels: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """Another workspace member (in C0AGENTS and `channels`)."""
        user = {"id": user_id, "name": name, "real_name": name.title()}
        self.users[user_id] = user
        for channel in (C0AGENTS, *channels):
            self.channels[channel].members.add(user_id)
        return user

    def fail_next(
        self,
        method: str,
        error: str = "internal_error",
        *,
        status: int = 500,
        times: int = 1,
        retry_after: int = 1,
    ) -> None:
        """Answer the next `times` calls to `method` ("*" for any) with `error` and `status`
        (429: with `Retry-After`), doing nothing. Not a violation."""
        self._failures.setdefault(method, []).append(_Failure(status, error, times, retry_after))

    async def press(
        self,
        user: dict[str, Any],
        message: FakeMessage,
        action_id: str,
        *,
        seen: int | None = None,
        wait: bool = True,
    ) -> Envelope:
        """A user clicks a button of a message: an `interactive` `block_actions` envelope with
        the button as posted (its value from the message's current blocks), a fresh
        `trigger_id` and a `response_url`. Pressing what is not on the message is an error.
        `seen=i`: the user's client still shows `message.edits[i]` (it has not redrawn the
        edit yet), so a button the edit removed can still be pressed, as on Slack."""
        found = self._messages[(message.channel, message.ts)]
        shown = found.blocks if seen is None else found.edits[seen].blocks
        pressed = next(
            (
                (element, block)
                for element, block in _interactive(shown)
                if element.get("action_id") == action_id and element.get("type") == "button"
            ),
            None,
        )
        if pressed is None:
            raise LookupError(
                f"message {found.ts} has no button {action_id!r}; it has {found.action_ids}"
            )
        element, block = pressed
        channel = self.channels[found.channel]
        action = {
            "type": "button",
            "action_id": action_id,
            "block_id": block.get("block_id", ""),
            "text": element.get("text"),
            "action_ts": _ts_of(time.time()),
        }
        if "value" in element:
            action["value"] = element["value"]
        if "style" in element:
            action["style"] = element["style"]
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": found.ts,
            "channel_id": found.channel,
            "is_ephemeral": False,
        }
        if found.thread_ts:
            container["thread_ts"] = found.thread_ts
        payload = {
            **self._interaction_base(user),
            "type": "block_actions",
            "container": container,
            "channel": {"id": channel.id, "name": channel.name},
            "message": {**found.to_api(), "blocks": shown},
            "state": {"values": {}},
            "response_url": self._response_url_for(user["id"], found.channel, found),
            "actions": [action],
        }
        return await self._send_envelope("interactive", payload, wait=wait)

    async def submit(
        self,
        user: dict[str, Any],
        view: FakeView | str,
        values: Mapping[str, Any],
        *,
        wait: bool = True,
    ) -> dict[str, Any] | None:
        """A user fills in and submits an open modal: `values` maps an input block's
        `block_id` to a string (text or number input), an option value (static_select,
        radio_buttons) or a list of them (multi_static_select, checkboxes). Slack's client only
        submits what the form allows (required inputs filled, lengths, numbers, known options),
        so anything else is an error here. Returns the ack's payload (None: a bare ack)."""
        found = self.view(view) if isinstance(view, str) else view
        if found.closed:
            raise LookupError(f"view {found.id} is closed")
        inputs = {b.get("block_id"): b for b in found.blocks if b.get("type") == "input"}
        unknown = set(values) - set(inputs)
        if unknown:
            raise ValueError(f"the view has no input blocks {sorted(unknown)}")
        state: dict[str, dict[str, Any]] = {}
        for block_id, block in inputs.items():
            element = block["element"]
            state[str(block_id)] = {
                element.get("action_id", "v"): _state_value(
                    element, values.get(str(block_id)), optional=bool(block.get("optional"))
                )
            }
        sent_view = {
            **found.view,
            "id": found.id,
            "team_id": TEAM_ID,
            "app_id": APP_ID,
            "bot_id": BOT_ID,
            "state": {"values": state},
            "hash": secrets.token_hex(8),
            "root_view_id": found.id,
            "previous_view_id": None,
        }
        payload = {
            **self._interaction_base(user),
            "type": "view_submission",
            "view": sent_view,
            "response_urls": [],
        }
        envelope = await self._send_envelope(
            "interactive", payload, wait=wait, accepts_response_payload=True
        )
        answer = envelope.ack_payload
        found.submissions.append(answer)
        if envelope.acked and not (answer and answer.get("response_action") == "errors"):
            found.closed = True
        return answer

    async def say(
        self,
        user: dict[str, Any],
        channel: str,
        text: str,
        thread_ts: str | None = None,
        *,
        wait: bool = True,
    ) -> FakeMessage:
        """A user writes in a channel (or a thread): store it and, when the bot is in that
        channel, send the `message` event."""
        if thread_ts is not None and (channel, thread_ts) not in self._messages:
            raise LookupError(f"no message {thread_ts} in {channel} to reply to")
        message = self._store(channel, text, [], user["id"], thread_ts=thread_ts)
        if BOT_USER_ID in self.channels[channel].members:
            event = {**message.to_api(), "client_msg_id": secrets.token_hex(16)}
            envelope = await self._send_envelope(
                "events_api", self._event_payload(event, channel), wait=wait
            )
            message.envelope_id = envelope.id
        return message

    async def slash(
        self,
        user: dict[str, Any],
        command: str,
        text: str = "",
        channel: str = C0AGENTS,
        *,
        wait: bool = True,
    ) -> dict[str, Any] | None:
        """A user runs a slash command the app declares: a `slash_commands` envelope. Returns the
        ack's payload; its text is what the user saw (recorded as an ephemeral to them)."""
        if command not in self.commands:
            raise LookupError(f"the app declares no slash command {command!r}")
        target = self.channels[channel]
        payload = {
            "token": "fake-verification-token",
            "team_id": TEAM_ID,
            "team_domain": TEAM_DOMAIN,
            "channel_id": target.id,
            "channel_name": target.name,
            "user_id": user["id"],
            "user_name": user["name"],
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": self._response_url_for(user["id"], channel, None),
            "trigger_id": self._trigger(user["id"]),
        }
        envelope = await self._send_envelope(
            "slash_commands", payload, wait=wait, accepts_response_payload=True
        )
        answer = envelope.ack_payload
        if answer and (answer.get("text") or answer.get("blocks")):
            if answer.get("response_type") == "in_channel":
                self._store(channel, answer.get("text", ""), answer.get("blocks", []), user["id"])
            else:
                self._ephemerals.append(
                    FakeEphemeral(
                        channel,
                        user["id"],
                        answer.get("text", ""),
                        answer.get("blocks", []),
                        None,
                        self.clock(),
                    )
                )
        return answer

    async def drop_socket(self) -> None:
        """Close every Socket Mode connection abruptly (a network drop): slack-sdk reconnects
        with a new `apps.connections.open`."""
        for connection in self.connected:
            connection.connected = False
            connection.closed_at = self.clock()
            with contextlib.suppress(Exception):
                await connection.websocket.close(1011)

    async def refresh_socket(self) -> None:
        """Send Slack's `disconnect` (refresh_requested) on every connection, as Slack does
        every few hours: the client opens a new connection and drops the old one."""
        for connection in self.connected:
            await self._send_text(
                connection,
                {
                    "type": "disconnect",
                    "reason": "refresh_requested",
                    "debug_info": {"host": "fake-applink"},
                },
            )

    # -- plumbing ------------------------------------------------------------------------------

    def _violate(self, kind: str, method: str, detail: str = "") -> None:
        self.violations.append(Violation(kind, method, self.clock(), detail))
        self.violation_counts[kind] += 1

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids:08d}"

    def _next_ts(self) -> str:
        micros = max(self._last_ts + 1, int(time.time() * 1_000_000))
        self._last_ts = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _store(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]],
        user: str,
        *,
        thread_ts: str | None = None,
        bot_id: str | None = None,
    ) -> FakeMessage:
        parent = self._messages.get((channel, thread_ts)) if thread_ts else None
        if parent is not None:  # a reply to a reply goes under the thread's parent, as on Slack
            parent = self._messages.get((channel, parent.thread_ts or parent.ts), parent)
        message = FakeMessage(
            channel,
            self._next_ts(),
            text,
            blocks,
            user,
            self.clock(),
            parent.ts if parent is not None else thread_ts,
            bot_id,
            parent.user if parent is not None else None,
        )
        self._messages[(channel, message.ts)] = message
        return message

    def _trigger(self, user_id: str) -> str:
        trigger = f"{self._new_id('')}.{secrets.token_hex(6)}"
        self._triggers[trigger] = (self.clock(), user_id, False)
        return trigger

    def _response_url_for(self, user: str, channel: str, message: FakeMessage | None) -> str:
        path = f"/actions/{TEAM_ID}/{self._new_id('')}/{secrets.token_hex(8)}"
        self._response_targets[path] = (user, channel, message)
        return self.url(path)

    def _interaction_base(self, user: dict[str, Any]) -> dict[str, Any]:
        return {
            "user": {
                "id": user["id"],
                "username": user["name"],
                "name": user["name"],
                "team_id": TEAM_ID,
            },
            "api_app_id": APP_ID,
            "token": "fake-verification-token",
            "trigger_id": self._trigger(user["id"]),
            "team": {"id": TEAM_ID, "domain": TEAM_DOMAIN},
            "enterprise": None,
            "is_enterprise_install": False,
        }

    def _event_payload(self, event: dict[str, Any], channel: str) -> dict[str, Any]:
        event = {**event, "channel": channel, "channel_type": "channel"}
        event.setdefault("event_ts", event.get("ts", _ts_of(time.time())))
        return {
            "token": "fake-verification-token",
            "team_id": TEAM_ID,
            "context_team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": self._new_id("Ev"),
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": TEAM_ID,
                    "user_id": BOT_USER_ID,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }

    async def _send_text(self, connection: SocketConnection, frame: dict[str, Any]) -> None:
        async with connection.lock:
            await connection.websocket.send_text(json.dumps(frame))

    async def _send_envelope(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        wait: bool,
        accepts_response_payload: bool = False,
    ) -> Envelope:
        """Send an envelope on the newest connection (waiting up to 5 s for one)."""
        await self.wait_until(lambda: self.connected, what="a Socket Mode connection")
        connection = self.connected[-1]
        envelope = Envelope(
            self._new_id("env-"), kind, payload, self.clock(), connection=connection
        )
        self.envelopes.append(envelope)
        frame = {
            "envelope_id": envelope.id,
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
        }
        if kind == "events_api":
            frame.update(retry_attempt=0, retry_reason="")
        await self._send_text(connection, frame)
        if wait:
            await self.wait_ack(envelope)
        return envelope

    def _bot_event(self, channel: str, event: dict[str, Any]) -> None:
        """Tell the app about the bot's own message or edit, after the answer (as Slack does)."""
        if not self.bot_events or not self.connected:
            return
        if BOT_USER_ID not in self.channels[channel].members or self.channels[channel].is_im:
            return  # the manifest subscribes to no `message.im`
        payload = self._event_payload(event, channel)
        task = asyncio.get_running_loop().create_task(
            self._quietly(self._send_envelope("events_api", payload, wait=False))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _quietly(work: Any) -> None:
        with contextlib.suppress(Exception):
            await work

    # -- Socket Mode ---------------------------------------------------------------------------

    async def _socket(self, websocket: WebSocket) -> None:
        ticket = websocket.query_params.get("ticket", "")
        if ticket not in self._tickets:
            await websocket.close(4001)
            return
        await websocket.accept()
        connection = SocketConnection(websocket, ticket, self.clock())
        self.sockets.append(connection)
        await self._send_text(
            connection,
            {
                "type": "hello",
                "num_connections": len(self.connected),
                "debug_info": {"host": "fake-applink", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            },
        )
        try:
            while True:
                raw = await websocket.receive_text()
                self._on_frame(raw)
        except WebSocketDisconnect:
            pass
        finally:
            connection.connected = False
            connection.closed_at = self.clock()

    def _on_frame(self, raw: str) -> None:
        try:
            frame = json.loads(raw)
        except ValueError:
            self._violate("bad_frame", "socket", "not JSON")
            return
        envelope_id = frame.get("envelope_id") if isinstance(frame, dict) else None
        envelope = next((e for e in self.envelopes if e.id == envelope_id), None)
        if envelope is None:
            self._violate("ack_unknown", "socket", f"envelope {envelope_id}")
            return
        envelope.acks += 1
        if envelope.acks > 1:
            self._violate("ack_twice", envelope.type, f"envelope {envelope.id}")
            return
        envelope.ack_time = self.clock()
        payload = frame.get("payload")
        envelope.ack_payload = payload if isinstance(payload, dict) else None

    async def _response_url(self, request: Request) -> Response:
        """A `response_url` answer: an ephemeral to the user (the default), a message in the
        channel (`response_type: in_channel`), or a change to the pressed message
        (`replace_original`, `delete_original`)."""
        path = request.url.path
        target = self._response_targets.get(path)
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            body = None
        if target is None or not isinstance(body, dict):
            self._violate("bad_response_url", "response_url", path)
            return Response("invalid_payload", status_code=404, media_type="text/plain")
        self.responses.append((path, body))
        user, channel, message = target
        text, blocks = str(body.get("text") or ""), list(body.get("blocks") or [])
        thread_ts = message.thread_ts if message is not None else None
        if body.get("delete_original") and message is not None:
            del self._messages[(message.channel, message.ts)]
        elif body.get("replace_original") and message is not None:
            message.edits.append(MessageVersion(message.text, message.blocks, message.time))
            message.text, message.blocks, message.time = text, blocks, self.clock()
        elif body.get("response_type") == "in_channel":
            self._store(channel, text, blocks, BOT_USER_ID, thread_ts=thread_ts, bot_id=BOT_ID)
        else:
            self._ephemerals.append(
                FakeEphemeral(channel, user, text, blocks, thread_ts, self.clock())
            )
        return Response("ok", media_type="text/plain")

    # -- Web API -------------------------------------------------------------------------------

    async def _read_args(self, request: Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query_params)
        raw = await request.body()
        kind = request.headers.get("content-type", "")
        if raw and kind.startswith("application/json"):
            body = json.loads(raw)
            if isinstance(body, dict):
                args.update(body)
        elif raw:
            args.update(parse_qsl(raw.decode(), keep_blank_values=True))
        return args

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        args = await self._read_args(request)
        header = request.headers.get("authorization", "")
        token = header[7:] if header.startswith("Bearer ") else str(args.pop("token", ""))
        args.pop("token", None)
        call = Call(method, args, token, self.clock())
        self.calls.append(call)
        headers: dict[str, str] = {}
        if token == self.bot_token:
            headers["x-oauth-scopes"] = ",".join(sorted(self.scopes))
            if method in METHOD_SCOPES:
                headers["x-accepted-oauth-scopes"] = METHOD_SCOPES[method]
        try:
            handler = self._methods.get(method)
            if handler is None:
                raise SlackError("unknown_method", detail=method)
            self._authorize(method, token)
            self._injected_failure(method)
            self._admit(method, args)
            result = handler(args, method)
        except SlackError as error:
            call.error, call.status = error.error, error.status
            if error.violation:
                self._violate(error.error, method, error.detail)
            body = {"ok": False, "error": error.error, **error.extra}
            return _json(body, error.status, {**headers, **error.headers})
        call.ok, call.result = True, result
        return _json({"ok": True, **result}, 200, headers)

    def _authorize(self, method: str, token: str) -> None:
        if not token:
            raise SlackError("not_authed", violation=False)
        if token not in (self.bot_token, self.app_token):
            raise SlackError("invalid_auth", violation=False)
        if (method == "apps.connections.open") != (token == self.app_token):
            raise SlackError("not_allowed_token_type", violation=False)
        needed = METHOD_SCOPES.get(method)
        if token == self.bot_token and needed is not None and needed not in self.scopes:
            raise SlackError("missing_scope", needed=needed, provided=",".join(sorted(self.scopes)))

    def _injected_failure(self, method: str) -> None:
        for name in (method, "*"):
            queue = self._failures.get(name)
            if queue:
                failure = queue[0]
                failure.times -= 1
                if failure.times <= 0:
                    queue.pop(0)
                headers = {"Retry-After": str(failure.retry_after)} if failure.status == 429 else {}
                raise SlackError(
                    failure.error, status=failure.status, violation=False, headers=headers
                )

    def _admit(self, method: str, args: dict[str, Any]) -> None:
        now = self.clock()
        buckets = []
        window = self.limits.per_channel.get(method)
        if window is not None:
            buckets.append(self._bucket((method, str(args.get("channel", ""))), window))
        window = self.limits.per_workspace.get(method)
        if window is not None:
            buckets.append(self._bucket((method, ""), window))
        wait = max((b.wait(now) for b in buckets), default=0.0)
        if wait > 0:
            retry_after = max(1, math.ceil(wait))
            raise SlackError(
                "ratelimited",
                status=429,
                detail=f"retry after {wait:.3f} s",
                headers={"Retry-After": str(retry_after)},
            )
        for bucket in buckets:
            bucket.take(now)

    def _bucket(self, key: tuple[str, str], window: Window) -> FixedWindow:
        bucket = self._buckets.get(key)
        if bucket is None or bucket.window != window:
            bucket = self._buckets[key] = FixedWindow(window)
        return bucket

    # -- Web API: methods ----------------------------------------------------------------------

    def _channel(self, args: dict[str, Any], *, member: bool = False) -> FakeChannel:
        found = self.channels.get(str(args.get("channel", "")))
        if found is None or (found.is_private and BOT_USER_ID not in found.members):
            raise SlackError("channel_not_found", detail=str(args.get("channel")))
        if member and BOT_USER_ID not in found.members:
            raise SlackError("not_in_channel", detail=found.id)
        return found

    def _auth_test(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        return {
            "url": TEAM_URL,
            "team": TEAM_NAME,
            "user": BOT_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _connections_open(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        if not self.socket_mode:
            raise SlackError("socket_mode_not_enabled", violation=False)  # (fake) wording
        ticket = secrets.token_hex(8)
        self._tickets.add(ticket)
        return {"url": self.ws_url(f"/socket?ticket={ticket}")}

    def _conversations_info(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        return {"channel": self._channel(args).to_api()}

    def _page(self, items: list[Any], args: dict[str, Any], key: str) -> dict[str, Any]:
        limit = int(args.get("limit") or 100)
        start = int(args.get("cursor") or 0)
        rest = start + limit
        cursor = str(rest) if rest < len(items) else ""
        return {key: items[start:rest], "response_metadata": {"next_cursor": cursor}}

    def _typed(self, args: dict[str, Any]) -> list[FakeChannel]:
        types = set(str(args.get("types") or "public_channel").split(","))
        return [
            c
            for c in self.channels.values()
            if ("private_channel" if c.is_private else "public_channel") in types
            and (not c.is_private or BOT_USER_ID in c.members)
            and not c.is_im  # `im` is a type of its own, which the channel never lists
        ]

    def _conversations_list(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        return self._page([c.to_api() for c in self._typed(args)], args, "channels")

    def _users_conversations(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        user = str(args.get("user") or BOT_USER_ID)
        found = [c.to_api() for c in self._typed(args) if user in c.members]
        return self._page(found, args, "channels")

    def _conversations_members(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        return self._page(sorted(self._channel(args).members), args, "members")

    def _conversations_open(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        """Open (or find) the bot's DM with one user, as Slack answers: the IM's id, and
        `already_open` when it was. Refusals the bridge cannot foresee (a person's id that
        is wrong, a bot's, a deactivated account) are not violations."""
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if not users:
            raise SlackError("users_list_not_supplied")
        if len(users) > 1:
            raise SlackError("method_not_supported_for_channel_type", detail="the fake has no MPIM")
        (user,) = users
        known = self.users.get(user)
        if user == BOT_USER_ID or (known is not None and known.get("is_bot")):
            raise SlackError("cannot_dm_bot", violation=False, detail=user)
        if known is None:
            raise SlackError("user_not_found", violation=False, detail=user)
        if known.get("deleted"):
            raise SlackError("user_disabled", violation=False, detail=user)
        already = user in self.ims
        if not already:
            im = self._new_id("D")
            self.channels[im] = FakeChannel(im, im, {user, BOT_USER_ID}, is_im=True, user=user)
            self.ims[user] = im
        channel = self.channels[self.ims[user]]
        shown = (
            channel.to_api()
            if str(args.get("return_im", "")).lower() in ("true", "1")
            else {"id": channel.id}
        )
        return {"no_op": already, "already_open": already, "channel": shown}

    def _users_info(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        user_id = str(args.get("user", ""))
        if user_id == BOT_USER_ID:
            return {"user": _user_to_api({"id": BOT_USER_ID, "name": BOT_NAME}, bot=True)}
        user = self.users.get(user_id)
        if user is None:
            raise SlackError("user_not_found", detail=user_id)
        return {"user": _user_to_api(user)}

    def _group_users(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        group = str(args.get("usergroup", ""))
        if group not in self.groups:
            raise SlackError("no_such_subteam", detail=group)
        return {"users": sorted(self.groups[group])}

    def _permalink(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        channel = self._channel(args)
        ts = str(args.get("message_ts", ""))
        message = self._messages.get((channel.id, ts))
        if message is None:
            raise SlackError("message_not_found", detail=ts)
        link = f"{TEAM_URL}archives/{channel.id}/p{ts.replace('.', '')}"
        if message.thread_ts and message.thread_ts != ts:
            link += f"?thread_ts={message.thread_ts}&cid={channel.id}"
        return {"channel": channel.id, "permalink": link}

    def _content(self, args: dict[str, Any], method: str) -> tuple[str, list[dict[str, Any]]]:
        """The text and blocks of a post or an edit, checked."""
        text = args.get("text")
        text = "" if text is None else str(text)
        blocks: Any = args.get("blocks")
        if isinstance(blocks, str):
            try:
                blocks = json.loads(blocks) if blocks else None
            except ValueError:
                raise SlackError("invalid_blocks_format", detail="blocks is not JSON") from None
        if not text and not blocks:
            raise SlackError("no_text")
        if blocks is not None:
            checker = BlockChecker(self.limits)
            checker.blocks(blocks)
            if checker.errors:
                raise SlackError(
                    "invalid_blocks",
                    detail="; ".join(checker.errors),
                    errors=checker.errors,
                    response_metadata={"messages": [f"[ERROR] {e}" for e in checker.errors]},
                )
        if len(text) > self.limits.text:
            self._violate("text_truncated", method, f"{len(text)} characters")
            text = text[: self.limits.text]
        return text, list(blocks or [])

    def _post_message(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        channel = self._channel(args, member=True)
        if channel.is_im and not self.messages_tab:
            raise SlackError("messages_tab_disabled", violation=False, detail=channel.id)
        thread_ts = str(args.get("thread_ts") or "") or None
        if thread_ts is not None:
            parent = self._messages.get((channel.id, thread_ts))
            if parent is None:
                raise SlackError("thread_not_found", detail=str(thread_ts))
        text, blocks = self._content(args, method)
        message = self._store(
            channel.id, text, blocks, BOT_USER_ID, thread_ts=thread_ts, bot_id=BOT_ID
        )
        message.reply_broadcast = str(args.get("reply_broadcast", "")).lower() in ("true", "1")
        self._bot_event(channel.id, message.to_api())
        return {"channel": channel.id, "ts": message.ts, "message": message.to_api()}

    def _update(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        channel = self._channel(args)
        ts = str(args.get("ts", ""))
        message = self._messages.get((channel.id, ts))
        if message is None:
            raise SlackError("message_not_found", detail=ts)
        if message.bot_id != BOT_ID:
            raise SlackError("cant_update_message", detail=ts)
        text, blocks = self._content(args, method)
        previous = message.to_api()
        message.edits.append(MessageVersion(message.text, message.blocks, message.time))
        message.text, message.blocks, message.time = text, blocks, self.clock()
        self._bot_event(
            channel.id,
            {
                "type": "message",
                "subtype": "message_changed",
                "hidden": True,
                "message": message.to_api(),
                "previous_message": previous,
                "ts": self._next_ts(),
            },
        )
        return {"channel": channel.id, "ts": ts, "text": text, "message": message.to_api()}

    def _post_ephemeral(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        channel = self._channel(args, member=True)
        user = str(args.get("user", ""))
        if user not in channel.members:
            raise SlackError("user_not_in_channel", detail=user)
        text, blocks = self._content(args, method)
        thread_ts = args.get("thread_ts") or None
        self._ephemerals.append(
            FakeEphemeral(channel.id, user, text, blocks, thread_ts, self.clock())
        )
        return {"message_ts": self._next_ts()}

    def _views_open(self, args: dict[str, Any], method: str) -> dict[str, Any]:
        trigger = str(args.get("trigger_id", ""))
        known = self._triggers.get(trigger)
        if known is None:
            raise SlackError("invalid_trigger_id", detail=trigger)
        issued, user, used = known
        if used:
            raise SlackError("exchanged_trigger_id", detail=trigger)
        age = self.clock() - issued
        if age > self.limits.trigger_lifetime:
            raise SlackError("expired_trigger_id", detail=f"{age:.2f} s old")
        view: Any = args.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                view = None
        errors = self._check_view(view)
        if errors:
            raise SlackError(
                "invalid_arguments",
                detail="; ".join(errors),
                response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
            )
        self._triggers[trigger] = (issued, user, True)
        opened = FakeView(self._new_id("V"), view, user, trigger, self.clock())
        self.views.append(opened)
        return {
            "view": {
                **view,
                "id": opened.id,
                "team_id": TEAM_ID,
                "app_id": APP_ID,
                "bot_id": BOT_ID,
                "state": {"values": {}},
                "hash": secrets.token_hex(8),
                "root_view_id": opened.id,
                "previous_view_id": None,
            }
        }

    def _check_view(self, view: Any) -> list[str]:
        checker = BlockChecker(self.limits)
        if not isinstance(view, dict):
            checker.fail("/view", "must provide an object")
            return checker.errors
        if view.get("type") != "modal":
            checker.fail("/view/type", "must be modal")
        checker.text(view.get("title"), self.limits.view_title, "/view/title", plain=True)
        for key in ("submit", "close"):
            checker.text(
                view.get(key), self.limits.view_title, f"/view/{key}", plain=True, required=False
            )
        blocks = view.get("blocks")
        checker.blocks(blocks, "/view/blocks", modal=True)
        has_input = isinstance(blocks, list) and any(
            isinstance(b, dict) and b.get("type") == "input" for b in blocks
        )
        if has_input and view.get("submit") is None:
            checker.fail("/view/submit", "a view with inputs must have a submit button")
        for key, limit in (
            ("callback_id", self.limits.callback_id),
            ("private_metadata", self.limits.private_metadata),
        ):
            checker.length(view.get(key), limit, f"/view/{key}", required=False)
        return checker.errors


def _state_value(element: dict[str, Any], value: Any, *, optional: bool) -> dict[str, Any]:
    """One input's entry in `view.state.values`, as Slack's client fills it in."""
    kind = element.get("type")
    if value in (None, "", []) and not optional:
        raise ValueError(f"input {element.get('action_id')!r} is required")
    options: dict[str, dict[str, Any]] = {
        str(o.get("value")): o for o in element.get("options") or []
    }

    def option(chosen: Any) -> dict[str, Any]:
        if str(chosen) not in options:
            raise ValueError(f"{chosen!r} is not among the options {sorted(options)}")
        return options[str(chosen)]

    if kind == "plain_text_input":
        text = "" if value is None else str(value)
        low, high = element.get("min_length", 0), element.get("max_length", 3000)
        if text and not low <= len(text) <= high:
            raise ValueError(f"text input takes {low}-{high} characters, not {len(text)}")
        return {"type": kind, "value": text or None}
    if kind == "number_input":
        text = "" if value is None else str(value)
        if text:
            number = float(text)  # Slack's client only submits numbers
            if not element.get("is_decimal_allowed") and not number.is_integer():
                raise ValueError(f"{text!r} is not a whole number")
            for key, ok in (
                ("min_value", number >= float(element.get("min_value", number))),
                ("max_value", number <= float(element.get("max_value", number))),
            ):
                if not ok:
                    raise ValueError(f"{text!r} is outside {key}")
        return {"type": kind, "value": text or None}
    if kind in ("static_select", "radio_buttons"):
        return {"type": kind, "selected_option": None if value is None else option(value)}
    if kind in ("multi_static_select", "checkboxes"):
        chosen = [] if value is None else [option(v) for v in value]
        return {"type": kind, "selected_options": chosen}
    raise ValueError(f"the fake cannot fill in a {kind!r}")


def _user_to_api(user: dict[str, Any], *, bot: bool = False) -> dict[str, Any]:
    name = user.get("real_name", user["name"])
    return {
        "id": user["id"],
        "team_id": TEAM_ID,
        "name": user["name"],
        "real_name": name,
        "deleted": False,
        "is_bot": bot,
        "is_app_user": False,
        "profile": {"real_name": name, "display_name": user["name"]},
    }


def _json(body: dict[str, Any], status: int, headers: dict[str, str]) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=status,
        headers=headers,
        media_type="application/json; charset=utf-8",
    )


def make_config(fake: FakeSlack, **overrides: Any) -> dict[str, Any]:
    """A valid `channels.<name>` block for `"type": "slack"` pointed at the fake."""
    return {
        "type": "slack",
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "channel_id": C0AGENTS,
        "notifications_channel_id": C0NOTIFY,
        "approvers": [ALICE["id"]],
        "api_base_url": fake.api_base_url,
        **overrides,
    }


__all__ = [
    "ALICE",
    "APP_ID",
    "APP_TOKEN",
    "BOB",
    "BOT_ID",
    "BOT_NAME",
    "BOT_SCOPES",
    "BOT_TOKEN",
    "BOT_USER_ID",
    "C0AGENTS",
    "C0NOTIFY",
    "C0OTHER",
    "MALLORY",
    "S0OPS",
    "TEAM_ID",
    "TEAM_URL",
    "Envelope",
    "FakeChannel",
    "FakeEphemeral",
    "FakeMessage",
    "FakeSlack",
    "FakeView",
    "Limits",
    "Violation",
    "Window",
    "make_config",
]
