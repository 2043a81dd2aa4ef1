"""`TelegramChannel`: each agent session a forum topic, each question an inline keyboard.

The adapter translates, the core decides. Every platform call the core makes arrives through
its outbox (which keeps Telegram's limits); the adapter only turns it into Bot API calls and
turns Telegram's answers into `ChannelError`/`RateLimited`. Updates (button presses, replies,
commands) are long-polled by python-telegram-bot and handled concurrently: a handler hands the
press to the core, which decides at once (it never waits for the agent), and answers the
callback query with what the core said.

A button carries its card's id and the option's position, and the core resolves a press from
those alone (contract 1.2): nothing the adapter keeps is needed to answer it. What the adapter
keeps, in the channel's state in the bridge's store, is for its own display and survives a
restart: which topic belongs to which session, which message is which card (to edit it with
its outcome, and to recognise a reply to it), a form's progress, which keyed message to edit,
which heads-up was sent for which question (to edit it when the question closes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Final, TypeVar

from telegram import (
    Bot,
    BotCommand,
    CallbackQuery,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    ReplyParameters,
    Update,
)
from telegram.error import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidToken,
    RetryAfter,
    TelegramError,
)
from telegram.ext import Application, ApplicationBuilder, CallbackQueryHandler, MessageHandler
from telegram.ext import filters as tg_filters

from aep_bridge import (
    Blocks,
    BridgeCore,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelError,
    ChannelUser,
    DoctorCheck,
    IncomingMessage,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    PreviewDialect,
    RateLimit,
    RateLimited,
    RateLimits,
    Resolution,
    ResolutionStatus,
    markup,
    measure,
    split_text,
)

from . import html
from .config import TelegramConfig, shared_id_reason
from .look import (
    _OUTCOME_ICONS,
    CARD_TAIL,
    _card_html,
    _keyboard,
    _message_html,
    _shorten,
    _topic_name,
    card_key,
)

log = logging.getLogger(__name__)
#: python-telegram-bot's polling logger: getUpdates errors other than 409 are logged as it does
_POLLING_LOG = logging.getLogger("telegram.ext.Updater")
#: seconds before a 409 Conflict that persists is logged again (PTB retries every few seconds)
CONFLICT_REPEAT: Final = 600.0

#: Telegram's limit is 4096 UTF-16 units after the HTML is parsed; the rest is for the icon
#: and heading the adapter puts before the core's text.
MAX_TEXT: Final = 4000
MAX_TOAST: Final = 200
#: seconds added to each rate-limit window (see `capabilities`)
LIMIT_MARGIN: Final = 0.05
#: what a question's heads-up shows when the question is closed: the icon replaces its ❓,
#: and the outcome (at most `MAX_HEADS_UP_OUTCOME` units) follows a dash
HEADS_UP_CLOSED: Final = "✅"  # when the closing update does not say how (outcome_status)
MAX_HEADS_UP_OUTCOME: Final = 200
#: a heads-up's summary at most, so that the closing edit still fits under Telegram's limit
MAX_HEADS_UP: Final = 3500
COMMANDS: Final = (
    ("sessions", "list the agent sessions and their topics"),
    ("status", "in a session's topic: what the agent is doing"),
    ("cancel", "in a session's topic: ask the agent to stop"),
    ("pause", "in a session's topic: ask the agent to pause"),
    ("resume", "in a session's topic: ask the agent to go on"),
)
#: BadRequest descriptions that mean "trying again cannot help"
_GONE: Final = (
    "thread not found",
    "topic_deleted",
    "topic deleted",
    "topic_closed",
    "chat not found",
    "not enough rights",
    "have no rights",
    "bot was kicked",
    "chat_write_forbidden",
)

T = TypeVar("T")


@dataclass
class CardRecord:
    """A card on the platform, for display: enough to edit it (its outcome, a form's next
    field) and to place a reply to it in its session. Never needed to answer a press."""

    session: str
    message: int
    html: str
    request: dict[str, Any]
    closed: bool = False
    #: form progress per person: user id -> {"field": index, "values": {...}}
    forms: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the form field the card shows now (None: its "Fill in" button), so words replied to
    #: it fill only the field that was on show
    showing: int | None = None

    @property
    def permission(self) -> PermissionRequest:
        return PermissionRequest.model_validate(self.request)


class TelegramChannel(ChannelAdapter[TelegramConfig]):
    """A Telegram bot in one chat: a forum topic per session (or a reply chain), cards as
    inline keyboards, heads-ups in a notifications topic."""

    name = "telegram"
    capabilities = ChannelCapabilities(
        threads=True,
        buttons=True,
        edits=True,
        text_answers=True,
        forms=True,
        max_message_length=MAX_TEXT,
        length_unit="utf16",
        max_button_data=64,
        max_buttons=24,
        # a question's heads-up is edited when the question closes (edits never ring)
        updates_heads_ups=True,
        # Telegram's limits (1 a second per chat, 20 a minute per group, 30 a second in all),
        # each window a little wider: Telegram times a call when it arrives, and a request
        # sent exactly one window after the last can arrive a millisecond early
        rate_limits=RateLimits(
            per_chat=RateLimit(count=1, per_seconds=1 + LIMIT_MARGIN),
            # paced evenly (a bucket of one): under a backlog a slot frees every 3 s, so a
            # question waits one slot, never the rest of a minute spent in a burst
            per_group=RateLimit(count=20, per_seconds=60 + LIMIT_MARGIN, burst=1),
            global_=RateLimit(count=30, per_seconds=1 + LIMIT_MARGIN),
        ),
    )
    config_model: ClassVar[type[ChannelConfig]] = TelegramConfig
    contract_version: ClassVar[str] = "1.2"

    def __init__(self, core: BridgeCore, config: TelegramConfig) -> None:
        super().__init__(core, config)
        self._app: Application[Any, Any, Any, Any, Any, Any] | None = None
        self._topics = config.topics
        self._chat_link: str | None = None
        self._notifications: int | None = None
        self._creating_topic: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()  # card state: a press and an update may race
        self._tasks: set[asyncio.Future[None]] = set()
        self._conflict_said: float | None = None  # when a 409 Conflict was last logged
        if config.chat_id > 0:  # a private chat: Telegram's 20 a minute is for groups
            limits = self.capabilities.rate_limits.model_copy(update={"per_group": None})
            self.capabilities = self.capabilities.model_copy(update={"rate_limits": limits})

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        builder = ApplicationBuilder().token(self.config.token.get_secret_value())
        if self.config.api_base_url:
            base = self.config.api_base_url.rstrip("/")
            builder = builder.base_url(base).base_file_url(base.replace("/bot", "/file/bot"))
        # python-telegram-bot handles one update at a time unless told otherwise: a press
        # must never wait behind another (the deadlock platform-facts.md describes)
        app = builder.concurrent_updates(True).build()
        app.add_handler(CallbackQueryHandler(self._on_press, block=False))
        app.add_handler(
            MessageHandler(
                tg_filters.Chat(self.config.chat_id) & tg_filters.TEXT, self._on_text, block=False
            )
        )
        app.add_error_handler(self._on_error)
        try:
            await app.initialize()  # getMe: a wrong token fails here
            chat = await app.bot.get_chat(self.config.chat_id)
        except TelegramError as exc:
            # the core tries `start` again when the platform cannot be reached (a network
            # that comes up late): this attempt's HTTP connections go first
            with contextlib.suppress(Exception):
                await app.shutdown()
            if isinstance(exc, InvalidToken):
                raise ChannelError(
                    f"Telegram refused the token of channel {self.instance_name}: check "
                    "`token` (from @BotFather) or run `aep-bridge doctor`",
                    permanent=True,
                ) from None  # its message quotes the token
            raise ChannelError(
                f"Telegram channel {self.instance_name}: cannot reach chat "
                f"{self.config.chat_id}: {exc}; is the bot a member? run `aep-bridge doctor`"
            ) from exc
        if self._topics and not chat.is_forum and not _private_topics(chat, app.bot.bot):
            log.warning(
                "telegram %s: chat %s has no topics; sessions become reply chains (turn on "
                "Topics in the group's settings, or set topics: false to silence this)",
                self.instance_name,
                self.config.chat_id,
            )
            self._topics = False
        if str(self.config.chat_id).startswith("-100"):
            self._chat_link = f"https://t.me/c/{str(self.config.chat_id)[4:]}"
        await app.bot.set_my_commands([BotCommand(c, d) for c, d in COMMANDS])
        self._app = app
        if self._topics:
            known = await self._state().get("notifications_topic")
            if known is not None:
                self._notifications = int(known)
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(
            timeout=self.config.poll_timeout,
            allowed_updates=["message", "callback_query"],
            drop_pending_updates=False,
            error_callback=self._on_polling_error,
        )
        log.info(
            "telegram %s: @%s in chat %s (%s)",
            self.instance_name,
            app.bot.username,
            self.config.chat_id,
            "a topic per session" if self._topics else "reply chains",
        )
        if self._topics and self._notifications is None:
            # last, with no await after it: the call runs once the core has this channel
            self._ask_for_notifications_topic()

    async def stop(self) -> None:
        app, self._app = self._app, None
        if app is None:
            return
        for task in list(self._tasks):
            task.cancel()
        try:
            if app.updater is not None and app.updater.running:
                await app.updater.stop()
            if app.running:
                await app.stop()
            await app.shutdown()
        except Exception as exc:  # stopping must not fail the bridge's shutdown
            log.warning("telegram %s did not stop cleanly: %s", self.instance_name, exc)

    async def doctor(self) -> list[DoctorCheck]:
        """The token, the chat, topics and the bot's rights, each with its fix."""
        base = (self.config.api_base_url or "https://api.telegram.org/bot").rstrip("/")
        checks: list[DoctorCheck] = []
        bot = Bot(self.config.token.get_secret_value(), base_url=base)
        try:
            try:
                await bot.initialize()  # getMe
                me = bot.bot
            except (InvalidToken, Forbidden):  # its message quotes the token: not shown
                checks.append(
                    DoctorCheck(
                        name="token",
                        ok=False,
                        detail="Telegram refused the token",
                        fix="copy the token again from @BotFather (/mybots → API Token)",
                    )
                )
                return checks
            except TelegramError as exc:
                checks.append(
                    DoctorCheck(
                        name="token",
                        ok=False,
                        detail=f"cannot reach {base}: {exc}",
                        fix="check the network, or api_base_url if you run your own Bot API",
                    )
                )
                return checks
            checks.append(DoctorCheck(name="token", ok=True, detail=f"the bot is @{me.username}"))
            try:
                chat = await bot.get_chat(self.config.chat_id)
            except TelegramError as exc:
                checks.append(
                    DoctorCheck(
                        name="chat",
                        ok=False,
                        detail=f"chat {self.config.chat_id}: {exc}",
                        fix=(
                            "add the bot to the group, and set chat_id to the group's id "
                            "(it starts with -100; docs/channels/telegram.md shows how to find it)"
                        ),
                    )
                )
                return checks
            title = chat.title or chat.username or str(chat.id)
            checks.append(DoctorCheck(name="chat", ok=True, detail=f"{title} ({chat.type})"))
            if not self.config.topics:
                checks.append(
                    DoctorCheck(name="topics", ok=True, detail="off: sessions are reply chains")
                )
            elif chat.is_forum or _private_topics(chat, me):
                checks.append(DoctorCheck(name="topics", ok=True, detail="the chat has topics"))
            else:
                checks.append(
                    DoctorCheck(
                        name="topics",
                        ok=False,
                        detail="the chat has no topics: sessions would fall back to reply chains",
                        fix=(
                            "in the group's settings turn on Topics (the group becomes a "
                            "supergroup with topics), or set topics: false"
                        ),
                    )
                )
            if chat.type in ("group", "supergroup"):
                member = await bot.get_chat_member(self.config.chat_id, me.id)
                admin = member.status in ("administrator", "creator")
                manage = bool(getattr(member, "can_manage_topics", False)) or (
                    member.status == "creator"
                )
                if admin and (manage or not self.config.topics):
                    checks.append(DoctorCheck(name="rights", ok=True, detail="admin"))
                else:
                    checks.append(
                        DoctorCheck(
                            name="rights",
                            ok=False,
                            detail=(
                                "the bot is not an admin"
                                if not admin
                                else "the bot may not manage topics"
                            ),
                            fix=(
                                "in the group: Administrators → Add admin → the bot, with "
                                "'Manage topics' on"
                            ),
                        )
                    )
        finally:
            with contextlib.suppress(Exception):  # it may never have started
                await bot.shutdown()
        return checks

    @property
    def bot(self) -> Any:
        if self._app is None:
            raise ChannelError(f"telegram channel {self.instance_name} is not started")
        return self._app.bot

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        """Telegram counts a supergroup as one chat, all its topics together."""
        chat = str(self.config.chat_id)
        return (chat, chat)

    # -- threads ---------------------------------------------------------------------------

    async def create_session_thread(self, session_id: str, name: str) -> str:
        name = _topic_name(name)
        if self._topics:
            topic = await self._call(self.bot.create_forum_topic(self.config.chat_id, name))
            thread = str(topic.message_thread_id)
        else:
            heading = f"🧵 {html.bold(name)}"
            root = await self._call(
                self.bot.send_message(self.config.chat_id, heading, parse_mode="HTML")
            )
            thread = str(root.message_id)
        state = self._state()
        await state.set(f"thread:{thread}", session_id)
        await self._remember_session(session_id, thread, name)
        return thread

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        thread = self._thread(session_id)
        name = _topic_name(new_name)
        if thread is None:
            return
        if self._topics:
            await self._call(
                self.bot.edit_forum_topic(self.config.chat_id, int(thread), name=name),
                unchanged_ok=True,
            )
        else:
            await self._call(
                self.bot.edit_message_text(
                    f"🧵 {html.bold(name)}",
                    chat_id=self.config.chat_id,
                    message_id=int(thread),
                    parse_mode="HTML",
                ),
                unchanged_ok=True,
            )
        await self._remember_session(session_id, thread, name)

    async def archive_session_thread(self, session_id: str) -> None:
        thread = self._thread(session_id)
        if thread is not None and self._topics:
            await self._call(
                self.bot.close_forum_topic(self.config.chat_id, int(thread)), unchanged_ok=True
            )
        await self._forget_session(session_id)

    async def delete_session_thread(self, session_id: str) -> None:
        thread = self._thread(session_id)
        if thread is not None:
            if self._topics:
                await self._call(self.bot.delete_forum_topic(self.config.chat_id, int(thread)))
            else:
                await self._call(self.bot.delete_message(self.config.chat_id, int(thread)))
        await self._forget_session(session_id)

    @classmethod
    def preview_dialect(cls) -> PreviewDialect:
        """`aep-bridge preview --channel telegram`: a forum topic as the bot shows it."""
        from .preview import TelegramDialect  # late: the preview imports this module

        return TelegramDialect()

    # -- messages --------------------------------------------------------------------------

    def measure(self, blocks: Blocks) -> int:
        """Telegram counts a message after parsing its tags, in UTF-16 units: the visible
        text of the blocks' HTML, not their markup."""
        return html.visible_length(html.blocks_html(blocks))

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        # the core's outbox splits; a direct caller may not have
        updates: list[dict[str, Any]] = []
        if content.blocks and self.measure(content.blocks) > MAX_TEXT:
            for part in markup.split(content.blocks, MAX_TEXT, self.measure):
                updates.append({"blocks": part, "text": markup.plain(part)})
        elif not content.blocks and measure(content.text, "utf16") > MAX_TEXT:
            updates = [{"text": piece} for piece in split_text(content.text, MAX_TEXT, "utf16")]
        for index, update in enumerate(updates):
            last = index == len(updates) - 1
            update.update(key=content.key if last else None, notify=content.notify and last)
            await self.send_message(session_id, content.model_copy(update=update))
        if updates:
            return
        text = _message_html(content)
        state = self._state()
        key = f"key:{session_id}:{content.key}" if content.key else None
        earlier = await state.get(key) if key else None
        if earlier is not None and not content.notify:
            edited = await self._call(
                self.bot.edit_message_text(
                    text,
                    chat_id=self.config.chat_id,
                    message_id=int(earlier),
                    parse_mode="HTML",
                    link_preview_options=LinkPreviewOptions(is_disabled=True),
                ),
                unchanged_ok=True,
                missing_ok=True,
            )
            if edited is not _MISSING:
                return
        sent = await self._send(session_id, text, notify=content.notify)
        if key is not None:
            await state.set(key, str(sent.message_id))
            if earlier is not None:  # a finished answer replaces its streamed draft
                await self._call(
                    self.bot.delete_message(self.config.chat_id, int(earlier)), missing_ok=True
                )

    async def send_notification(self, notification: NotificationMessage) -> None:
        """A heads-up in the Notifications topic (the chat itself, without topics). One about
        a question (`request_id`) links to the card and is remembered, so that the question's
        closing update (`outcome`) edits it, silently, instead of ringing again."""
        if notification.outcome is not None:
            await self._close_heads_up(notification)
            return
        state = self._state()
        key = f"headsup:{notification.request_id}" if notification.request_id else None
        if key is not None and await state.get(key) is not None:
            return  # sent before (a retry after a restart): one question rings once
        where = notification.session_name or "a session"
        url = await self._heads_up_link(notification)
        where = html.link(where, url) if url is not None else html.escape(where)
        icon = {"completed": "🏁", "error": "⚠️", "budget_warning": "💸"}.get(
            notification.type, "❓"
        )
        body = f"{where}: {html.escape(_shorten(notification.summary, MAX_HEADS_UP))}"
        topic = await self._notifications_topic()
        sent: Message = await self._call(
            self.bot.send_message(
                self.config.chat_id,
                f"{icon} {body}",
                parse_mode="HTML",
                message_thread_id=topic,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
        )
        if key is not None:
            await state.set(key, json.dumps({"message": sent.message_id, "body": body}))

    async def _heads_up_link(self, notification: NotificationMessage) -> str | None:
        """Where a heads-up leads: its card when it is about one and the card is out, else
        the session's topic; None where Telegram has no link (a private chat, a basic group).

        A message in a forum topic of a private supergroup is `t.me/c/<chat>/<topic>/<message>`
        (Telegram's message links, core.telegram.org/api/links#message-links: the `?thread=`
        form is for comment threads); without topics it is `t.me/c/<chat>/<message>`.
        """
        if self._chat_link is None:
            return None
        card = await self._card(notification.request_id or "")
        session = card.session if card is not None else notification.session_id
        thread = self._thread(session) if session else None
        if card is not None:
            if self._topics and thread is not None:
                return f"{self._chat_link}/{thread}/{card.message}"
            if not self._topics:
                return f"{self._chat_link}/{card.message}"
        if self._topics and thread is not None:
            return f"{self._chat_link}/{thread}"
        return None

    async def _close_heads_up(self, notification: NotificationMessage) -> None:
        """Edit a question's heads-up to say how it closed (an edit never rings). Without a
        heads-up sent here for it, nothing at all: an answered question must not ring."""
        if not notification.request_id or notification.outcome is None:
            return
        state = self._state()
        key = f"headsup:{notification.request_id}"
        raw = await state.get(key)
        if raw is None:
            return
        sent = json.loads(raw)
        outcome = html.escape(_shorten(notification.outcome, MAX_HEADS_UP_OUTCOME))
        await self._call(
            self.bot.edit_message_text(
                f"{_OUTCOME_ICONS.get(str(notification.outcome_status), HEADS_UP_CLOSED)} "
                f"{sent['body']} — {outcome}",
                chat_id=self.config.chat_id,
                message_id=int(sent["message"]),
                parse_mode="HTML",
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            ),
            unchanged_ok=True,
            missing_ok=True,
        )

    # -- cards -----------------------------------------------------------------------------

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        state = self._state()
        known = await self._card(request.id)
        if known is not None:  # sent before (a retry after a restart): show it, do not repeat
            return
        text = _card_html(request)
        keyboard = _keyboard(request, None)
        # quiet when a heads-up for it rings in the Notifications topic: one question, one ping
        sent = await self._send(session_id, text, notify=request.notify, keyboard=keyboard)
        card = CardRecord(session_id, sent.message_id, text, request.model_dump(mode="json"))
        await self._save_card(request.id, card)
        await state.set(f"cardmsg:{sent.message_id}", request.id)
        if card_key(request.id) != request.id:
            await state.set(f"cardkey:{card_key(request.id)}", request.id)
        if request.accepts_text or request.fields:
            await self._open_cards(session_id, add=request.id)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        async with self._lock:
            card = await self._card(request.id)
            if card is None:
                return
            icon = _OUTCOME_ICONS.get(str(outcome.status), "•")
            question = _card_html(request, closed=outcome.closed)
            summary = _shorten(outcome.summary(), CARD_TAIL - 10)
            text = f"{question}\n\n{icon} {html.escape(summary)}"
            keyboard = None if outcome.closed else _keyboard(request, None)
            await self._call(
                self.bot.edit_message_text(
                    text,
                    chat_id=self.config.chat_id,
                    message_id=card.message,
                    parse_mode="HTML",
                    reply_markup=keyboard,
                ),
                unchanged_ok=True,
                missing_ok=True,
            )
            card.html, card.closed, card.showing = text, outcome.closed, None
            if outcome.closed:
                card.forms.clear()
            await self._save_card(request.id, card)
        if outcome.closed:
            await self._open_cards(session_id, remove=request.id)

    # -- updates from Telegram -------------------------------------------------------------

    async def _on_press(self, update: Update, context: Any) -> None:
        query = update.callback_query
        if query is None:
            return
        message = query.message
        if message is None or message.chat.id != self.config.chat_id:
            await _toast(query, "")
            return
        user = _user(query.from_user)
        self._explain_shared_id(user)
        key, _, action = (query.data or "").partition(":")
        # the button names its card (a long id by its digest) and the option by position
        card_id = await self._state().get(f"cardkey:{key}") if key.startswith("#") else key
        if not card_id:
            resolution = Resolution(status=ResolutionStatus.UNKNOWN)
        elif action.isascii() and action.isdigit():  # an option: the core knows the rest
            resolution = await self.core.resolve_permission(card_id, int(action), user)
        else:  # a form's control: the person's progress is this adapter's own display
            # asked before anything changes: a stranger moves no one's progress, nor the card
            refused = await self.core.may_answer(card_id, user)
            if refused is not None:
                resolution = refused
            else:
                async with self._lock:
                    card = await self._card(card_id)
                    if card is None:
                        resolution = Resolution(status=ResolutionStatus.UNKNOWN)
                    else:
                        resolution = await self._form_press(card_id, card, action, user)
        await _toast(query, resolution.message)  # a refusal is logged by the core

    async def _on_text(self, update: Update, context: Any) -> None:
        message = update.effective_message
        if message is None or message.from_user is None or not message.text:
            return
        if message.from_user.id == self.bot.id:
            return
        user = _user(message.from_user)
        self._explain_shared_id(user)
        text = message.text.strip()
        words = text.split()
        verb = words[0][1:].split("@", 1)[0].lower() if text.startswith("/") else ""
        if verb == "sessions":
            await self._list_sessions(message)
            return
        session, thread = await self._session_of(message)
        reply_card: str | None = None
        if message.reply_to_message is not None:
            reply_card = await self._state().get(f"cardmsg:{message.reply_to_message.message_id}")
        if not verb:
            card_id = reply_card
            if card_id is None and session is not None:
                card_id = await self._only_open_card(session)
            if card_id is not None:
                resolution = await self._text_answer(card_id, text, user)
                if resolution is not None:
                    if not resolution.accepted:
                        await self._reply(message, resolution.message)
                    return
        if session is None:
            return  # the general topic, or a chat the bridge has no session in
        await self.core.handle_incoming_message(
            IncomingMessage(
                channel=self.instance_name,
                session_id=session,
                thread_id=thread,
                user=user,
                text=text,
                reply_to=reply_card,
            )
        )

    def _on_polling_error(self, exc: TelegramError) -> None:
        """getUpdates failed (PTB tries again, backing off up to 30 s). A 409 Conflict means
        another program polls this bot: said in one line, again only if it lasts
        `CONFLICT_REPEAT` seconds, not as a traceback at every retry."""
        if not isinstance(exc, Conflict):
            _POLLING_LOG.exception("Exception happened while polling for updates.", exc_info=exc)
            return
        now = time.monotonic()
        if self._conflict_said is not None and now - self._conflict_said < CONFLICT_REPEAT:
            log.debug("telegram %s: getUpdates: 409 Conflict again", self.instance_name)
            return
        self._conflict_said = now
        log.error(
            "telegram %s: another program is polling this bot (Telegram said 409 Conflict): "
            "stop it, or give this bridge its own bot",
            self.instance_name,
        )

    def _explain_shared_id(self, user: ChannelUser) -> None:
        """Say why a press from one of Telegram's shared ids is refused: the core refuses it
        like any non-approver's, and the log line alone would not tell the admin why."""
        why = shared_id_reason(user.id)
        if why is not None:
            log.warning(
                "telegram %s: %s answered as %s (%s): Telegram does not say who that is, so "
                "it can never be an approver; turn off Remain anonymous to answer",
                self.instance_name,
                user.display,
                user.id,
                why,
            )

    async def _on_error(self, update: object, context: Any) -> None:
        log.error("telegram %s: an update failed: %s", self.instance_name, context.error)

    async def _text_answer(self, card_id: str, text: str, user: ChannelUser) -> Resolution | None:
        """Words for card `card_id`: a text answer, the value of a form's field, or (None) not
        an answer at all, for a card that takes no words."""
        card = await self._card(card_id)
        if card is not None and not card.closed and card.permission.fields:
            # a step of a form: asked before anything changes, as for a press
            refused = await self.core.may_answer(card_id, user)
            if refused is not None:
                return refused
        async with self._lock:
            card = await self._card(card_id)
            if card is None or card.closed:  # the core decides (answered, expired, unknown)
                return await self.core.answer_text(card_id, text, user)
            request = card.permission
            progress = card.forms.get(user.id)
            if request.fields and progress is not None:
                return await self._form_value(card_id, card, user, text)
            if request.fields:
                return await self._form_press(card_id, card, "f", user)
            if not request.accepts_text:
                return None
            return await self.core.answer_text(card_id, text, user)

    # -- forms: one field at a time --------------------------------------------------------

    async def _form_press(
        self, card_id: str, card: CardRecord, action: str, user: ChannelUser
    ) -> Resolution:
        """`f` starts (or shows the person's step again); the rest name the field they belong
        to, by position: `={i}.{c}` picks choice c of field i (`={i}.y`/`={i}.n` for yes/no),
        `+{i}.{c}` toggles choice c of a multi-select and `!{i}` is done with it, `-{i}` skips
        an optional field. An action fills the person's current field only if it names it:
        a button from someone else's step on the shared card, or a stale one, changes no
        value and shows the person's own step."""
        request = card.permission
        if card.closed:  # the core says why not (answered, expired)
            return await self.core.answer_form(card_id, {}, user)
        if not request.fields:  # a form's control on a card that is no form
            return Resolution(status=ResolutionStatus.REJECTED, reason="use the buttons")
        progress = card.forms.setdefault(user.id, {"field": 0, "values": {}})
        index = int(progress["field"])
        current = request.fields[index] if index < len(request.fields) else None
        if action == "f" or current is None:
            return await self._form_step(card_id, card, user)
        op = action[:1]
        named, _, picked = action[1:].partition(".")
        if named != str(index):
            shown = await self._form_step(card_id, card, user)
            if not shown.accepted:
                return shown
            return Resolution(status=ResolutionStatus.REJECTED, reason=_OTHER_STEP)
        choices = current.choices
        if op == "=" and current.type == "boolean" and picked in ("y", "n"):
            progress["values"][current.id] = picked == "y"
            progress["field"] = index + 1
        elif op == "=" and picked.isdigit() and int(picked) < len(choices):
            progress["values"][current.id] = choices[int(picked)].id
            progress["field"] = index + 1
        elif op == "+" and picked.isdigit() and int(picked) < len(choices):
            chosen = progress["values"].setdefault(current.id, [])
            choice = choices[int(picked)].id
            chosen.remove(choice) if choice in chosen else chosen.append(choice)
        elif op == "!" or (op == "-" and not current.required):
            progress["field"] = index + 1
        return await self._form_step(card_id, card, user)

    async def _form_value(
        self, card_id: str, card: CardRecord, user: ChannelUser, text: str
    ) -> Resolution:
        request = card.permission
        progress = card.forms[user.id]
        index = int(progress["field"])
        if index >= len(request.fields):
            return await self._form_step(card_id, card, user)
        if card.showing != index:  # the words were written to another field on show
            shown = await self._form_step(card_id, card, user)
            if not shown.accepted:
                return shown
            return Resolution(status=ResolutionStatus.REJECTED, reason=_OTHER_STEP)
        current = request.fields[index]
        if current.type == "number":
            try:
                progress["values"][current.id] = float(text)
            except ValueError:
                return Resolution(status=ResolutionStatus.REJECTED, reason="a number, please")
        elif current.type == "string" or (current.type == "select" and current.other):
            progress["values"][current.id] = text
        else:
            return Resolution(status=ResolutionStatus.REJECTED, reason="use the buttons")
        progress["field"] = index + 1
        return await self._form_step(card_id, card, user)

    async def _form_step(self, card_id: str, card: CardRecord, user: ChannelUser) -> Resolution:
        """Show the next field on the card, or hand the finished form to the core."""
        request = card.permission
        progress = card.forms[user.id]
        index = int(progress["field"])
        if index >= len(request.fields):
            del card.forms[user.id]
            await self._save_card(card_id, card)
            return await self.core.answer_form(card_id, progress["values"], user)
        card.showing = index
        await self._save_card(card_id, card)
        current = request.fields[index]
        label = _shorten(current.label, CARD_TAIL - 80)  # with the hint, within the tail
        text = f"{card.html}\n\n✏️ {html.bold(f'{index + 1}/{len(request.fields)}: {label}')}"
        if current.type in ("string", "number") or (current.type == "select" and current.other):
            text += "\n" + html.italic("reply to this message with the value")
        keyboard = _keyboard(request, (index, progress["values"]))
        self._spawn(self._limited("edit_card", card.message, text, keyboard))
        return Resolution(status=ResolutionStatus.ACCEPTED)

    # -- helpers ---------------------------------------------------------------------------

    async def _send(
        self,
        session_id: str,
        text: str,
        *,
        notify: bool,
        keyboard: InlineKeyboardMarkup | None = None,
    ) -> Message:
        thread = self._thread(session_id)
        kwargs: dict[str, Any] = {
            "parse_mode": "HTML",
            "disable_notification": not notify,
            "reply_markup": keyboard,
            "link_preview_options": LinkPreviewOptions(is_disabled=True),
        }
        if thread is not None and self._topics:
            kwargs["message_thread_id"] = int(thread)
        elif thread is not None:
            kwargs["reply_parameters"] = ReplyParameters(
                int(thread), allow_sending_without_reply=True
            )
        message: Message = await self._call(
            self.bot.send_message(self.config.chat_id, text, **kwargs)
        )
        return message

    async def _call(
        self, call: Awaitable[T], *, unchanged_ok: bool = False, missing_ok: bool = False
    ) -> T | Any:
        """One Bot API call, its failures as the core's outbox understands them."""
        try:
            return await call
        except RetryAfter as exc:
            raise RateLimited(_seconds(exc.retry_after), str(exc)) from exc
        except BadRequest as exc:
            text = exc.message.lower()
            if unchanged_ok and "not modified" in text:
                return None
            if missing_ok and ("not found" in text or "message can't be" in text):
                return _MISSING
            raise ChannelError(
                f"Telegram refused the call: {exc.message}",
                permanent=True,
            ) from exc
        except InvalidToken:  # its message quotes the token
            raise ChannelError("Telegram refused the bot's token", permanent=True) from None
        except Forbidden as exc:
            raise ChannelError(f"Telegram refused the bot: {exc}", permanent=True) from exc
        except TelegramError as exc:  # network errors, timeouts, 5xx: the outbox retries
            raise ChannelError(f"Telegram call failed: {exc}") from exc

    def _state(self) -> Any:
        return self.core.state(self.instance_name)

    def _thread(self, session_id: str) -> str | None:
        return self.core.thread_id(self.instance_name, session_id)

    async def _card(self, card_id: str) -> CardRecord | None:
        if not card_id:
            return None
        raw = await self._state().get(f"card:{card_id}")
        return None if raw is None else CardRecord(**json.loads(raw))

    async def _save_card(self, card_id: str, card: CardRecord) -> None:
        await self._state().set(f"card:{card_id}", json.dumps(asdict(card)))

    async def _open_cards(
        self, session_id: str, *, add: str | None = None, remove: str | None = None
    ) -> list[str]:
        state = self._state()
        cards: list[str] = json.loads(await state.get(f"open:{session_id}") or "[]")
        if add is not None and add not in cards:
            cards.append(add)
        if remove is not None and remove in cards:
            cards.remove(remove)
        if add is not None or remove is not None:
            await state.set(f"open:{session_id}", json.dumps(cards))
        return cards

    async def _only_open_card(self, session_id: str) -> str | None:
        cards = await self._open_cards(session_id)
        return cards[0] if len(cards) == 1 else None

    async def _session_of(self, message: Message) -> tuple[str | None, str | None]:
        state = self._state()
        if self._topics:
            if not message.is_topic_message or message.message_thread_id is None:
                return None, None
            thread = str(message.message_thread_id)
            return await state.get(f"thread:{thread}"), thread
        replied = message.reply_to_message
        if replied is None:
            return None, None
        session = await state.get(f"thread:{replied.message_id}")
        if session is not None:
            return session, str(replied.message_id)
        card = await self._card(await state.get(f"cardmsg:{replied.message_id}") or "")
        if card is not None:
            return card.session, self._thread(card.session)
        return None, None

    async def _remember_session(self, session_id: str, thread: str, name: str) -> None:
        state = self._state()
        live: dict[str, list[str]] = json.loads(await state.get("sessions") or "{}")
        live[session_id] = [thread, name]
        await state.set("sessions", json.dumps(live))

    async def _forget_session(self, session_id: str) -> None:
        state = self._state()
        live: dict[str, list[str]] = json.loads(await state.get("sessions") or "{}")
        if live.pop(session_id, None) is not None:
            await state.set("sessions", json.dumps(live))

    async def _list_sessions(self, message: Message) -> None:
        live: dict[str, list[str]] = json.loads(await self._state().get("sessions") or "{}")
        if not live:
            await self._reply(message, "No agent session is running.")
            return
        lines = []
        for thread, name in live.values():
            if self._topics and self._chat_link:
                lines.append("• " + html.link(name, f"{self._chat_link}/{thread}"))
            else:
                lines.append("• " + html.escape(name))
        await self._reply(message, "Sessions:\n" + "\n".join(lines), markup=True)

    async def _reply(self, message: Message, text: str, *, markup: bool = False) -> None:
        """A short answer to a person's message (/sessions, or why their words were not
        taken), through the core's outbox like every other call."""
        body = text if markup else html.escape(text)
        thread = message.message_thread_id if message.is_topic_message else None
        self._spawn(self._limited("reply_to", message.message_id, thread, body))

    async def _limited(self, op: str, *args: Any) -> None:
        """Call this adapter's `op` through the outbox (the platform's limits kept); the
        handler that asked does not wait for it."""
        try:
            await self.core.call(self.instance_name, op, *args)
        except ChannelError as exc:
            log.warning("telegram %s: %s failed: %s", self.instance_name, op, exc)

    # -- calls the outbox runs for the adapter's own needs (`core.call`) -----------------

    async def edit_card(
        self, message_id: int, text: str, keyboard: InlineKeyboardMarkup | None
    ) -> None:
        """Show a card's new text and buttons (a form's next field)."""
        await self._call(
            self.bot.edit_message_text(
                text,
                chat_id=self.config.chat_id,
                message_id=message_id,
                parse_mode="HTML",
                reply_markup=keyboard,
            ),
            unchanged_ok=True,
        )

    async def reply_to(self, message_id: int, thread: int | None, text: str) -> None:
        """Answer a person's message in place."""
        await self._call(
            self.bot.send_message(
                self.config.chat_id,
                text,
                parse_mode="HTML",
                message_thread_id=thread,
                reply_parameters=ReplyParameters(message_id, allow_sending_without_reply=True),
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
        )

    def _spawn(self, coroutine: Awaitable[None]) -> asyncio.Future[None]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _notifications_topic(self) -> int | None:
        """The topic heads-ups go to (None: the chat itself, when there are no topics).

        `start` asks the outbox to create it (a call that counts against the group's limits
        like any other, retried by the outbox). A heads-up before it exists asks again if
        that gave up, and fails for now: the outbox sends it again later.
        """
        if not self._topics:
            return None
        if self._notifications is None:
            self._ask_for_notifications_topic()
            raise ChannelError("the Notifications topic is being created")
        return self._notifications

    def _ask_for_notifications_topic(self) -> None:
        if self._creating_topic is None or self._creating_topic.done():
            self._creating_topic = self._spawn(self._create_notifications_topic())

    async def _create_notifications_topic(self) -> None:
        try:
            known = await self.core.call(self.instance_name, "create_topic", "notifications")
        except ChannelError as exc:  # the outbox gave up: the next heads-up asks again
            log.warning("telegram %s: no Notifications topic: %s", self.instance_name, exc)
            return
        self._notifications = int(known)

    async def create_topic(self, purpose: str) -> str:
        """Create the topic for `purpose` ("notifications") and remember it; run by the outbox
        (`core.call`)."""
        state = self._state()
        known = await state.get(f"{purpose}_topic")
        if known is None:
            topic = await self._call(
                self.bot.create_forum_topic(self.config.chat_id, self.config.notifications_topic)
            )
            known = str(topic.message_thread_id)
            await state.set(f"{purpose}_topic", known)
        return str(known)


_MISSING: Final = object()
#: why a form's button or words from another person's step filled nothing
_OTHER_STEP: Final = "that was another step of the form; the card shows yours now"


async def _toast(query: CallbackQuery, text: str) -> None:
    """Answer a press at once: until it is answered, the person's client shows a spinner."""
    try:
        await query.answer(text=text[:MAX_TOAST] or None)
    except TelegramError as exc:
        log.warning("telegram: could not answer a button press: %s", exc)


def _user(user: Any) -> ChannelUser:
    name = " ".join(x for x in (user.first_name, user.last_name) if x) or None
    if user.username:
        name = f"{name} (@{user.username})" if name else f"@{user.username}"
    return ChannelUser(id=str(user.id), name=name)


def _private_topics(chat: Any, me: Any) -> bool:
    return bool(chat.type == "private" and getattr(me, "has_topics_enabled", False))


def _seconds(value: Any) -> float:
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(value)
