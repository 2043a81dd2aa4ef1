"""`DiscordChannel`: each agent session a thread, each question a card with buttons.

The adapter translates, the core decides. Every platform call the core makes arrives through
its outbox, which keeps Discord's limits (declared in `capabilities`); the adapter turns it
into discord.py calls and discord.py's failures into `ChannelError`/`RateLimited`. discord.py
never waits out a rate limit itself: its `max_ratelimit_timeout` is set to almost nothing, so
a 429 (or a bucket it knows is empty) raises at once and the outbox schedules the retry. Its
buckets are `_Bucket`s, which refuse a call only when empty (discord.py's own refuse any call
while their window is open, which held a thread to one message per window).

Presses: an option's button carries `aep:{card key}:{option index}` as its `custom_id` and is
a `discord.ui.DynamicItem` registered with `Client.add_dynamic_items`, so a card posted before
a restart still answers. A press is deferred at once (Discord wants an answer within 3 s),
then handed to the core by card id (`core.resolve_permission`); the core checks approvers
(user ids, and role ids from `approver_roles`) and a refusal is answered privately
(ephemeral), as is a press on a card whose question closed ("This question is closed:
Answered by Alice: Allow"). A press of a button the card no longer shows (a client that had
not redrawn the closing edit) is one discord.py drops: `on_interaction` takes it
(`components.dropped_press`) and answers it the same way. A reply to a card
(`message_reference`) is a text answer (`core.answer_text`), and so are words in a session's
thread while one question there takes words; other words go to the core as
`handle_incoming_message`.

What the adapter keeps, in the channel's state in the bridge's store, is for its own display
and survives a restart: which thread belongs to which session, which message is which card
(to edit it with its outcome, and to recognise a reply to it), which keyed message to edit,
which heads-up was sent for which question.

`api_base_url` and `gateway_url` set discord.py's `Route.BASE` and the gateway's default URL,
which are process-wide in discord.py: two Discord channels in one bridge share them.

`doctor` (`doctor.py`): the token, the Message Content intent, the server, the channel and
the bot's permissions there, the notifications channel, each failure with its fix (REST only).
A card's buttons and a form's modal are in `components.py`.

Direct messages: a heads-up naming `recipients` (the session's owner, from `people`) goes to
each of them in their DM with the bot (`Client.create_dm`, `POST /users/@me/channels`, once:
the DM channel's id is kept in the state), linking to the card, instead of the notifications
channel. One Discord refuses (50007: the person shares no server with the bot, turned off DMs
from its members, or blocked it; or no such user) is warned about once, naming the user id
and the fix, and gets the heads-up in the notifications channel instead: never a retry of
the refusal, never a stuck outbox. A heads-up is one outbox job charged as one post (against
the heads-ups' shared 5 per 5 s, stricter than each DM channel's own bucket); the DM
channel's opening is one more call, once per person, within the global budget's margin.
Which DMs went out is kept as they go, so a retry after a 5xx sends none twice.

Slash commands: /sessions (a private list with links), and /status, /cancel, /pause,
/resume, /away, /back in a session's thread, handed to the core as that session's chat
command (the core checks approvers and answers in the thread); registered in the guild at
start when missing.

Forms: a "Fill in" button (`aepf:{card key}`, a DynamicItem too) asks `core.may_answer`
first, then opens the form as a modal for the person who pressed (text inputs for words and
numbers, select menus for choices and yes/no); submitted, it goes to `core.answer_form`.
The modal's custom_id is `aepm:{card key}` and discord.py forgets it once sent: a submission
is read by a modal rebuilt from the card, so one opened before a restart still answers. A
modal holds five components: a longer form is shown without the button, to be answered in
the agent's terminal.

A choice that also takes words (AEP-0006 `other`) gets a menu and an "or in your words" box
while the modal has room, else a box alone that names the choices; words naming a choice
answer with that choice.

Messages: `look.message_look` gives a message's content (Discord markdown) and its embeds
(a call's output or diff, the plan, an error: `embeds`); an edit in place replaces both.
`measure` counts the content only, which is what Discord holds to 2,000: the embeds keep
their own limits in `embeds`.

Measured by `make bench` (bench/discord_channel.py: latency, a flood; bench/discord_rendering.py:
the reference session), recorded in bench/RESULTS.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable
from typing import Any, ClassVar, Final, TypeVar

import aiohttp
import discord
import discord.gateway
import discord.http
import yarl
from discord import app_commands

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
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Posted,
    PreviewDialect,
    RateLimit,
    RateLimited,
    RateLimits,
    Resolution,
    ResolutionStatus,
    SessionThreads,
    Tasks,
    command_menu,
)

from . import embeds, markdown
from .components import (
    FORM_MODAL,
    CardButton,
    FormModal,
    card_view,
    dropped_press,
)
from .config import DiscordConfig
from .doctor import describe, run_doctor
from .look import (
    MAX_BUTTONS,
    MAX_CUSTOM_ID,
    MAX_FORM_FIELDS,
    OUTCOME_ICONS,
    blocks_pieces,
    card_key,
    card_size,
    card_text,
    message_look,
    shorten,
    text_pieces,
    thread_name,
)

log = logging.getLogger(__name__)

#: what the outbox splits at: Discord's 2000 less room for the icon or heading of a kind
MAX_TEXT: Final = 1900
#: seconds a thread stays active without messages before Discord hides it (a week)
AUTO_ARCHIVE: Final = 10080
#: how long `start` waits for the gateway's READY
READY_TIMEOUT: Final = 30.0
#: seconds discord.py waits after READY for further guilds (see `start`)
GUILD_WAIT: Final = 0.1
#: discord.py raises `RateLimited` for any wait longer than this (its constructor clamps the
#: option to 30 s; the attribute is set after): the outbox waits, discord.py never does
NO_WAIT: Final = 0.001
#: seconds added to each rate-limit window: Discord times a call when it arrives
LIMIT_MARGIN: Final = 0.05
#: of Discord's 50 requests a second, what the outbox may spend: Discord counts the requests
#: it does not see too (the start's login and slash commands, a thread fetched for an edit)
GLOBAL_BUDGET: Final = 40
MAX_HEADS_UP: Final = 1500
#: the session's name at the head of a heads-up at most (a longer one ends in "…")
MAX_HEADS_UP_NAME: Final = 100
HEADS_UP_CLOSED: Final = "✅"  # when the closing update does not say how (outcome_status)
#: Discord's "Thread is archived": a message in an archived thread cannot be edited
THREAD_ARCHIVED: Final = 50083
#: Discord's "Cannot send messages to this user" (no shared server, DMs off, bot blocked)
#: Discord's "Missing Access": with a 404, what a DM channel kept from another bot answers
MISSING_ACCESS: Final = 50001

#: the slash commands, registered in the guild: /sessions here, the rest go to the core as
#: a session's chat command (`core.handle_incoming_message`), which checks approvers
COMMANDS: Final = command_menu("thread")

T = TypeVar("T")
#: `_edit`'s default: the message keeps its buttons
_KEEP: Final = object()


class _Bucket(discord.http.Ratelimit):
    """discord.py's rate-limit bucket, refusing a call only when the bucket is empty.

    With the channel's tiny `max_ratelimit_timeout`, discord.py's own bucket raises
    `RateLimited` for any call while the bucket's window is open, calls left in it or not (a
    thread took one message per 5 s instead of 5, and a card waited for the window), and
    forgets that it is empty as soon as its last call returns. This one lets a call through
    while the bucket has calls left, stays empty until its window ends, and leaves an empty
    one to discord.py, which raises (never sleeps, as `NO_WAIT` has it)."""

    async def acquire(self) -> None:
        if self.is_expired():
            self.reset()  # type: ignore[no-untyped-call]
        if self.remaining <= 0:
            await super().acquire()
            return
        self._last_request = self._loop.time()
        self.remaining -= 1
        self.outgoing += 1

    async def _refresh(self) -> None:
        """Never a sleep: a bucket whose window is still open stays empty and whoever waits
        on it is told to come back when it ends; else it starts afresh."""
        left = 0.0 if self.expires is None else self.expires - self._loop.time()
        if left > NO_WAIT:
            self._wake(len(self._pending_requests), exception=discord.RateLimited(left))
            return
        self.reset()  # type: ignore[no-untyped-call]
        self._wake(self.remaining)


class _Client(discord.Client):
    """discord.py's client, knowing the adapter its buttons and messages belong to."""

    def __init__(self, adapter: DiscordChannel, **options: Any) -> None:
        super().__init__(**options)
        self.adapter = adapter

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter._on_message(message)

    async def on_guild_available(self, guild: discord.Guild) -> None:
        if str(guild.id) == self.adapter.config.guild_id:
            self.adapter._guild_ready.set()

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        await self.adapter._on_interaction(interaction)


class DiscordChannel(ChannelAdapter[DiscordConfig]):
    """A Discord bot in one guild: a public thread (or forum post) per session in one
    channel, cards with buttons, heads-ups in a notifications channel."""

    name = "discord"
    capabilities = ChannelCapabilities(
        # a route may put a team's sessions in a channel of their own (`channel_of`)
        places=True,
        threads=True,
        buttons=True,
        edits=True,
        text_answers=True,
        forms=True,  # a "Fill in" button opening a modal (up to five fields)
        max_message_length=MAX_TEXT,
        length_unit="utf16",
        max_button_data=MAX_CUSTOM_ID,
        max_buttons=MAX_BUTTONS,
        updates_heads_ups=True,
        # a heads-up with `recipients` goes to each by DM (the notifications channel as fallback)
        direct_messages=True,
        # a card's message shows its context above it (`look.card_text`)
        card_context=True,
        # Discord's limits: 5 messages per 5 s in a channel or thread, 50 requests a second
        # for the bot in all (of which the outbox takes `GLOBAL_BUDGET`); each window a little
        # wider (Discord times a call on arrival)
        rate_limits=RateLimits(
            per_chat=RateLimit(count=5, per_seconds=5 + LIMIT_MARGIN),
            global_=RateLimit(count=GLOBAL_BUDGET, per_seconds=1 + LIMIT_MARGIN),
        ),
        # and 10 new threads per 10 s in the parent channel (`POST /channels/{id}/threads`,
        # a bucket of its own): every session's thread is made there (`limit_keys`' group)
        thread_rate_limit=RateLimit(count=10, per_seconds=10 + LIMIT_MARGIN),
    )
    config_model: ClassVar[type[ChannelConfig]] = DiscordConfig
    contract_version: ClassVar[str] = "1.2"

    def __init__(self, core: BridgeCore, config: DiscordConfig) -> None:
        super().__init__(core, config)
        self._client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._forum = False
        self._lock = asyncio.Lock()
        self._tasks = Tasks()  # replies via the outbox that a handler does not wait for
        self._guild_ready = asyncio.Event()
        self._cards = CardRecords.plain(self.channel_state, card_key)
        self._sessions = SessionThreads(self.channel_state)
        #: recipients whose DM Discord refused, warned about once (until one reaches them)
        self._unreachable: set[str] = set()
        if config.notifications_channel_id is None:  # nowhere to show a heads-up: the core
            # queues none (none spends a slot), and a question's card rings instead
            self.capabilities = self.capabilities.model_copy(update={"heads_ups": False})
        #: cards being sent or sent since the start, by card id: a heads-up about one links to it

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        discord.http.Route.BASE = self.config.api_base_url
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.config.gateway_url)
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.message_content = True
        client = _Client(
            self,
            intents=intents,
            allowed_mentions=discord.AllowedMentions.none(),
            max_ratelimit_timeout=30.0,
            # discord.py waits this long after READY for more guilds; the bot needs one, and
            # `start` waits for that one itself (below)
            guild_ready_timeout=GUILD_WAIT,
        )
        client.http.max_ratelimit_timeout = NO_WAIT
        discord.http.Ratelimit = _Bucket  # type: ignore[misc]  # process-wide, as Route.BASE
        client.add_dynamic_items(CardButton)
        tree = app_commands.CommandTree(client)
        guild = discord.Object(int(self.config.guild_id))
        for verb, description in COMMANDS:
            tree.add_command(
                app_commands.Command(
                    name=verb, description=description, callback=self._slash(verb)
                ),
                guild=guild,
            )
        try:
            await client.login(self.config.token.get_secret_value())
        except discord.LoginFailure:
            await _close(client)
            raise ChannelError(
                f"Discord refused the token of channel {self.instance_name}: check `token` "
                "(Developer Portal > Bot > Reset Token)",
                permanent=True,
            ) from None
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            await _close(client)
            raise ChannelError(
                f"Discord channel {self.instance_name}: cannot log in: {describe(exc)}"
            ) from None
        runner = asyncio.create_task(client.connect(reconnect=True))
        ready = asyncio.create_task(client.wait_until_ready())
        try:
            done, _ = await asyncio.wait(
                {runner, ready}, timeout=READY_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if runner in done or not done:
            await _close(client)
            runner.cancel()
            with contextlib.suppress(BaseException):
                await runner
            error = None if not runner.done() or runner.cancelled() else runner.exception()
            if isinstance(error, discord.PrivilegedIntentsRequired):
                raise ChannelError(
                    f"Discord channel {self.instance_name}: the bot may not use the Message "
                    "Content intent: turn it on in the Developer Portal (Bot > Privileged "
                    "Gateway Intents)",
                    permanent=True,
                )
            raise ChannelError(
                f"Discord channel {self.instance_name}: the gateway did not become ready"
                + (f": {describe(error)}" if error is not None else "")
            )
        self._client, self._runner = client, runner
        if client.get_guild(int(self.config.guild_id)) is None:
            try:
                await asyncio.wait_for(self._guild_ready.wait(), READY_TIMEOUT)
            except TimeoutError:
                await self.stop()
                raise ChannelError(
                    f"Discord channel {self.instance_name}: the bot is not in server "
                    f"{self.config.guild_id} (invite it, or check `guild_id`)"
                ) from None
        try:
            channel = client.get_channel(int(self.config.channel_id))
            if channel is None:
                channel = await client.fetch_channel(int(self.config.channel_id))
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            await self.stop()
            raise ChannelError(
                f"Discord channel {self.instance_name}: cannot reach channel "
                f"{self.config.channel_id}: {describe(exc)}; is the bot in the server?",
                permanent=isinstance(exc, discord.Forbidden | discord.NotFound),
            ) from None
        if isinstance(channel, discord.ForumChannel):
            self._forum = True
        elif isinstance(channel, discord.TextChannel):
            self._forum = False
        else:
            await self.stop()
            raise ChannelError(
                f"Discord channel {self.instance_name}: {self.config.channel_id} is neither a "
                "text channel nor a forum channel",
                permanent=True,
            )
        await self._register_commands(tree, guild)
        log.info(
            "discord %s: %s in %s, #%s (%s)",
            self.instance_name,
            client.user,
            channel.guild.name,
            channel.name,
            "posts in a forum" if self._forum else "threads in a text channel",
        )

    async def doctor(self) -> list[DoctorCheck]:
        """The token, the Message Content intent, the server, the channel and what the bot
        may do there, the notifications channel: each failure with its fix. REST only (no
        gateway): `aep-bridge doctor` runs it beside a running bridge."""
        discord.http.Route.BASE = self.config.api_base_url
        client = discord.Client(intents=discord.Intents.none())
        client.http.max_ratelimit_timeout = NO_WAIT
        try:
            return await run_doctor(client, self.config)
        finally:
            await _close(client)

    async def stop(self) -> None:
        client, self._client = self._client, None
        runner, self._runner = self._runner, None
        await self._tasks.stop()
        if client is not None:
            await _close(client)
        if runner is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(runner, 10)

    @property
    def client(self) -> _Client:
        if self._client is None:
            raise ChannelError(f"Discord channel {self.instance_name} is not started")
        return self._client

    # -- threads ---------------------------------------------------------------------------

    async def create_session_thread(self, session_id: str, name: str) -> str:
        name = thread_name(name)
        parent = await self._call(self._parent(session_id))
        if isinstance(parent, discord.ForumChannel):
            made = await self._call(
                parent.create_thread(
                    name=name,
                    content=f"🧵 **{markdown.escape(name)}**",
                    auto_archive_duration=AUTO_ARCHIVE,
                    allowed_mentions=discord.AllowedMentions.none(),
                )
            )
            thread = str(made.thread.id)
        else:
            made_thread = await self._call(
                parent.create_thread(
                    name=name,
                    type=discord.ChannelType.public_thread,
                    auto_archive_duration=AUTO_ARCHIVE,
                )
            )
            thread = str(made_thread.id)
        await self._sessions.made(session_id, thread, name)
        return thread

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        thread = await self._thread_object(session_id)
        if thread is not None and thread.name != thread_name(new_name):
            await self._call(thread.edit(name=thread_name(new_name)))
        if thread is not None:
            await self._sessions.remember(session_id, str(thread.id), thread_name(new_name))

    async def archive_session_thread(self, session_id: str) -> None:
        await self._sessions.forget(session_id)
        thread = await self._thread_object(session_id)
        if thread is None:
            return
        if self.config.lock_on_end:
            await self._call(thread.edit(archived=True, locked=True))
        else:
            await self._call(thread.edit(archived=True))

    @classmethod
    def preview_dialect(cls) -> PreviewDialect:
        """`aep-bridge preview --channel discord`: a session in a Discord thread."""
        from .preview import DiscordDialect

        return DiscordDialect()

    # -- messages --------------------------------------------------------------------------

    def measure(self, blocks: Blocks) -> int:
        """What counts against Discord's 2,000 is a message's content, the markdown of what
        is not in its embeds (`embeds.measure`); the embeds keep their own limits."""
        return embeds.measure(blocks)

    def measure_card(self, request: PermissionRequest) -> int:
        """Exact for this channel's drawing (`look.card_size`, the rule `card_text` cuts
        by): at most `max_message_length` exactly when the card shows its whole context as
        sent and in its outcome's edit. A card counts against Discord's own 2,000, not the
        1,900 a thread's message keeps free, so the size is told 100 less."""
        return card_size(request) - (markdown.LIMIT - self.capabilities.max_message_length)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        # the core's outbox splits; a direct caller may not have
        updates: list[dict[str, Any]] = []
        if content.blocks and self.measure(content.blocks) > MAX_TEXT:
            for part in blocks_pieces(content.blocks, MAX_TEXT):
                updates.append({"blocks": part, "text": ""})
        elif not content.blocks and len(markdown.escape(content.text)) > MAX_TEXT:
            updates = [{"text": piece} for piece in text_pieces(content.text, MAX_TEXT)]
        for index, update in enumerate(updates):
            last = index == len(updates) - 1
            update.update(key=content.key if last else None, notify=content.notify and last)
            await self.send_message(session_id, content.model_copy(update=update))
        if updates:
            return
        look = message_look(content)
        text = look.content or ("" if look.embeds else "…")
        shown = [discord.Embed.from_dict(embed.to_dict()) for embed in look.embeds]
        state = self.channel_state()
        key = f"key:{session_id}:{content.key}" if content.key else None
        earlier = await state.get(key) if key else None
        where = self._messageable(session_id)
        if earlier is not None and not content.notify:
            edited = await self._edit(where, int(earlier), text, embeds=shown)
            if edited:
                return
        sent = await self._call(
            where.send(
                text or None,
                embeds=shown,
                allowed_mentions=discord.AllowedMentions.none(),
                silent=not content.notify,
            )
        )
        if key is not None:
            await state.set(key, str(sent.id))
            if earlier is not None:  # a finished answer replaces its streamed draft
                await self._delete(where, int(earlier))

    async def send_notification(self, notification: NotificationMessage) -> None:
        """A heads-up linking to the card (or the thread): to each of `recipients` by DM, in
        the notifications channel when there are none or Discord refuses one. One about a
        question is remembered where it went, so its closing update edits it, silently."""
        where_id = self.config.notifications_channel_id
        if where_id is None:
            return  # no heads-ups configured: the cards ring instead
        if notification.outcome is not None:
            await self._close_heads_up(notification)
            return
        state = self.channel_state()
        key = f"headsup:{notification.request_id}" if notification.request_id else None
        earlier = _heads_up_record(await state.get(key)) if key is not None else None
        if earlier is not None and earlier.get("done", True):
            return  # sent before (a retry after a restart): one question rings once
        # the session's name, then what happened; one of no session (an agent went offline)
        # is what happened alone
        name = shorten(" ".join((notification.session_name or "").split()), MAX_HEADS_UP_NAME)
        url = await self._link(notification)
        what = markdown.escape(shorten(notification.summary, MAX_HEADS_UP))
        icon = {"completed": "🏁", "error": "⚠️", "budget_warning": "💸"}.get(
            notification.type, "❓"
        )
        if name:
            where = f"[{markdown.escape(name)}](<{url}>)" if url else markdown.escape(name)
            body = f"{where}: {what}"
        else:
            body = f"[{what}](<{url}>)" if url else what
        text = f"{icon} {body}"
        record: dict[str, Any] = earlier or {"sent": [], "to": [], "body": body}
        fallback = not notification.recipients
        for recipient in notification.recipients:
            if recipient in record["to"]:
                continue  # reached before a retry
            dm = await self._direct(recipient, text)
            if dm is None:
                fallback = True
                continue
            record["sent"].append(dm)
            record["to"].append(recipient)
            if key is not None:
                await state.set(key, json.dumps({**record, "done": False}))
        if fallback:
            channel = self.client.get_partial_messageable(
                int(where_id), guild_id=int(self.config.guild_id)
            )
            sent = await self._call(
                channel.send(text, allowed_mentions=discord.AllowedMentions.none())
            )
            record["sent"].append([int(where_id), sent.id])
        if key is not None:
            await state.set(key, json.dumps({**record, "done": True}))

    async def _direct(self, recipient: str, text: str) -> list[int] | None:
        """Send `text` to `recipient` (a user id) in their DM with the bot: [DM channel id,
        message id], or None when Discord refuses (warned about once: who, and the fix)."""
        state = self.channel_state()
        try:
            user_id = int(recipient)
        except ValueError:
            self._unreachable_dm(recipient, "it is not a Discord user id (digits)")
            return None
        key = f"dm:{user_id}"
        try:
            known = await state.get(key)
            sent: discord.Message | None = None
            if known is not None:
                try:
                    sent = await self._send_dm(int(known), text)
                except discord.HTTPException as exc:
                    if exc.status != 404 and exc.code != MISSING_ACCESS:
                        raise
                    known = None  # a DM channel kept from another bot: open it afresh
            if known is None:
                opened = await self._call(self.client.create_dm(discord.Object(user_id)), raw=True)
                known = str(opened.id)
                await state.set(key, known)
                sent = await self._send_dm(int(known), text)
            assert sent is not None
        except discord.HTTPException as exc:
            if exc.status >= 500:
                raise _mapped(exc) from None  # Discord's trouble: the outbox retries
            self._unreachable_dm(recipient, f"Discord said: {exc.text} (code {exc.code})")
            return None
        self._unreachable.discard(recipient)
        return [int(known), sent.id]

    async def _send_dm(self, channel_id: int, text: str) -> discord.Message:
        where = self.client.get_partial_messageable(channel_id, type=discord.ChannelType.private)
        return await self._call(
            where.send(text, allowed_mentions=discord.AllowedMentions.none()), raw=True
        )

    def _unreachable_dm(self, recipient: str, why: str) -> None:
        """One warning per person whose DM fails (until one reaches them): who, and the fix."""
        if recipient in self._unreachable:
            log.debug("discord %s: no DM to user %s: %s", self.instance_name, recipient, why)
            return
        self._unreachable.add(recipient)
        log.warning(
            "discord %s: cannot send a direct message to Discord user %s (%s); their "
            "heads-ups go to the notifications channel instead. To get them privately, that "
            "person must share the server with the bot, allow direct messages from its "
            "members (the server's Privacy Settings > Direct Messages) and not block the "
            "bot; check that people.<name>.discord is their user id (Developer Mode > Copy "
            "User ID)",
            self.instance_name,
            recipient,
            why,
        )

    async def _close_heads_up(self, notification: NotificationMessage) -> None:
        record = _heads_up_record(
            await self.channel_state().get(f"headsup:{notification.request_id}")
        )
        notifications = self.config.notifications_channel_id
        if record is None or notification.outcome is None or not notifications:
            return  # none sent here: an answered question must not ring
        outcome = markdown.escape(shorten(notification.outcome, 200))
        icon = OUTCOME_ICONS.get(str(notification.outcome_status), HEADS_UP_CLOSED)
        for channel_id, message_id in record["sent"]:
            if channel_id is None or channel_id == int(notifications):
                channel = self.client.get_partial_messageable(
                    int(notifications), guild_id=int(self.config.guild_id)
                )
            else:  # a DM
                channel = self.client.get_partial_messageable(
                    channel_id, type=discord.ChannelType.private
                )
            await self._edit(channel, message_id, f"{icon} {record['body']} — {outcome}")

    async def _link(self, notification: NotificationMessage) -> str | None:
        """The card's message when it was sent here, else the session's thread."""
        base = f"https://discord.com/channels/{self.config.guild_id}"
        card = await self._cards.get(notification.request_id or "")  # out before it (the outbox)
        if card is not None:
            return f"{base}/{card['thread']}/{card['message']}"
        thread = self.thread_of(notification.session_id)
        return f"{base}/{thread}" if thread else None

    # -- cards -----------------------------------------------------------------------------

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> Posted:
        known = await self._cards.get(request.id)
        if known is not None:
            return self._where(known)  # sent before (a retry after a restart): not again
        text = card_text(request)
        # quiet when its heads-up rings in the notifications channel: one question, one ping
        notify = request.notify or self.config.notifications_channel_id is None
        where = self._messageable(session_id)
        view = card_view(request)
        extra: dict[str, Any] = {} if view is None else {"view": view}
        sent = await self._call(
            where.send(
                text, allowed_mentions=discord.AllowedMentions.none(), silent=not notify, **extra
            )
        )
        thread = self.thread_of(session_id) or self.channel_of(session_id)
        card = {
            "session": session_id,
            "thread": thread,
            "message": sent.id,
            "request": request.model_dump(mode="json") if request.fields else None,
        }
        await self._cards.sent(request.id, card, message=sent.id)
        if request.accepts_text and not request.informational:
            await self._cards.open_cards(session_id, add=request.id)
        return self._where(card)

    def _where(self, card: dict[str, Any]) -> Posted:
        """Where a card is, for the audit trail: its thread, its message and the link
        Discord opens it by (`_link`'s)."""
        thread, message = str(card["thread"]), str(card["message"])
        link = f"https://discord.com/channels/{self.config.guild_id}/{thread}/{message}"
        return Posted(chat=thread, message=message, link=link)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        async def edit(card: dict[str, Any]) -> None:
            text = card_text(request, outcome)
            view = None if outcome.closed else card_view(request)
            where = self.client.get_partial_messageable(
                int(card["thread"]), guild_id=int(self.config.guild_id)
            )
            await self._edit(where, int(card["message"]), text, view=view, thread=card["thread"])

        await self._cards.update(
            session_id, request.id, closed=outcome.closed, lock=self._lock, edit=edit
        )

    # -- events from Discord ---------------------------------------------------------------

    async def on_press(self, interaction: discord.Interaction[Any], key: str, option: int) -> None:
        """An option's button: answered at once (deferred) while the core decides, so the
        answer reaches the agent without waiting for Discord's round trip."""
        deferred = asyncio.create_task(self._defer(interaction))
        try:
            resolution = await self._cards.press(self.core, key, option, _user(interaction.user))
        finally:
            await deferred  # a follow-up needs the press answered first
        if not resolution.accepted:  # a refusal is logged by the core; the presser is told
            await self._tell(interaction, resolution)

    async def _tell(self, interaction: discord.Interaction[Any], resolution: Resolution) -> None:
        """What became of a press or a form, to the presser alone (after the interaction was
        answered): escaped, for it may quote an option's label or the agent's words, and
        pinging no one."""
        try:
            await interaction.followup.send(
                markdown.escape(resolution.message),
                ephemeral=True,
                allowed_mentions=discord.AllowedMentions.none(),
            )
        except discord.HTTPException as exc:
            log.warning("discord %s: could not answer a press: %s", self.instance_name, exc)

    async def _defer(self, interaction: discord.Interaction[Any]) -> None:
        """Tell Discord the press arrived (within its 3 s); the card's edit says the rest."""
        try:
            await interaction.response.defer()
        except discord.HTTPException as exc:
            log.warning("discord %s: could not answer a press: %s", self.instance_name, exc)

    async def on_form(self, interaction: discord.Interaction[Any], key: str) -> None:
        """A form's "Fill in": asked of the core first (a stranger opens nothing), then the
        form as a modal, only for the person who pressed; answered within Discord's 3 s."""
        card_id = await self._cards.of_key(key)
        user = _user(interaction.user)
        refused = await self.core.may_answer(card_id, user) if card_id else None
        card = await self._cards.get(card_id or "")
        if refused is None and (card is None or not card.get("request")):
            # never an empty answer in the form's place: only the card's fields, kept with it
            refused = Resolution(status=ResolutionStatus.UNKNOWN)
        if refused is not None:  # a stranger, or a question that closed: told privately
            await _respond(interaction, markdown.escape(refused.message))
            return
        assert card is not None
        request = PermissionRequest.model_validate(card["request"])
        if len(request.fields) > MAX_FORM_FIELDS:
            await _respond(
                interaction, "This form is too long for Discord: answer it in the agent's terminal."
            )
            return
        modal = FormModal(self, str(card_id), request)
        try:
            await interaction.response.send_modal(modal)
        except discord.HTTPException as exc:
            log.warning("discord %s: could not answer a press: %s", self.instance_name, exc)
        # discord.py forgets it now: its submission goes to `_on_modal`, the same way as one
        # sent before a restart, which Discord keeps open in the person's client
        modal.stop()

    async def _on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        """What discord.py does not hand to a button or modal of ours: a form's modal
        submitted (`_on_modal`), and a press of a button the card no longer shows (its
        question closed while the person's client still showed it, `dropped_press`), which
        goes the way of any press: the core checks approvers first, then says what became of
        the question, privately, within Discord's 3 s. Never "This interaction failed"."""
        dropped = dropped_press(interaction)
        if dropped is None:
            await self._on_modal(interaction)
            return
        key, option = dropped
        if option is None:
            await self.on_form(interaction, key)
        else:
            await self.on_press(interaction, key, option)

    async def _on_modal(self, interaction: discord.Interaction[Any]) -> None:
        """A form's modal submitted: rebuilt from its card (kept in the state), then read and
        answered by discord.py's own modal code (`FormModal.on_submit`)."""
        data: dict[str, Any] = dict(interaction.data or {})
        custom = str(data.get("custom_id", ""))
        if interaction.type is not discord.InteractionType.modal_submit:
            return
        if not custom.startswith(FORM_MODAL):
            return
        key = custom.removeprefix(FORM_MODAL)
        card_id = await self._cards.of_key(key)
        card = await self._cards.get(card_id or "")
        if card_id is None or card is None or not card.get("request"):
            await _respond(interaction, Resolution(status=ResolutionStatus.UNKNOWN).message)
            return
        modal = FormModal(self, card_id, PermissionRequest.model_validate(card["request"]))
        # what discord.py does with a submission of a modal it knows (`ViewStore.dispatch_modal`)
        await modal._dispatch_submit(
            interaction, data.get("components", []), data.get("resolved", {})
        )

    async def on_form_submit(self, interaction: discord.Interaction[Any], modal: FormModal) -> None:
        values = modal.values()
        if isinstance(values, str):
            await _respond(interaction, values)
            return
        try:
            await interaction.response.defer()
        except discord.HTTPException as exc:
            log.warning("discord %s: could not answer a press: %s", self.instance_name, exc)
        resolution = await self.core.answer_form(modal.card_id, values, _user(interaction.user))
        if not resolution.accepted:
            await self._tell(interaction, resolution)

    async def _on_message(self, message: discord.Message) -> None:
        client = self._client
        if client is None or message.author.bot or message.guild is None:
            return
        if str(message.guild.id) != self.config.guild_id:
            return
        user = _user(message.author)
        text = message.content.strip()
        reply_card: str | None = None
        reference = message.reference
        if reference is not None and reference.message_id is not None:
            reply_card = await self._cards.of_message(reference.message_id)
        session = await self._sessions.session_of(message.channel.id)
        if reply_card is None and session is not None and not text.startswith("/"):
            # words in the thread while one question there takes words: its answer
            reply_card = await self._cards.only_open_card(session)
        if reply_card is not None and text:
            resolution = await self.core.answer_text(reply_card, text, user)
            if not resolution.accepted:
                self._tasks.spawn(
                    self._limited("reply_to", message.channel.id, message.id, resolution.message)
                )
            return
        if session is None or not text:
            return
        await self.pass_on(session, str(message.channel.id), user, text)

    # -- slash commands --------------------------------------------------------------------

    def _slash(self, verb: str) -> Any:
        async def command(interaction: discord.Interaction) -> None:
            await self._on_slash(interaction, verb)

        return command

    async def _register_commands(self, tree: app_commands.CommandTree[Any], guild: Any) -> None:
        """Register the slash commands in the guild, unless they are there as they are (the
        guild's commands are Discord's to keep: registering at every start is not needed)."""
        try:
            known = await tree.fetch_commands(guild=guild)
            if sorted((c.name, c.description) for c in known) != sorted(COMMANDS):
                await tree.sync(guild=guild)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.warning(
                "discord %s: slash commands not registered: %s (invite the bot with the "
                "applications.commands scope)",
                self.instance_name,
                describe(exc),
            )

    async def _on_slash(self, interaction: discord.Interaction[Any], verb: str) -> None:
        """/sessions lists them, privately; the others, in a session's thread, go to the core
        as that session's chat command (it checks approvers and answers in the thread)."""
        if verb == "sessions":
            await _respond(interaction, await self._sessions_text())
            return
        channel_id = interaction.channel_id
        session = await self._sessions.session_of(channel_id) if channel_id else None
        if session is None:
            await _respond(interaction, f"/{verb} works in a session's thread.")
            return
        await _respond(interaction, f"/{verb}: asked; the answer follows in this thread.")
        await self.pass_on(session, str(channel_id), _user(interaction.user), f"/{verb}")

    async def _sessions_text(self) -> str:
        live = await self._sessions.live()
        if not live:
            return "No agent session is running."
        base = f"https://discord.com/channels/{self.config.guild_id}"
        lines = [
            f"- [{markdown.escape(name)}](<{base}/{thread}>)" for thread, name in live.values()
        ]
        return "Sessions:\n" + "\n".join(lines)

    # -- calls the outbox runs for the adapter's own needs (`core.call`) -------------------

    async def reply_to(self, channel_id: int, message_id: int, text: str) -> None:
        """Answer a person's message in place (why their words were not taken)."""
        where = self.client.get_partial_messageable(channel_id, guild_id=int(self.config.guild_id))
        await self._call(
            where.send(
                markdown.escape(text),
                reference=where.get_partial_message(message_id),
                mention_author=False,
                allowed_mentions=discord.AllowedMentions.none(),
            )
        )

    async def _limited(self, op: str, *args: Any) -> None:
        try:
            await self.core.call(self.instance_name, op, *args)
        except ChannelError as exc:
            log.warning("discord %s: %s failed: %s", self.instance_name, op, exc)

    # -- helpers ---------------------------------------------------------------------------

    def channel_of(self, session_id: str) -> str:
        """The channel the session's thread is made in: where a route placed it
        (`routes[].places`), else the configured channel."""
        return self.place_of(session_id) or self.config.channel_id

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        """Each thread is its own chat; the group, where the 10-threads-per-10-s limit counts,
        is the channel the session's threads are made in."""
        chat, _ = super().limit_keys(session_id)
        return (chat, self.channel_of(session_id) if session_id else self.config.channel_id)

    async def _parent(self, session_id: str) -> Any:
        channel_id = int(self.channel_of(session_id))
        return self.client.get_channel(channel_id) or await self.client.fetch_channel(channel_id)

    def _messageable(self, session_id: str) -> discord.PartialMessageable:
        thread = self.thread_of(session_id)
        if thread is None:
            if self._forum:
                raise ChannelError(
                    f"session {session_id} has no thread, and a forum takes no messages",
                    permanent=True,
                )
            thread = self.channel_of(session_id)
        return self.client.get_partial_messageable(int(thread), guild_id=int(self.config.guild_id))

    async def _thread_object(self, session_id: str) -> discord.Thread | None:
        thread = self.thread_of(session_id)
        if thread is None:
            return None
        found = self.client.get_channel(int(thread))
        if not isinstance(found, discord.Thread):  # archived threads leave discord.py's cache
            found = await self._call(self.client.fetch_channel(int(thread)))
        return found if isinstance(found, discord.Thread) else None

    async def _edit(
        self,
        where: discord.PartialMessageable,
        message_id: int,
        text: str,
        *,
        view: discord.ui.View | object | None = _KEEP,
        thread: str | None = None,
        embeds: list[discord.Embed] | None = None,
    ) -> bool:
        """Edit a message; False when it is gone. A card in an archived thread (a late
        outcome) is edited by opening the thread for the edit and closing it again.
        `embeds` replace the message's (an empty list removes them); None keeps them."""
        kwargs: dict[str, Any] = {
            "content": text or None,
            "allowed_mentions": discord.AllowedMentions.none(),
        }
        if view is not _KEEP:
            kwargs["view"] = view
        if embeds is not None:
            kwargs["embeds"] = embeds
        message = where.get_partial_message(message_id)
        try:
            await self._call(message.edit(**kwargs), raw=True)
        except discord.NotFound:
            return False
        except discord.HTTPException as exc:
            if exc.code != THREAD_ARCHIVED or thread is None:
                raise _mapped(exc) from None
            found = await self._call(self.client.fetch_channel(int(thread)))
            if not isinstance(found, discord.Thread):
                return False
            locked = found.locked
            await self._call(found.edit(archived=False, locked=False))
            await self._call(message.edit(**kwargs))
            await self._call(found.edit(archived=True, locked=locked))
        return True

    async def _delete(self, where: discord.PartialMessageable, message_id: int) -> None:
        """Delete a message; one already gone is fine."""
        try:
            await self._call(where.get_partial_message(message_id).delete(), raw=True)
        except discord.NotFound:
            return
        except discord.HTTPException as exc:
            raise _mapped(exc) from None

    async def _call(self, call: Awaitable[T], *, raw: bool = False) -> T:
        """One discord.py call, its failures as the core's outbox understands them (`raw`:
        discord.py's own HTTPExceptions, other than rate limits, pass through)."""
        try:
            return await call
        except discord.RateLimited as exc:
            raise RateLimited(exc.retry_after) from None
        except discord.HTTPException as exc:
            if exc.status == 429:
                raise _mapped(exc) from None
            if raw:
                raise
            raise _mapped(exc) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ChannelError(f"Discord call failed: {describe(exc)}") from None


def _heads_up_record(raw: str | None) -> dict[str, Any] | None:
    """A question's heads-up as the state keeps it: where it went (`sent`: [channel id,
    message id] pairs), who was reached by DM (`to`), its text, and whether all went out.
    One kept before DMs (`message`: in the notifications channel, None as its channel)."""
    if raw is None:
        return None
    record: dict[str, Any] = json.loads(raw)
    if "sent" not in record:
        return {"sent": [[None, int(record["message"])]], "to": [], "body": record["body"]}
    return record


def _user(user: discord.User | discord.Member) -> ChannelUser:
    """Who pressed or wrote: their user id, their name, and their role ids (for
    `approver_roles`), as the core's approver check reads them."""
    roles: tuple[str, ...] = ()
    if isinstance(user, discord.Member):
        roles = tuple(str(role.id) for role in user.roles if not role.is_default())
    name = user.display_name
    if user.name and user.name != name:
        name = f"{name} (@{user.name})"
    return ChannelUser(id=str(user.id), name=name, roles=roles)


def _mapped(exc: discord.HTTPException) -> ChannelError:
    """discord.py's HTTP error as the outbox's: a 429 to wait out, a 5xx to retry, any other
    refusal permanent. Its text is Discord's answer, which never quotes the token."""
    if exc.status == 429:
        retry_after = 1.0
        response = getattr(exc, "response", None)
        header = response.headers.get("Retry-After") if response is not None else None
        with contextlib.suppress(TypeError, ValueError):
            retry_after = float(header) if header else retry_after
        return RateLimited(retry_after, f"Discord said 429: {exc.text}")
    if exc.status >= 500:
        return ChannelError(f"Discord failed: {exc.status} {exc.text}")
    return ChannelError(
        f"Discord refused the call: {exc.status} {exc.text} (code {exc.code})", permanent=True
    )


async def _respond(interaction: discord.Interaction[Any], text: str) -> None:
    """Answer a slash command privately, at once (within Discord's 3 s)."""
    try:
        await interaction.response.send_message(
            text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )
    except discord.HTTPException as exc:
        log.warning("discord: could not answer a slash command: %s", exc)


async def _close(client: discord.Client) -> None:
    with contextlib.suppress(Exception):
        await client.close()
