"""`SlackChannel`: each agent session a thread under a parent message, each question a card
with Block Kit buttons, over Socket Mode (no public URL).

The adapter translates, the core decides. Every platform call the core makes arrives through
its outbox, which keeps Slack's limits (declared in `capabilities`); the adapter turns it into
slack-sdk calls and slack-sdk's failures into `ChannelError`/`RateLimited`. slack-sdk never
waits out a rate limit itself: no `AsyncRateLimitErrorRetryHandler` is added, so a 429 raises
at once with Slack's `Retry-After` and the outbox schedules the retry.

A session is a parent message in `channel_id` (its name and state, edited as they change)
and everything else replies in its thread (`thread_ts`): the thread's id is the parent's `ts`.

Presses arrive over Socket Mode (slack-bolt's `AsyncApp` and `AsyncSocketModeHandler`; the
listeners are in `events`). An
option's button carries `{card key}:{option index}` as its `value` (`look.card_key`), so a
card posted before a restart still answers: the adapter keeps nothing to answer a press.
Every listener acks first (Slack wants it within 3 s), then hands the press to the core by
card id (`core.resolve_permission`); the core checks approvers (user ids, and the members of
the user groups in `approver_roles`) and a refusal is told to the presser alone (an
ephemeral message in the card's thread). Words in a session's thread while one question
there takes words are its answer (`core.answer_text`); other words go to the core as
`handle_incoming_message`.

Forms: a "Fill in" button asks `core.may_answer` first (a stranger opens nothing), then opens
the form as a modal (`views.open`, `modal.modal_view`); its submission is read by
`modal.form_values` (errors go back in the ack, shown under the fields) and answered with
`core.answer_form`. The request is kept with the card, so a modal opened before a restart
still answers.

`/aep sessions|status|cancel|pause|resume [session]`: a slash command carries no thread, so
a session is named by its name or the start of its id (with one session live, it may be left
out); `sessions` lists them with links, the others go to the core as that session's chat
command (the core checks approvers and answers in the thread).

Heads-ups go to `notifications_channel_id`, linking to the card by permalink (built from
`auth.test`'s workspace URL: no extra call); the closing update edits the heads-up. One with
`recipients` (the session's owner) goes to each of them by direct message instead (`direct`),
and to the notifications channel only for one Slack refuses. Without
`notifications_channel_id` the channel declines heads-ups (`call_kind`): the core never
queues one, so none takes a slot a card would wait for.

Slack paces `chat.postMessage` about one a second in a channel (all its threads together) and
`chat.update` in Tier 3, about 50 a minute for the workspace, each apart from the other: the
channel declares both (`rate_limits` for posts, `edit_rate_limits` for edits) and says which
each call is (`call_kind`), so an answer edits its card at once after a post, and a post does
not wait for edits.

What the adapter keeps, in the channel's state in the bridge's store, is for its own display
and survives a restart: which thread belongs to which session, which message is which card,
which keyed message to edit, which heads-up was sent for which question.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Final, TypeVar

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from aep_bridge import (
    Blocks,
    BridgeCore,
    CallKind,
    CardRecords,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelError,
    DoctorCheck,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Posted,
    PreviewDialect,
    RateLimit,
    RateLimited,
    RateLimits,
    SessionThreads,
    Tasks,
)

from . import look, mrkdwn
from .config import APP_TOKEN_FIX, BOT_TOKEN_FIX, SlackConfig
from .direct import DirectMessages
from .events import Listeners

log = logging.getLogger(__name__)

#: how long `start` waits for the Socket Mode WebSocket
CONNECT_TIMEOUT: Final = 30.0
#: Slack's answers that trying again can fix
TRANSIENT: Final = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}
)
#: Slack's refusals, with the fix a person can make
FIXES: Final = {
    "invalid_auth": f"check `bot_token`: {BOT_TOKEN_FIX}",
    "not_authed": f"check `bot_token`: {BOT_TOKEN_FIX}",
    "account_inactive": f"check `bot_token`: {BOT_TOKEN_FIX}",
    "token_revoked": f"check `bot_token`: {BOT_TOKEN_FIX}",
    "token_expired": f"check `bot_token`: {BOT_TOKEN_FIX}",
    "not_in_channel": "invite the bot: /invite @app in the channel",
    "channel_not_found": (
        "check `channel_id` (the channel's details: the Channel ID is at the bottom), and "
        "invite the bot: /invite @app in the channel"
    ),
    "is_archived": "the channel is archived: unarchive it, or set another `channel_id`",
}

T = TypeVar("T")
#: the key of a session's header message (`session.started`, and the first prompt joining
#: it: docs/rendering.md), which the parent message shows instead of a reply
HEADER_KEY: Final = "session:"
#: how long `stop` lets envelopes being handled send their acks before it closes the socket
DRAIN_TIMEOUT: Final = 2.0
#: keyed messages remembered as posted (`call_kind`: their next send is an edit). The first
#: edit of one forgotten, or posted before a restart, is counted as a post: paced as one and
#: not in Tier 3 (the edit reads the state and remembers it, so the next is counted right)
KNOWN_KEYS: Final = 4096
#: the calls that edit a message in place (`chat.update`): a card's outcome, the parent
#: message's name and state
_EDITS: Final = frozenset(
    {
        "update_permission_request",
        "rename_session_thread",
        "archive_session_thread",
        "delete_session_thread",
    }
)


class _Handler(AsyncSocketModeHandler):
    """slack-bolt's Socket Mode handler, counting the envelopes it is handling, so `stop`
    lets them send their acks before it closes the connection (else Slack sends them
    again, and slack-sdk logs an error for each)."""

    def __init__(self, app: AsyncApp, app_token: str) -> None:
        super().__init__(app, app_token)
        self.busy = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def handle(self, client: Any, req: Any) -> None:
        self.busy += 1
        self.idle.clear()
        try:
            await super().handle(client, req)
        finally:
            self.busy -= 1
            if self.busy == 0:
                self.idle.set()


class SlackChannel(ChannelAdapter[SlackConfig]):
    """A Slack app over Socket Mode: a thread per session under a parent message in one
    channel, cards with Block Kit buttons, heads-ups in a notifications channel."""

    name = "slack"
    capabilities = ChannelCapabilities(
        # a route may put a team's sessions in a Slack channel of their own (`channel_of`)
        places=True,
        threads=True,
        buttons=True,
        edits=True,
        text_answers=True,
        forms=True,  # a "Fill in" button opening a modal
        card_context=True,  # a card shows its context above it (`look.with_context`)
        max_message_length=look.MAX_TEXT,
        length_unit="chars",
        max_button_data=look.MAX_BUTTON_VALUE,
        max_buttons=look.MAX_BUTTONS,
        updates_heads_ups=True,
        direct_messages=True,  # a heads-up to its `recipients` in the bot's DM with each
        # Slack: chat.postMessage about one a second in a channel (all its threads
        # together: `limit_keys`), chat.update Tier 3 (about 50 a minute for the workspace),
        # counted apart (`call_kind`); each window a little wider (Slack times a call when
        # it arrives)
        rate_limits=RateLimits(per_chat=RateLimit(count=1, per_seconds=1.1)),
        edit_rate_limits=RateLimits(global_=RateLimit(count=50, per_seconds=61)),
    )
    config_model: ClassVar[type[ChannelConfig]] = SlackConfig
    contract_version: ClassVar[str] = "1.2"

    def __init__(self, core: BridgeCore, config: SlackConfig) -> None:
        super().__init__(core, config)
        self._client: AsyncWebClient | None = None
        #: the card records: key -> card id, what was kept of a card, a session's open cards
        self.cards = CardRecords.plain(self.channel_state, look.card_key)
        #: the live sessions' threads (ts) and names, for `/aep sessions` and the parent messages
        self.sessions = SessionThreads(self.channel_state)
        self._session: aiohttp.ClientSession | None = None
        self._handler: _Handler | None = None
        self._url = ""  # the workspace's, from auth.test: permalinks
        self._lock = asyncio.Lock()
        #: what the listeners do after bolt's ack (waited for, then cancelled, at `stop`)
        self.tasks = Tasks()
        self._listeners = Listeners(self)
        self._direct = DirectMessages(self)
        #: the keyed messages posted (their state keys), most recent last: `call_kind`
        self._posted: OrderedDict[str, None] = OrderedDict()
        if config.notifications_channel_id is None:  # nowhere to show a heads-up
            self.capabilities = self.capabilities.model_copy(
                update={"heads_ups": False, "direct_messages": False}
            )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        # bolt makes the Web API client from the token, pointed here at the configured API
        # and our session. Given a client of ours instead, bolt would take SLACK_BOT_TOKEN
        # from the environment (where the guide puts it) for a token given as well, and warn
        # on every start that it is unused.
        app = AsyncApp(
            token=self.config.bot_token.get_secret_value(),
            signing_secret="",  # Socket Mode: requests come over the WebSocket, not signed
            # a listener acks and returns, its work a task (`events`): bolt sends the ack
            # as it returns, instead of looking for it every 10 ms
            process_before_response=True,
            name=f"aep-bridge slack {self.instance_name}",
        )
        session = aiohttp.ClientSession()
        client = app.client
        client.base_url = self.config.api_base_url
        client.session = session
        try:
            auth, channel, wss = await self._connect_checks(client)
        except BaseException:
            await session.close()
            raise
        self._listeners.listen(app)
        handler = _Handler(app, self.config.app_token.get_secret_value())
        handler.client.wss_uri = wss  # the URL `_connect_checks` was given: no second call
        try:
            await asyncio.wait_for(handler.connect_async(), CONNECT_TIMEOUT)  # type: ignore[no-untyped-call]
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            with contextlib.suppress(Exception):
                await handler.close_async()  # type: ignore[no-untyped-call]
            await session.close()
            raise ChannelError(
                f"Slack channel {self.instance_name}: cannot open the Socket Mode connection: "
                f"{self._describe(exc)}"
            ) from None
        self._client, self._session, self._handler = client, session, handler
        self._url = str(auth.get("url") or "https://slack.com/")
        if not self._url.endswith("/"):
            self._url += "/"
        if self.config.approver_roles:
            self.tasks.spawn(self._listeners.warm_groups())
        log.info(
            "slack %s: @%s in %s, #%s (Socket Mode)",
            self.instance_name,
            auth.get("user", "?"),
            auth.get("team", "?"),
            channel.get("name", self.config.channel_id),
        )

    async def _checked(
        self, call: Awaitable[AsyncSlackResponse], refusal: Callable[[str | None], str | None]
    ) -> dict[str, Any]:
        """A check's answer; a refusal `refusal` explains (by Slack's error code) is a
        permanent error with its fix, any other the usual mapping."""
        try:
            data = (await call).data
        except SlackApiError as exc:
            why = refusal(_code(exc))
            if why is not None:
                raise ChannelError(why, permanent=True) from None
            raise self._mapped(exc) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ChannelError(
                f"Slack channel {self.instance_name}: cannot reach Slack: {self._describe(exc)}"
            ) from None
        assert isinstance(data, dict)
        return data

    async def _connect_checks(
        self, client: AsyncWebClient
    ) -> tuple[dict[str, Any], dict[str, Any], str]:
        """The bot token (`auth.test`), the sessions' channel (`conversations.info`: there,
        with the bot in it), and the app token (`apps.connections.open`, whose URL the Socket
        Mode client then takes): each refusal a permanent error with its fix."""
        name = self.instance_name
        auth = await self._checked(
            client.auth_test(),
            lambda code: (
                f"Slack refused the bot token of channel {name} ({code}): check "
                f"`bot_token`: {BOT_TOKEN_FIX}"
                if code in FIXES and code not in ("not_in_channel", "channel_not_found")
                else None
            ),
        )
        info = await self._checked(
            client.conversations_info(channel=self.config.channel_id),
            lambda code: (
                f"Slack channel {name}: cannot reach channel {self.config.channel_id} "
                f"({code}): {FIXES[code]}"
                if code in ("channel_not_found", "not_in_channel")
                else None
            ),
        )
        channel = dict(info.get("channel") or {})
        if channel.get("is_member") is False:
            raise ChannelError(
                f"Slack channel {name}: the bot is not in channel {self.config.channel_id}: "
                f"{FIXES['not_in_channel']}",
                permanent=True,
            )
        try:
            opened = await client.apps_connections_open(
                app_token=self.config.app_token.get_secret_value()
            )
        except SlackApiError as exc:
            code = _code(exc)
            if code in TRANSIENT or _status(exc) >= 500:
                raise self._mapped(exc) from None
            raise ChannelError(
                f"Slack refused the app token of channel {name} ({code}): check `app_token`: "
                f"{APP_TOKEN_FIX}; and turn on Socket Mode in the app's settings",
                permanent=True,
            ) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ChannelError(
                f"Slack channel {name}: cannot reach Slack: {self._describe(exc)}"
            ) from None
        return auth, channel, str(opened["url"])

    async def doctor(self) -> list[DoctorCheck]:
        """The tokens, Socket Mode, the bot in the channels, its scopes, the approver groups:
        each failure with its fix. Web API only: `aep-bridge doctor` runs it beside a
        running bridge."""
        from .doctor import run_doctor

        async with aiohttp.ClientSession() as session:
            client = AsyncWebClient(
                token=self.config.bot_token.get_secret_value(),
                base_url=self.config.api_base_url,
                session=session,
            )
            return await run_doctor(client, self.config)

    async def stop(self) -> None:
        """Envelopes being handled send their acks, and what was acked (a press on its way
        to the core) finishes, for up to `DRAIN_TIMEOUT` each: Slack does not send an acked
        press again. Then the socket and the client close."""
        handler, self._handler = self._handler, None
        if handler is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(handler.idle.wait(), DRAIN_TIMEOUT)
        await self.tasks.stop(drain=DRAIN_TIMEOUT)  # and those begun meanwhile: the socket is open
        if handler is not None:
            with contextlib.suppress(Exception):
                await handler.close_async()  # type: ignore[no-untyped-call]
        session, self._session = self._session, None
        self._client = None
        if session is not None:
            await session.close()

    @property
    def client(self) -> AsyncWebClient:
        if self._client is None:
            raise ChannelError(f"Slack channel {self.instance_name} is not started")
        return self._client

    @classmethod
    def preview_dialect(cls) -> PreviewDialect:
        """`aep-bridge preview --channel slack`: a session in a Slack thread."""
        from .preview import SlackDialect

        dialect: PreviewDialect = SlackDialect()
        return dialect

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        """Which of Slack's limits a call spends: a post (`chat.postMessage`, one a second
        in a channel) or an edit (`chat.update`, Tier 3). No heads-up without a
        notifications channel; a keyed message is an edit once its first post went."""
        if op == "send_notification":
            if self.config.notifications_channel_id is None:
                return None
            if bool(args) and _finished(args[0]):
                return "edit"  # the session's parent says it (`send_notification`)
            closing = bool(args) and getattr(args[0], "outcome", None) is not None
            return "edit" if closing else "post"
        if op in _EDITS:
            return "edit"
        if op == "send_message" and len(args) == 2 and isinstance(args[1], OutgoingMessage):
            session_id, content = args
            key = content.key or ""
            if key.startswith(HEADER_KEY) and self.thread_of(session_id) is not None:
                return "edit"  # the session's header is its parent message
            if key and f"key:{session_id}:{key}" in self._posted:
                return "edit"
        return "post"

    def _remember_posted(self, key: str) -> None:
        self._posted[key] = None
        self._posted.move_to_end(key)
        while len(self._posted) > KNOWN_KEYS:
            self._posted.popitem(last=False)

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        """Slack counts a channel's posts together, all its threads as one: a session counts
        against its channel (the sessions' channel, or where a route placed it); heads-ups
        against the notifications channel."""
        if session_id:
            where = self.channel_of(session_id)
            return (where, where)
        where = self.config.notifications_channel_id or self.config.channel_id
        return (where, where)

    # -- threads ---------------------------------------------------------------------------

    def channel_of(self, session_id: str) -> str:
        """The Slack channel of the session's thread: where a route placed it
        (`routes[].places`), else the sessions' channel."""
        return self.place_of(session_id) or self.config.channel_id

    async def create_session_thread(self, session_id: str, name: str) -> str:
        shown = look.parent_look(name, "running")
        sent = await self._post(self.channel_of(session_id), shown)
        await self.sessions.made(session_id, sent, name)
        return sent

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        thread = self.thread_of(session_id)
        if thread is None:
            return
        await self.sessions.remember(session_id, thread, new_name)
        await self._update_parent(session_id, thread, new_name, "running")

    async def archive_session_thread(self, session_id: str) -> None:
        live = await self.sessions.live()
        thread = self.thread_of(session_id)
        name = live.get(session_id, ["", session_id])[1]
        await self.sessions.forget(session_id)
        if thread is not None:
            await self._update_parent(session_id, thread, name, "ended")

    async def _update_parent(
        self,
        session_id: str,
        thread: str,
        name: str,
        state: str,
        header: look.Look | None = None,
        *,
        said: str = "",
    ) -> bool:
        """The parent message, with the session's header (kept in the state: a restart or
        a rename keeps showing it). False when the parent is gone."""
        key = f"header:{session_id}"
        if header is not None:
            await self.channel_state().set(key, json.dumps([header.text, header.blocks]))
        else:
            kept = await self.channel_state().get(key)
            if kept is not None:
                text, blocks = json.loads(kept)
                header = look.Look(text, blocks)
        shown = look.parent_look(name, state, header, said=said)
        return await self._update(self.channel_of(session_id), thread, shown)

    async def delete_session_thread(self, session_id: str) -> None:
        """A Slack thread is its parent's replies: deleting them one by one would cost a call
        each under Tier 3; the parent says the session ended instead, as at `archive`."""
        await self.archive_session_thread(session_id)

    # -- messages --------------------------------------------------------------------------

    def measure(self, blocks: Blocks) -> int:
        """What Slack counts: the mrkdwn the blocks become."""
        return look.measure(blocks)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        # the core's outbox splits; a direct caller may not have
        limit = look.MAX_TEXT
        updates: list[dict[str, Any]] = []
        if content.blocks and self.measure(content.blocks) > limit:
            updates = [
                {"blocks": part, "text": ""} for part in look.blocks_pieces(content.blocks, limit)
            ]
        elif not content.blocks and len(mrkdwn.escape(content.text)) > limit:
            updates = [{"text": piece} for piece in look.text_pieces(content.text, limit)]
        if len(updates) > 1:
            for index, update in enumerate(updates):
                last = index == len(updates) - 1
                update.update(key=content.key if last else None, notify=content.notify and last)
                await self.send_message(session_id, content.model_copy(update=update))
            return
        shown = look.message_look(content)
        thread = self.thread_of(session_id)
        if thread is not None and (content.key or "").startswith(HEADER_KEY):
            # the session's header (docs/rendering.md) is shown in the parent message
            live = await self.sessions.live()
            name = live.get(session_id, [thread, session_id])[1]
            if await self._update_parent(session_id, thread, name, "running", shown):
                return
        state = self.channel_state()
        key = f"key:{session_id}:{content.key}" if content.key else None
        earlier = await state.get(key) if key else None
        if key is not None and earlier is not None:
            self._remember_posted(key)  # posted before a restart: the next send is an edit
            if await self._update(self.channel_of(session_id), earlier, shown):
                return
        sent = await self._post(self.channel_of(session_id), shown, thread=thread)
        if key is not None:
            await state.set(key, sent)
            self._remember_posted(key)

    async def send_notification(self, notification: NotificationMessage) -> None:
        """A heads-up linking to the card (or the thread): in the bot's DM with each of
        `recipients` (the session's owner), and in the notifications channel when there are
        none or Slack refuses one. One about a question is remembered (each message sent, as
        it is sent), so a retry sends none twice and its closing update edits them all. A
        run's end is no heads-up: the session's parent, a message in the channel already,
        says it."""
        where = self.config.notifications_channel_id
        if where is None:
            return  # no heads-ups configured: the cards are in the thread
        if _finished(notification):
            await self._parent_finished(notification)
            return
        if notification.outcome is not None:
            await self._close_heads_up(notification)
            return
        key = f"headsup:{notification.request_id}" if notification.request_id else None
        kept = await self._heads_up(key)
        if kept is not None and kept["done"]:
            return  # sent before (a retry after a restart): one question rings once
        shown = look.heads_up_look(notification, await self._link(notification))
        if kept is None:
            kept = {"text": shown.text, "sent": [], "to": [], "fallback": False, "done": False}
            kept["fallback"] = not notification.recipients
        for user in notification.recipients:
            if user in kept["to"]:
                continue  # sent before this retry
            sent = await self._direct.send(user, shown, where)
            if sent is None:
                kept["fallback"] = True  # refused (warned once): the channel says it
            else:
                kept["sent"].append(list(sent))
            kept["to"].append(user)
            await self._keep_heads_up(key, kept)
        if kept["fallback"]:
            kept["sent"].append([where, await self._post(where, shown)])
        kept["done"] = True
        await self._keep_heads_up(key, kept)

    async def _heads_up(self, key: str | None) -> dict[str, Any] | None:
        """What was sent of a question's heads-up: its `text`, the messages `sent` ([channel,
        ts]), the recipients done (`to`), whether it goes to the notifications channel
        (`fallback`) and whether it is all sent (`done`)."""
        raw = await self.channel_state().get(key) if key is not None else None
        if raw is None:
            return None
        kept = dict(json.loads(raw))
        if "sent" not in kept:  # kept before direct messages: one in the notifications channel
            where = self.config.notifications_channel_id or self.config.channel_id
            sent = [[where, kept["ts"]]]
            kept = {"text": kept["text"], "sent": sent, "to": [], "fallback": True, "done": True}
        return kept

    async def _keep_heads_up(self, key: str | None, kept: dict[str, Any]) -> None:
        if key is not None:
            await self.channel_state().set(key, json.dumps(kept))

    async def _parent_finished(self, notification: NotificationMessage) -> None:
        """The run's end on the session's parent (an edit: the parent rang when it was
        posted, and a second message for the same session would ring again)."""
        session_id = notification.session_id or ""
        thread = self.thread_of(session_id)
        if thread is None:
            return
        name = notification.session_name or ""
        name = name or (await self.sessions.live()).get(session_id, ["", session_id])[1]
        await self._update_parent(session_id, thread, name, "finished", said=notification.summary)

    async def _close_heads_up(self, notification: NotificationMessage) -> None:
        """Every message of the question's heads-up (the DMs and the notifications
        channel's) says how it closed: an edit each, silent."""
        kept = await self._heads_up(f"headsup:{notification.request_id}")
        if kept is None or notification.outcome is None:
            return  # none sent here: an answered question must not ring
        status = None if notification.outcome_status is None else str(notification.outcome_status)
        shown = look.closed_heads_up_look(kept["text"], notification.outcome, status)
        for channel, ts in kept["sent"]:
            await self._update(channel, ts, shown)

    async def _link(self, notification: NotificationMessage) -> str | None:
        """The card's message when it was sent here, else the session's thread."""
        card = await self.cards.get(notification.request_id or "")  # out before it (the outbox)
        if card is not None:
            return self.permalink(card["channel"], card["ts"], card.get("thread"))
        session_id = notification.session_id or ""
        thread = self.thread_of(session_id)
        return self.permalink(self.channel_of(session_id), thread) if thread else None

    def permalink(self, channel: str, ts: str, thread: str | None = None) -> str:
        """Slack's permalink, built as Slack builds it (no `chat.getPermalink` call)."""
        link = f"{self._url}archives/{channel}/p{ts.replace('.', '')}"
        if thread and thread != ts:
            link += f"?thread_ts={thread}&cid={channel}"
        return link

    # -- cards -----------------------------------------------------------------------------

    def measure_card(self, request: PermissionRequest) -> int:
        """Exact for Slack's drawing: the rule by which the card cuts its context
        (`look.measure_card`), so a context the core folds within the limit is shown whole,
        in the card as posted and in every update."""
        return look.measure_card(request)

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> Posted:
        known = await self.cards.get(request.id)
        if known is not None:
            return self._where(known)  # sent before (a retry after a restart): not again
        thread = self.thread_of(session_id)
        where = self.channel_of(session_id)
        sent = await self._post(where, look.card_look(request), thread=thread)
        card = {
            "session": session_id,
            "channel": where,
            "ts": sent,
            "thread": thread,
            "request": request.model_dump(mode="json") if request.fields else None,
        }
        await self.cards.sent(request.id, card)
        if request.accepts_text and not request.informational:
            await self.cards.open_cards(session_id, add=request.id)
        return self._where(card)

    def _where(self, card: dict[str, Any]) -> Posted:
        """Where a card is, for the audit trail: its channel, its `ts`, and its permalink,
        built without a call (none before `auth.test` gave the workspace's URL)."""
        channel, ts = str(card["channel"]), str(card["ts"])
        link = self.permalink(channel, ts, card.get("thread")) if self._url else None
        return Posted(chat=channel, message=ts, link=link)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        async def edit(card: dict[str, Any]) -> None:
            shown = look.card_look(request, outcome=outcome)
            await self._update(card["channel"], card["ts"], shown)

        await self.cards.update(
            session_id, request.id, closed=outcome.closed, lock=self._lock, edit=edit
        )

    def failed(self, what: str, exc: BaseException) -> None:
        """Log a call that failed, in one line that names no token."""
        log.warning("slack %s: %s failed: %s", self.instance_name, what, self._describe(exc))

    # -- platform calls --------------------------------------------------------------------

    async def _post(
        self, channel: str, shown: look.Look, *, thread: str | None = None, raw: bool = False
    ) -> str:
        """Post a message (a reply when `thread`); its `ts`. Never a broadcast, never an
        unfurl: a link the agent wrote stays a line. `raw`: as `_call`'s."""
        extra: dict[str, Any] = {"thread_ts": thread} if thread else {}
        if shown.blocks:
            extra["blocks"] = shown.blocks
        sent = await self._call(
            self.client.chat_postMessage(
                channel=channel,
                text=shown.text or "…",
                unfurl_links=False,
                unfurl_media=False,
                **extra,
            ),
            raw=raw,
        )
        return str(sent["ts"])

    async def post_raw(self, channel: str, shown: look.Look) -> str:
        """`_post`, Slack's refusal (other than a rate limit) raised as slack-sdk's own
        (`direct`: a person the bot cannot write to is no error)."""
        return await self._post(channel, shown, raw=True)

    async def call_raw(self, call: Awaitable[T]) -> T:
        """One slack-sdk call: a rate limit or a network failure as the outbox's errors,
        Slack's other refusals as slack-sdk's own (`direct`)."""
        return await self._call(call, raw=True)

    def mapped(self, exc: SlackApiError) -> ChannelError:
        """slack-sdk's refusal as the outbox's (`_mapped`), for `direct`."""
        return self._mapped(exc)

    async def _update(self, channel: str, ts: str, shown: look.Look) -> bool:
        """Edit a message in place; False when it is gone."""
        try:
            await self._call(
                self.client.chat_update(
                    channel=channel, ts=ts, text=shown.text or "…", blocks=shown.blocks
                ),
                raw=True,
            )
        except SlackApiError as exc:
            if _code(exc) in ("message_not_found", "cant_update_message"):
                return False
            raise self._mapped(exc) from None
        return True

    async def _call(self, call: Awaitable[T], *, raw: bool = False) -> T:
        """One slack-sdk call, its failures as the core's outbox understands them (`raw`:
        slack-sdk's own SlackApiError, other than rate limits, passes through)."""
        try:
            return await call
        except SlackApiError as exc:
            if raw and not _limited(exc):
                raise
            raise self._mapped(exc) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ChannelError(f"Slack call failed: {self._describe(exc)}") from None

    def _mapped(self, exc: SlackApiError) -> ChannelError:
        """slack-sdk's refusal as the outbox's: a 429 to wait out, a 5xx (or Slack's own
        failure) to retry, any other refusal permanent, with the fix when known."""
        code = _code(exc)
        status = _status(exc)
        if _limited(exc):
            retry_after = 1.0
            headers = getattr(exc.response, "headers", None) or {}
            for name, value in headers.items():
                if str(name).lower() == "retry-after":
                    with contextlib.suppress(TypeError, ValueError):
                        retry_after = float(value)
            return RateLimited(retry_after, f"Slack said 429 ({code or 'ratelimited'})")
        if status >= 500 or code in TRANSIENT:
            return ChannelError(f"Slack failed: {status} {code or ''}".rstrip())
        fix = FIXES.get(code or "")
        if code == "missing_scope":
            needed = exc.response.get("needed") if exc.response is not None else None
            fix = (
                f"add the scope {needed} (OAuth & Permissions > Bot Token Scopes), then "
                "reinstall the app to the workspace"
            )
        return ChannelError(
            f"Slack refused the call: {code or status}" + (f" ({fix})" if fix else ""),
            permanent=True,
        )

    def _describe(self, exc: BaseException) -> str:
        """A failure in a line: Slack's error code, or the network's error with the tokens
        cut out (Slack's answers never quote them; a network error's text may hold a URL)."""
        if isinstance(exc, SlackApiError):
            return _code(exc) or f"HTTP {_status(exc)}"
        text = f"{type(exc).__name__}: {exc}".rstrip(": ")
        for secret in (self.config.bot_token, self.config.app_token):
            text = text.replace(secret.get_secret_value(), "[token]")
        return text


def _code(exc: SlackApiError) -> str | None:
    """Slack's error code (`invalid_auth`, `channel_not_found`, ...), or None."""
    response = exc.response
    error = response.get("error") if response is not None else None
    return str(error) if error else None


def _status(exc: SlackApiError) -> int:
    return int(getattr(exc.response, "status_code", 0) or 0)


def _limited(exc: SlackApiError) -> bool:
    return _status(exc) == 429 or _code(exc) == "ratelimited"


def _finished(notification: object) -> bool:
    """A run's end about a session (`completed`), not a question's closing."""
    return (
        isinstance(notification, NotificationMessage)
        and notification.type == "completed"
        and notification.outcome is None
        and bool(notification.session_id)
    )
