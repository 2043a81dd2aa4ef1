"""`MatrixChannel`: each agent session a thread (`m.thread`) in one room, each question a
card answered by a reaction per option, or by words in the thread.

The adapter translates, the core decides. Every platform call the core makes arrives through
its outbox, which keeps the homeserver's rate (declared in `capabilities`, Synapse's default
unless the config says otherwise); a 429 the homeserver still sends becomes `RateLimited`
with its `retry_after_ms` (`client.RateAwareAPI`), and the outbox waits it out.

A session is a root message in the room, named by the session (renamed by an `m.replace`
edit of it); everything else is in its thread. A keyed message (streamed text, a tool's card)
is edited in place. A card lists its options as reactions ("React 1️⃣ Allow · 2️⃣ Deny") and
the bot adds those reactions itself, through the outbox, so a person taps one. The card's id
is in its own event (`html.CARD_FIELD`) and in the card records (`CardRecords`), so a
reaction made before or during a restart still answers. A reaction goes to the core with the
reacting user's Matrix id; the core checks approvers before anything changes, and a refusal
is said in the thread once per person and card, as a notice.

Reactions and words arrive over a `/sync` long-poll loop of the adapter's own. The first
start skips the room's history (the first sync's `next_batch`); every later sync's token is
kept in the channel's state, so a restart reads what happened while the bridge was down.
A sync that says its timeline was `limited` (more happened than it holds) is filled from
`/messages`, so nothing is skipped under a burst of chatter. The bot ignores its own events.
Encrypted rooms are refused at start: the bot cannot read
or write them without end-to-end encryption, which this channel does not do.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, ClassVar, Final, cast

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.errors import MatrixRequestError
from mautrix.types import EventID, EventType, RoomID, SyncToken

from aep_bridge import (
    Blocks,
    BridgeCore,
    CardRecords,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelError,
    ChannelUser,
    DoctorCheck,
    IncomingMessage,
    NotificationMessage,
    Once,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Posted,
    PreviewDialect,
    RateLimit,
    RateLimited,
    RateLimits,
    Tasks,
    heads_up_icon,
    split_to_fit,
)

from . import html
from .client import as_channel_error, close_client, make_client, room_in, sync_filter
from .config import MatrixConfig

log = logging.getLogger(__name__)

#: how long a `/sync` long-poll waits on the homeserver, in milliseconds
SYNC_TIMEOUT_MS: Final = 30_000
#: the longest pause after a failed sync, in seconds (doubling from 1)
MOST_BACKOFF: Final = 60.0
#: events per sync the loop reads of the room (Synapse's default is 10)
TIMELINE_LIMIT: Final = 100
#: the most `/messages` pages read to fill a limited sync's gap
CATCH_UP: Final = 10
#: refusals remembered as said (per card and person), so each is said once
TOLD: Final = 4096
#: the reply fallback (`> <@user> ...` lines, then a blank line) clients put before words
_FALLBACK: Final = re.compile(r"\A(?:>[^\n]*\n)+\n")


class MatrixChannel(ChannelAdapter[MatrixConfig]):
    """A Matrix bot account in one unencrypted room: a thread per session, reactions and
    replies as answers."""

    name = "matrix"
    capabilities = ChannelCapabilities(
        threads=True,
        buttons=True,  # a reaction per option, listed on the card
        edits=True,
        text_answers=True,
        forms=False,
        max_message_length=html.MAX_CONTENT,
        length_unit="bytes",
        max_button_data=8,  # a reaction's key: an emoji
        max_buttons=len(html.OPTION_KEYS),
        heads_ups=False,  # the room is the one place: a question's card rings there
        card_context=True,  # a card shows what its session said just before it (`html.card`)
        rate_limits=RateLimits(global_=RateLimit(count=1, per_seconds=5.25, burst=10)),
    )
    config_model: ClassVar[type[ChannelConfig]] = MatrixConfig
    contract_version: ClassVar[str] = "1.2"

    def __init__(self, core: BridgeCore, config: MatrixConfig) -> None:
        super().__init__(core, config)
        # the homeserver's rate for this account, a little slower (it times arrivals)
        limit = RateLimit(
            count=1, per_seconds=1.05 / config.rate_per_second, burst=config.rate_burst
        )
        self.capabilities = self.capabilities.model_copy(
            update={"rate_limits": RateLimits(global_=limit)}
        )
        self.cards = CardRecords.plain(self.channel_state, lambda card_id: card_id)
        self._client: Client | None = None
        self._filter = sync_filter([config.room_id], timeline=TIMELINE_LIMIT)
        self._told = Once(TOLD)  # (card, user): the refusals said
        self._tasks = Tasks()  # the sync loop, the bot's reactions on their way
        self._reacting: dict[str, int] = {}  # their cards (event: options), kept in the state
        self._lock = asyncio.Lock()  # a card's record, read and closed by one update at a time

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Who the token is, the room joined (an invitation accepted) and not encrypted, the
        sync position (the stored one, or now: history is skipped), then the sync loop."""
        token = self.config.access_token.get_secret_value()
        client = make_client(
            self.config.homeserver, self.config.user_id, token, self.config.device_id
        )
        try:
            since = await self._connect(client)
        except BaseException as exc:
            await close_client(client)
            if isinstance(exc, ChannelError | asyncio.CancelledError):
                raise
            raise self._error(exc, "start") from None
        self._client = client
        self._reacting = json.loads(await self.channel_state().get("reacting") or "{}")
        for event_id, count in self._reacting.items():  # cut short by a stop: resumed
            self._react_soon(event_id, count, resumed=True)
        self._tasks.spawn(self._sync_loop(since))

    async def _connect(self, client: Client) -> str:
        room = RoomID(self.config.room_id)
        who = await client.whoami()
        if who.user_id != self.config.user_id:
            raise ChannelError(
                f"Matrix channel {self.instance_name}: the access token is {who.user_id}'s, "
                f"not {self.config.user_id}'s: fix `user_id` or `access_token`",
                permanent=True,
            )
        try:
            await client.join_room_by_id(room)
        except MatrixRequestError as exc:
            raise ChannelError(
                f"Matrix channel {self.instance_name}: cannot join room {room} "
                f"({exc.errcode}): invite {self.config.user_id} to it, or fix `room_id`",
                permanent=exc.errcode in ("M_FORBIDDEN", "M_NOT_FOUND"),
            ) from None
        answer = await client.sync(timeout=0, filter_id=sync_filter([room]))  # its state, now
        if room_in(answer, room).encrypted:
            raise ChannelError(
                f"Matrix channel {self.instance_name}: room {room} is encrypted, and Matrix "
                "encryption is not supported: use an unencrypted room (encryption cannot be "
                "turned off in a room; make a new one without it)",
                permanent=True,
            )
        since = await self.channel_state().get("sync") or str(answer["next_batch"])
        await self.channel_state().set("sync", since)
        return since

    async def stop(self) -> None:
        await self._tasks.stop()
        client, self._client = self._client, None
        if client is not None:
            await close_client(client)

    async def doctor(self) -> list[DoctorCheck]:
        """The token, the room, encryption, sending: `doctor.diagnose`."""
        from .doctor import diagnose

        return await diagnose(self.config)

    @classmethod
    def preview_dialect(cls) -> PreviewDialect:
        """`aep-bridge preview --channel matrix`: a session in a Matrix thread."""
        from .preview import MatrixDialect

        return MatrixDialect()

    @property
    def client(self) -> Client:
        if self._client is None:
            raise ChannelError(f"Matrix channel {self.instance_name} is not started")
        return self._client

    # -- the sync loop ---------------------------------------------------------------------

    async def _sync_loop(self, since: str) -> None:
        pause = 1.0
        while True:
            try:
                answer = await self.client.sync(
                    since=SyncToken(since), timeout=SYNC_TIMEOUT_MS, filter_id=self._filter
                )
                room = answer.get("rooms", {}).get("join", {}).get(self.config.room_id, {})
                timeline = room.get("timeline", {})
                events = list(timeline.get("events", []))
                if timeline.get("limited"):  # more happened than one sync holds
                    events = await self._missed(since, events)
                for event in events:
                    await self._on_event(event)
                since = str(answer["next_batch"])
                await self.channel_state().set("sync", since)
                pause = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = self._error(exc, "a sync")
                log.warning("matrix %s: %s", self.instance_name, error)
                if error.permanent:
                    return  # the token is gone: `aep-bridge doctor` says so
                wait = exc.retry_after if isinstance(exc, RateLimited) else pause
                await asyncio.sleep(wait)
                pause = min(pause * 2, MOST_BACKOFF)

    async def _missed(self, since: str, timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The room's events since `since` that a limited sync left out (a reaction made
        while the bridge was down, under a burst of chatter), read forward with `/messages`
        up to `CATCH_UP` pages, then the sync's own."""
        seen = {event.get("event_id") for event in timeline}
        found: list[dict[str, Any]] = []
        path = Path.v3.rooms[RoomID(self.config.room_id)].messages
        token: str | None = since
        for _ in range(CATCH_UP):
            query = {"dir": "f", "from": str(token), "limit": str(TIMELINE_LIMIT)}
            page = await self.client.api.request(Method.GET, path, query_params=query)
            chunk = [e for e in page.get("chunk", []) if isinstance(e, dict)]
            done = any(e.get("event_id") in seen for e in chunk)
            found += [e for e in chunk if e.get("event_id") not in seen]
            token = page.get("end")
            if done or not chunk or not token:
                break
        return found + timeline

    async def _on_event(self, event: dict[str, Any]) -> None:
        """A person's reaction (a press) or words in a session's thread (an answer)."""
        sender = str(event.get("sender", ""))
        if sender == self.config.user_id or "redacted_because" in event.get("unsigned", {}):
            return
        content = event.get("content") or {}
        relation = content.get("m.relates_to") or {}
        user = ChannelUser(id=sender, name=sender)
        try:
            if event.get("type") == "m.reaction" and relation.get("rel_type") == "m.annotation":
                await self._reacted(str(relation.get("event_id")), str(relation.get("key")), user)
            elif event.get("type") == "m.room.message" and relation.get("rel_type") == "m.thread":
                await self._words(str(relation.get("event_id")), relation, content, user)
        except Exception as exc:  # one event's failure never stops the loop
            log.warning("matrix %s: %s", self.instance_name, self._error(exc, "an answer"))

    async def _reacted(self, event_id: str, key: str, user: ChannelUser) -> None:
        index = html.option_of(key)
        card_id = await self._card_of(event_id) if index is not None else None
        if card_id is None or index is None:
            return  # a reaction to anything else, or with another emoji
        resolution = await self.core.resolve_permission(card_id, index, user)
        if not resolution.accepted:
            await self._refused(card_id, user, resolution.message)

    async def _card_of(self, event_id: str) -> str | None:
        """The card an event shows: from the records, else from the bot's event itself."""
        known = await self.cards.of_message(event_id)
        if known is not None:
            return known
        try:
            event = await self.client.get_event(RoomID(self.config.room_id), EventID(event_id))
        except MatrixRequestError:
            return None
        if event.sender != self.config.user_id:
            return None  # only the bot's own cards
        record = event.content.serialize().get(html.CARD_FIELD) or {}
        return str(record["id"]) if isinstance(record, dict) and record.get("id") else None

    async def _words(
        self, root: str, relation: dict[str, Any], content: dict[str, Any], user: ChannelUser
    ) -> None:
        session = await self.channel_state().get(f"thread:{root}")
        text = _FALLBACK.sub("", str(content.get("body") or "")).strip()
        if session is None or not text:
            return
        replied = None
        if not relation.get("is_falling_back", False):  # a reply to one message: a card?
            replied = (relation.get("m.in_reply_to") or {}).get("event_id") or None
        said = IncomingMessage(
            channel=self.instance_name, session_id=session, thread_id=root, user=user, text=text
        )
        answered = await self.cards.words(self.core, said, replied=replied)
        if answered is not None and not answered[1].accepted:
            await self._refused(answered[0], user, answered[1].message)

    async def _refused(self, card_id: str, user: ChannelUser, message: str) -> None:
        """A refusal, said once per person and card, in the card's thread, as a notice."""
        if not self._told.first((card_id, user.id)):
            return
        card = await self.cards.get(card_id)
        text = f"{user.id}: {message}"
        await self.core.call(self.instance_name, "tell", card and card.get("thread"), text)

    # -- platform calls --------------------------------------------------------------------

    async def _send(self, content: dict[str, Any], event_type: str = "m.room.message") -> str:
        try:
            sent = await self.client.send_message_event(
                RoomID(self.config.room_id), EventType.find(event_type), cast(Any, content)
            )
        except Exception as exc:
            raise self._error(exc, "a send") from None
        return str(sent)

    async def tell(self, root: str | None, text: str) -> None:
        """A notice in a thread (the core's `call`: under the rate limit)."""
        await self._send(html.text_shown(text).content(**html.in_thread(root)))

    async def react(self, event_id: str, key: str) -> None:
        """The bot's own reaction to a card, one per option (the core's `call`); none to a
        card closed meanwhile."""
        if await self._closed(event_id):
            return
        relation = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
        try:
            await self._send({"m.relates_to": relation}, "m.reaction")
        except ChannelError as exc:
            if "M_DUPLICATE_ANNOTATION" not in str(exc):
                raise

    def _error(self, exc: BaseException, what: str) -> ChannelError:
        return as_channel_error(exc, self.config.access_token.get_secret_value(), what)

    # -- threads ---------------------------------------------------------------------------

    async def create_session_thread(self, session_id: str, name: str) -> str:
        root = await self._send(html.root(name).content())
        await self.channel_state().set(f"thread:{root}", session_id)
        await self.channel_state().set(f"name:{session_id}", name)  # kept when the session ends
        return root

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        root = self.thread_of(session_id)
        if root is not None:
            await self.channel_state().set(f"name:{session_id}", new_name)
            await self._send(html.edit(root, html.root(new_name)))

    async def archive_session_thread(self, session_id: str) -> None:
        root = self.thread_of(session_id)
        if root is not None:
            name = await self.channel_state().get(f"name:{session_id}")
            await self._send(html.edit(root, html.root(name or "Agent session", "ended")))

    # -- messages --------------------------------------------------------------------------

    def measure(self, blocks: Blocks) -> int:
        """What the homeserver counts: the event content's JSON bytes."""
        return html.blocks_shown(blocks, "🤖").size()

    def measure_card(self, request: PermissionRequest) -> int:
        """Exact for this channel's drawing (`html.card_size`, the rule `html.card` cuts its
        context by), in the JSON bytes `measure` counts: the core folds only what the card
        shows, as sent and in every update."""
        return html.card_size(request)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        pieces = split_to_fit(content, html.MAX_CONTENT, self.measure)
        for piece in pieces:  # a direct caller's long text
            await self.send_message(session_id, piece)
        if pieces:
            return
        shown = html.message(content)
        key = f"key:{session_id}:{content.key}" if content.key else None
        earlier = await self.channel_state().get(key) if key else None
        if key is not None and earlier is not None:
            await self._send(html.edit(earlier, shown))  # streamed text, a tool's card: in place
            return
        sent = await self._send(shown.content(**html.in_thread(self.thread_of(session_id))))
        if key is not None:
            await self.channel_state().set(key, sent)

    async def send_notification(self, notification: NotificationMessage) -> None:
        """Declined (`heads_ups=False`): the core queues none; a direct call says it in the
        session's thread."""
        root = self.thread_of(notification.session_id or "")
        await self.tell(root, f"{heads_up_icon(notification)} {notification.summary}")

    # -- cards -----------------------------------------------------------------------------

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> Posted:
        known = await self.cards.get(request.id)
        if known is not None:  # sent before (a retry after a restart): not again
            return Posted(chat=self.config.room_id, message=str(known["event"]))
        root = self.thread_of(session_id)
        record = {"id": request.id}
        content = html.card(request).content(
            notice=not request.notify, **html.in_thread(root), **{html.CARD_FIELD: record}
        )
        sent = await self._send(content)
        await self.cards.sent(request.id, {"event": sent, "thread": root}, message=sent)
        if request.accepts_text and not request.informational:
            await self.cards.open_cards(session_id, add=request.id)
        if request.options and not request.informational:
            self._reacting[sent] = len(request.options)
            await self.channel_state().set("reacting", json.dumps(self._reacting))
            self._react_soon(sent, len(request.options))
        return Posted(chat=self.config.room_id, message=sent)

    def _react_soon(self, event_id: str, count: int, *, resumed: bool = False) -> None:
        self._tasks.spawn(self._react_later(event_id, count, resumed))

    async def _react_later(self, event_id: str, count: int, resumed: bool) -> None:
        """The bot's reactions, after the card (they never hold it up), queued one at a
        time: a card or an update asked meanwhile waits for one of them at most, and none is
        sent once the card has closed (an event each, under the homeserver's rate). Those a
        stop cut short are resumed at the next start, past the ones the bot made."""
        try:
            done = await self._my_reactions(event_id) if resumed else set()
            for key in html.OPTION_KEYS[:count]:
                if await self._closed(event_id):
                    break
                if key not in done:
                    await self.core.call(self.instance_name, "react", event_id, key)
        except Exception as exc:  # a person can still react with the key the card lists
            log.warning("matrix %s: %s", self.instance_name, self._error(exc, "a reaction"))
            return  # tried again at the next start
        self._reacting.pop(event_id, None)
        await self.channel_state().set("reacting", json.dumps(self._reacting))

    async def _my_reactions(self, event_id: str) -> set[str]:
        """The keys the bot has reacted to `event_id` with."""
        room = RoomID(self.config.room_id)
        path = Path.v1.rooms[room].relations[EventID(event_id)]["m.annotation"]
        page = await self.client.api.request(Method.GET, path, query_params={"limit": "100"})
        mine = [e for e in page.get("chunk", []) if e.get("sender") == self.config.user_id]
        return {str(e["content"]["m.relates_to"].get("key")) for e in mine}

    async def _closed(self, event_id: str) -> bool:
        card_id = await self.cards.of_message(event_id)
        card = await self.cards.get(card_id) if card_id is not None else None
        return card is None or bool(card.get("closed"))

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        async def edit(card: dict[str, Any]) -> None:
            await self._send(html.edit(str(card["event"]), html.card(request, outcome)))
            if outcome.closed:  # no more reactions by the bot (`_closed`)
                await self.cards.save(request.id, {**card, "closed": True})

        await self.cards.update(
            session_id, request.id, closed=outcome.closed, lock=self._lock, edit=edit
        )
