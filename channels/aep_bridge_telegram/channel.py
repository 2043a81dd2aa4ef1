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

This module is the adapter itself; its parts are modules of their own: `cards` (button data
and the card records), `forms` (a form one field at a time), `look` and `format` (the HTML it
sends), `errors` (the Bot API's failures as the core's), `doctor` (`aep-bridge doctor`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, ClassVar, Final

from telegram import (
    BotCommand,
    CallbackQuery,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    Message,
    ReplyParameters,
    Update,
)
from telegram.error import TelegramError
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
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Posted,
    PreviewDialect,
    RateLimit,
    RateLimits,
    Resolution,
    ResolutionStatus,
    SessionThreads,
    Tasks,
    command_menu,
)

from . import html
from .cards import CardRecord, cards, parse_button
from .config import TelegramConfig, shared_id_reason
from .direct import Refusals, refused, user_chat
from .doctor import diagnose, private_topics
from .errors import MISSING, PollingErrors, bot_call, start_failed
from .format import (
    MAX_TEXT,
    MAX_TOAST,
    card_with_outcome,
    channel_user,
    closed_heads_up,
    heads_up,
    session_list,
    split_to_fit,
    thread_heading,
    visible_length,
)
from .forms import STEP_SHOWN, Forms
from .look import (
    TELEGRAM_LIMIT,
    _card_html,
    _keyboard,
    _message_html,
    _topic_name,
    _with_context,
    card_size,
)

log = logging.getLogger(__name__)

#: seconds added to each rate-limit window (see `capabilities`)
LIMIT_MARGIN: Final = 0.05
#: the bot's command menu: /sessions here, the rest go to the core as a session's command
COMMANDS: Final = command_menu("topic")


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
        # a card shows the messages its session queued just before it, above its title
        card_context=True,
        # a question's heads-up is edited when the question closes (edits never ring)
        updates_heads_ups=True,
        # a heads-up with recipients goes to each in their private chat with the bot
        direct_messages=True,
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
        self._tasks = Tasks()  # replies and form steps via the outbox, the topic being made
        self._polling_errors = PollingErrors(self.instance_name)
        self._refusals = Refusals(self.instance_name)
        self._cards = cards(self.channel_state)
        self._sessions = SessionThreads(self.channel_state)
        self._forms = Forms(self._cards, self._answer_form, self._show_card)
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
            start_failed(exc, self.instance_name, self.config.chat_id)
        if self._topics and not chat.is_forum and not private_topics(chat, app.bot.bot):
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
            known = await self.channel_state().get("notifications_topic")
            if known is not None:
                self._notifications = int(known)
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(
            timeout=self.config.poll_timeout,
            allowed_updates=["message", "callback_query"],
            drop_pending_updates=False,
            error_callback=self._polling_errors,
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
        await self._tasks.stop()
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
        return await diagnose(self.config)

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
            topic = await bot_call(self.bot.create_forum_topic(self.config.chat_id, name))
            thread = str(topic.message_thread_id)
        else:
            heading = thread_heading(name)
            root = await bot_call(
                self.bot.send_message(self.config.chat_id, heading, parse_mode="HTML")
            )
            thread = str(root.message_id)
        await self._sessions.made(session_id, thread, name)
        return thread

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        thread = self.thread_of(session_id)
        name = _topic_name(new_name)
        if thread is None:
            return
        if self._topics:
            await bot_call(
                self.bot.edit_forum_topic(self.config.chat_id, int(thread), name=name),
                unchanged_ok=True,
            )
        else:
            await bot_call(
                self.bot.edit_message_text(
                    thread_heading(name),
                    chat_id=self.config.chat_id,
                    message_id=int(thread),
                    parse_mode="HTML",
                ),
                unchanged_ok=True,
            )
        await self._sessions.remember(session_id, thread, name)

    async def archive_session_thread(self, session_id: str) -> None:
        thread = self.thread_of(session_id)
        if thread is not None and self._topics:
            await bot_call(
                self.bot.close_forum_topic(self.config.chat_id, int(thread)), unchanged_ok=True
            )
        await self._sessions.forget(session_id)

    async def delete_session_thread(self, session_id: str) -> None:
        thread = self.thread_of(session_id)
        if thread is not None:
            if self._topics:
                await bot_call(self.bot.delete_forum_topic(self.config.chat_id, int(thread)))
            else:
                await bot_call(self.bot.delete_message(self.config.chat_id, int(thread)))
        await self._sessions.forget(session_id)

    @classmethod
    def preview_dialect(cls) -> PreviewDialect:
        """`aep-bridge preview --channel telegram`: a forum topic as the bot shows it."""
        from .preview import TelegramDialect  # late: only `aep-bridge preview` needs it

        return TelegramDialect()

    # -- messages --------------------------------------------------------------------------

    def measure(self, blocks: Blocks) -> int:
        """Telegram counts a message after parsing its tags, in UTF-16 units: the visible
        text of the blocks' HTML, not their markup."""
        return visible_length(blocks)

    def measure_card(self, request: PermissionRequest) -> int:
        """Exact for this channel's drawing (`look.card_size`, the rule the card's context
        is cut by): the most any version of the card takes under Telegram's own limit,
        on the scale of `max_message_length`, so the core folds only what the card shows."""
        return card_size(request) - TELEGRAM_LIMIT + self.capabilities.max_message_length

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        # the core's outbox splits; a direct caller may not have
        parts = split_to_fit(content, self.measure)
        for part in parts:
            await self.send_message(session_id, part)
        if parts:
            return
        text = _message_html(content)
        state = self.channel_state()
        key = f"key:{session_id}:{content.key}" if content.key else None
        earlier = await state.get(key) if key else None
        if earlier is not None and not content.notify:
            edited = await bot_call(
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
            if edited is not MISSING:
                return
        sent = await self._send(session_id, text, notify=content.notify)
        if key is not None:
            await state.set(key, str(sent.message_id))
            if earlier is not None:  # a finished answer replaces its streamed draft
                await bot_call(
                    self.bot.delete_message(self.config.chat_id, int(earlier)), missing_ok=True
                )

    async def send_notification(self, notification: NotificationMessage) -> None:
        """A heads-up in the Notifications topic (the chat itself, without topics), or, to
        each of its `recipients`, in their private chat with the bot. One about a question
        (`request_id`) links to the card and is remembered, so that the question's closing
        update (`outcome`) edits it, silently, instead of ringing again.

        A recipient Telegram refuses (they never sent the bot /start, or blocked it) is
        warned about once and gets the heads-up in the Notifications topic instead: nothing
        is retried for them, and nothing waits. The outbox counts this call against the
        chat's limits, which paces the direct messages more tightly than Telegram asks (one a
        second to each person, 30 a second in all).
        """
        if notification.outcome is not None:
            await self._close_heads_up(notification)
            return
        state = self.channel_state()
        key = f"headsup:{notification.request_id}" if notification.request_id else None
        record: dict[str, Any] = {}
        if key is not None:
            raw = await state.get(key)
            record = json.loads(raw) if raw is not None else {}
            if record and record.get("done", True):
                return  # sent before (a retry after a restart): one question rings once
        url = await self._heads_up_link(notification)
        body, text = heads_up(notification, url)
        sent: list[list[int]] = record.get("sent", [])
        record.update(body=body, sent=sent, done=False)
        fallback = not notification.recipients
        for recipient in dict.fromkeys(notification.recipients):
            chat = user_chat(recipient)
            if chat == self.config.chat_id:
                fallback = True  # the bot's chat is this person's own: no second copy
                continue
            if chat is not None and any(where == chat for where, _ in sent):
                continue  # reached before this retry
            message = await self._direct(recipient, chat, text)
            if message is None:
                fallback = True
                continue
            sent.append([message.chat_id, message.message_id])
            if key is not None:  # a retry after a failure below must not ring them twice
                await state.set(key, json.dumps(record))
        if fallback:
            topic = await self._notifications_topic()
            posted: Message = await bot_call(
                self.bot.send_message(
                    self.config.chat_id,
                    text,
                    parse_mode="HTML",
                    message_thread_id=topic,
                    link_preview_options=LinkPreviewOptions(is_disabled=True),
                )
            )
            sent.append([self.config.chat_id, posted.message_id])
        if key is not None:
            record["done"] = True
            await state.set(key, json.dumps(record))

    async def _direct(self, recipient: str, chat: int | None, text: str) -> Message | None:
        """A heads-up in `recipient`'s private chat with the bot; None when Telegram will not
        take it (said once, see `Refusals`). A rate limit or a network failure raises as
        any call does: the outbox waits and tries again."""
        if chat is None:
            self._refusals.refused(recipient, "it is not a Telegram user id, a number")
            return None
        shared = shared_id_reason(recipient)
        if shared is not None:  # no one person reads it
            self._refusals.refused(recipient, f"it is {shared}")
            return None
        try:
            message: Message = await bot_call(
                self.bot.send_message(
                    chat,
                    text,
                    parse_mode="HTML",
                    link_preview_options=LinkPreviewOptions(is_disabled=True),
                )
            )
        except ChannelError as exc:
            cause = exc.__cause__
            if not isinstance(cause, TelegramError) or not refused(cause):
                raise
            self._refusals.refused(recipient, f"Telegram said: {cause.message}")
            return None
        self._refusals.delivered(recipient)
        return message

    async def _heads_up_link(self, notification: NotificationMessage) -> str | None:
        """Where a heads-up leads: its card when it is about one and the card is out, else
        the session's topic; None where Telegram has no link (a private chat, a basic group).

        A message in a forum topic of a private supergroup is `t.me/c/<chat>/<topic>/<message>`
        (Telegram's message links, core.telegram.org/api/links#message-links: the `?thread=`
        form is for comment threads); without topics it is `t.me/c/<chat>/<message>`.
        """
        if self._chat_link is None:
            return None
        card = await self._cards.get(notification.request_id or "")
        session = card.session if card is not None else notification.session_id
        thread = self.thread_of(session) if session else None
        if card is not None and (link := self._card_link(card)) is not None:
            return link
        if self._topics and thread is not None:
            return f"{self._chat_link}/{thread}"
        return None

    async def _close_heads_up(self, notification: NotificationMessage) -> None:
        """Edit a question's heads-up to say how it closed (an edit never rings). Without a
        heads-up sent here for it, nothing at all: an answered question must not ring."""
        if not notification.request_id or notification.outcome is None:
            return
        state = self.channel_state()
        key = f"headsup:{notification.request_id}"
        raw = await state.get(key)
        if raw is None:
            return
        record = json.loads(raw)
        text = closed_heads_up(record["body"], notification.outcome, notification.outcome_status)
        # a record from before direct messages names one message, in the bot's chat
        places = record.get("sent") or [[self.config.chat_id, record["message"]]]
        for chat, message in places:
            try:
                await bot_call(
                    self.bot.edit_message_text(
                        text,
                        chat_id=int(chat),
                        message_id=int(message),
                        parse_mode="HTML",
                        link_preview_options=LinkPreviewOptions(is_disabled=True),
                    ),
                    unchanged_ok=True,
                    missing_ok=True,
                )
            except ChannelError as exc:
                if exc.permanent and int(chat) != self.config.chat_id:
                    # a person who blocked the bot since keeps the heads-up as it was
                    log.debug("telegram %s: heads-up not edited: %s", self.instance_name, exc)
                    continue
                raise

    # -- cards -----------------------------------------------------------------------------

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> Posted:
        known = await self._cards.get(request.id)
        if known is not None:  # sent before (a retry after a restart): show it, do not repeat
            return self._where(known)
        text = _with_context(request, _card_html(request))  # what led to it, then the card
        keyboard = _keyboard(request, None)
        # quiet when a heads-up for it rings in the Notifications topic: one question, one ping
        sent = await self._send(session_id, text, notify=request.notify, keyboard=keyboard)
        card = CardRecord(session_id, sent.message_id, text, request.model_dump(mode="json"))
        await self._cards.sent(request.id, card, message=card.message)
        if request.accepts_text or request.fields:
            await self._cards.open_cards(session_id, add=request.id)
        return self._where(card)

    def _where(self, card: CardRecord) -> Posted:
        """Where a card is, for the audit trail: its chat and message, and the message's
        link in a supergroup (none in a basic group or a DM)."""
        link = self._card_link(card)
        return Posted(chat=str(self.config.chat_id), message=str(card.message), link=link)

    def _card_link(self, card: CardRecord) -> str | None:
        """A card's message link (`_heads_up_link` says the forms), None where there is none."""
        if self._chat_link is None:
            return None
        thread = self.thread_of(card.session)
        if self._topics and thread is not None:
            return f"{self._chat_link}/{thread}/{card.message}"
        if not self._topics:
            return f"{self._chat_link}/{card.message}"
        return None

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        async def edit(card: CardRecord) -> None:
            shown = request
            if not shown.context:  # the card keeps what it showed above it
                shown = request.model_copy(update={"context": card.permission.context})
            text = card_with_outcome(shown, outcome)
            keyboard = None if outcome.closed else _keyboard(shown, None)
            await bot_call(
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
            card.request = shown.model_dump(mode="json")  # its latest context, for a redraw
            if outcome.closed:
                card.forms.clear()
            await self._cards.save(request.id, card)

        await self._cards.update(
            session_id, request.id, closed=outcome.closed, lock=self._lock, edit=edit
        )

    # -- updates from Telegram -------------------------------------------------------------

    async def _on_press(self, update: Update, context: Any) -> None:
        query = update.callback_query
        if query is None:
            return
        message = query.message
        if message is None or message.chat.id != self.config.chat_id:
            await _toast(query, "")
            return
        user = channel_user(query.from_user)
        self._explain_shared_id(user)
        key, action = parse_button(query.data)
        # the button names its card (a long id by its digest) and the option by position
        card_id = await self._cards.of_key(key)
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
                    card = await self._cards.get(card_id)
                    if card is None:
                        resolution = Resolution(status=ResolutionStatus.UNKNOWN)
                    else:
                        resolution = await self._forms.press(card_id, card, action, user)
        # a refusal is logged by the core; a form's next field on show sent nothing yet
        await _toast(query, "" if resolution == STEP_SHOWN else resolution.message)

    async def _on_text(self, update: Update, context: Any) -> None:
        message = update.effective_message
        if message is None or message.from_user is None or not message.text:
            return
        if message.from_user.id == self.bot.id:
            return
        user = channel_user(message.from_user)
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
            reply_card = await self._cards.of_message(message.reply_to_message.message_id)
        if not verb:
            card_id = reply_card
            if card_id is None and session is not None:
                card_id = await self._cards.only_open_card(session)
            if card_id is not None:
                resolution = await self._text_answer(card_id, text, user)
                if resolution is not None:
                    if not resolution.accepted:
                        await self._reply(message, resolution.message)
                    return
        if session is None:
            return  # the general topic, or a chat the bridge has no session in
        await self.pass_on(session, thread, user, text, reply_to=reply_card)

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
        card = await self._cards.get(card_id)
        if card is not None and not card.closed and card.permission.fields:
            # a step of a form: asked before anything changes, as for a press
            refused = await self.core.may_answer(card_id, user)
            if refused is not None:
                return refused
        async with self._lock:
            card = await self._cards.get(card_id)
            if card is None or card.closed:  # the core decides (answered, expired, unknown)
                return await self.core.answer_text(card_id, text, user)
            request = card.permission
            progress = card.forms.get(user.id)
            if request.fields and progress is not None:
                return await self._forms.value(card_id, card, user, text)
            if request.fields:
                return await self._forms.press(card_id, card, "f", user)
            if not request.accepts_text:
                return None
            return await self.core.answer_text(card_id, text, user)

    # -- helpers ---------------------------------------------------------------------------

    async def _send(
        self,
        session_id: str,
        text: str,
        *,
        notify: bool,
        keyboard: InlineKeyboardMarkup | None = None,
    ) -> Message:
        thread = self.thread_of(session_id)
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
        message: Message = await bot_call(
            self.bot.send_message(self.config.chat_id, text, **kwargs)
        )
        return message

    async def _session_of(self, message: Message) -> tuple[str | None, str | None]:
        if self._topics:
            if not message.is_topic_message or message.message_thread_id is None:
                return None, None
            thread = str(message.message_thread_id)
            return await self._sessions.session_of(thread), thread
        replied = message.reply_to_message
        if replied is None:
            return None, None
        session = await self._sessions.session_of(replied.message_id)
        if session is not None:
            return session, str(replied.message_id)
        card = await self._cards.get(await self._cards.of_message(replied.message_id) or "")
        if card is not None:
            return card.session, self.thread_of(card.session)
        return None, None

    async def _list_sessions(self, message: Message) -> None:
        live = await self._sessions.live()
        if not live:
            await self._reply(message, "No agent session is running.")
            return
        link = self._chat_link if self._topics else None
        await self._reply(message, session_list(live.values(), link), markup=True)

    async def _reply(self, message: Message, text: str, *, markup: bool = False) -> None:
        """A short answer to a person's message (/sessions, or why their words were not
        taken), through the core's outbox like every other call."""
        body = text if markup else html.escape(text)
        thread = message.message_thread_id if message.is_topic_message else None
        self._tasks.spawn(self._limited("reply_to", message.message_id, thread, body))

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
        await bot_call(
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
        await bot_call(
            self.bot.send_message(
                self.config.chat_id,
                text,
                parse_mode="HTML",
                message_thread_id=thread,
                reply_parameters=ReplyParameters(message_id, allow_sending_without_reply=True),
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
        )

    async def _answer_form(
        self, card_id: str, values: dict[str, Any], user: ChannelUser
    ) -> Resolution:
        """A finished form, for the core to decide (`Forms`)."""
        return await self.core.answer_form(card_id, values, user)

    def _show_card(self, message_id: int, text: str, keyboard: InlineKeyboardMarkup | None) -> None:
        """Show a form's next field on its card (`Forms`), through the outbox."""
        self._tasks.spawn(self._limited("edit_card", message_id, text, keyboard))

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
            self._creating_topic = self._tasks.spawn(self._create_notifications_topic())

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
        state = self.channel_state()
        known = await state.get(f"{purpose}_topic")
        if known is None:
            topic = await bot_call(
                self.bot.create_forum_topic(self.config.chat_id, self.config.notifications_topic)
            )
            known = str(topic.message_thread_id)
            await state.set(f"{purpose}_topic", known)
        return str(known)


async def _toast(query: CallbackQuery, text: str) -> None:
    """Answer a press at once: until it is answered, the person's client shows a spinner."""
    try:
        await query.answer(text=text[:MAX_TOAST] or None)
    except TelegramError as exc:
        log.warning("telegram: could not answer a button press: %s", exc)
