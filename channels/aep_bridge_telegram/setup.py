"""`aep-bridge setup telegram`: from a @BotFather token to a checked channel block.

The wizard checks the token (getMe), waits for a message in the group the person added the
bot to (getUpdates) to learn the group's id and the person's user id, checks that the group
has topics and that the bot may manage them (saying what to change in Telegram if not),
offers the person as the first approver, writes the block with the token as
`${TELEGRAM_BOT_TOKEN}` (never its value), and runs the channel's doctor. Every question has
a flag, for scripts: `--token-env`, `--chat-id`, `--approver`, `--no-topics`, `--yes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any, ClassVar

from telegram import Bot, Chat, ChatFullInfo, User
from telegram.error import ChatMigrated, Conflict, Forbidden, InvalidToken, TelegramError

from aep_bridge import (
    SetupContext,
    SetupError,
    SetupOption,
    SetupWizard,
    ask_token,
    check_token,
    check_with_doctor,
    clean_error,
    human_duration,
    keep_tokens,
    token_env_option,
    wait_option,
    write_channel_block,
)

from .config import shared_id_reason

#: the variable the token is read from at run time, unless `--token-env` names another
TOKEN_ENV = "TELEGRAM_BOT_TOKEN"
DEFAULT_API = "https://api.telegram.org/bot"
DEFAULT_WAIT = 300.0
#: a bot token: the bot's id, a colon, then letters, digits, `_` and `-`
_TOKEN = re.compile(r"\d+:[A-Za-z0-9_-]+")
#: seconds of one getUpdates long poll while waiting for the message
_POLL = 30

_TOPICS_FIX = "in the group's settings (tap its name → ✏️ Edit) turn on Topics"
_NO_MESSAGE = (
    "the group's id and your user id come from a message in the group; or pass "
    "--chat-id ID (and --approver ID) to give them yourself"
)


class TelegramSetup(SetupWizard):
    """A bot token, a forum group and its first approver, checked against Telegram."""

    name = "telegram"
    description = "a bot from @BotFather in a group with topics (checks it, writes the block)"
    #: what the wizard decides; over an existing block (--force) its other keys are kept
    block_keys: ClassVar = frozenset({"token", "chat_id", "approvers", "topics", "api_base_url"})
    options: ClassVar = (
        token_env_option(TOKEN_ENV),
        SetupOption(
            "--chat-id",
            "the group's id (-100...), or your user id for a private chat, instead of waiting "
            "for a message in the group",
            metavar="ID",
            kind=int,
        ),
        SetupOption(
            "--approver",
            "a numeric Telegram user id allowed to answer, instead of asking",
            metavar="ID",
            kind=int,
            repeat=True,
        ),
        SetupOption(
            "--no-topics",
            "sessions as reply chains in the chat: no topics, no admin rights needed",
            kind=bool,
        ),
        SetupOption(
            "--wait",
            f"seconds to wait for the message in the group (default {DEFAULT_WAIT:.0f})",
            metavar="SECONDS",
            kind=float,
            default=DEFAULT_WAIT,
        ),
        SetupOption(
            "--api-base-url",
            "a self-hosted Bot API server, such as http://127.0.0.1:8081/bot "
            "(written into the block as api_base_url)",
            metavar="URL",
        ),
    )

    async def run(self, setup: SetupContext) -> bool:
        options = setup.options
        if options["api_base_url"] and not re.match(r"https?://[^/]", options["api_base_url"]):
            raise SetupError("--api-base-url takes an http:// or https:// URL ending in /bot")
        base = (options["api_base_url"] or DEFAULT_API).rstrip("/")
        token = ask_token(
            setup,
            flag="--token-env",
            variable=TOKEN_ENV,
            prompt="Bot token from @BotFather",
            example="the token from @BotFather",
        )
        (bot, me), token = await check_token(
            setup,
            token,
            lambda value: _get_me(base, value),
            again="Bot token from @BotFather, again",
        )
        setup.say(f"ok    the token is @{me.username}'s.")
        try:
            chat_id, sender = await self._find_chat(setup, bot, me)
            chat_id, chat, topics = await self._check_chat(setup, bot, me, chat_id, token.value)
        finally:
            await _close(bot)
        approvers = self._approvers(setup, sender, chat)
        block: dict[str, Any] = {
            "token": token.reference,
            "chat_id": chat_id,
            "approvers": approvers,
        }
        if not topics:
            block["topics"] = False
        if options["api_base_url"]:
            block["api_base_url"] = options["api_base_url"]
        write_channel_block(setup, block)
        if not approvers:
            setup.say(
                "No approvers: questions will show in the chat, but nobody can answer them "
                f"until you list numeric user ids in channels.{setup.channel}.approvers."
            )
        keep_tokens(setup, [token], example="123456:ABC...")
        where = "a topic" if topics else "a reply chain"
        return await check_with_doctor(setup, [token], becomes=where)

    # -- the chat ----------------------------------------------------------------------------

    async def _find_chat(self, setup: SetupContext, bot: Bot, me: User) -> tuple[int, User | None]:
        """The chat id: `--chat-id`, else the group of the first message the bot sees."""
        given = setup.options["chat_id"]
        if given is not None:
            return int(given), None
        bot_name = f"@{me.username}"
        setup.say("")
        setup.say("Now, in Telegram:")
        setup.say("  1. Create a group (or open one) and turn on Topics in its settings.")
        setup.say(f"  2. Add {bot_name} to it: Administrators → Add Admin, with Manage Topics on.")
        setup.say(
            f"  3. Send any message in the group (before the bot is an admin: /start{bot_name})."
        )
        wait = wait_option(setup)
        setup.say(f"Waiting for that message (up to {human_duration(wait)}; Ctrl-C stops)...")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        offset: int | None = None
        told_private = False
        while (remaining := deadline - loop.time()) > 0:
            try:
                updates = await bot.get_updates(
                    offset=offset,
                    timeout=max(1, min(_POLL, int(remaining))),
                    allowed_updates=["message"],
                )
            except Conflict:
                raise SetupError(
                    "another program reads this bot's updates (a running aep-bridge, or a "
                    "webhook): stop it while setting up, or pass --chat-id ID"
                ) from None
            except TelegramError as exc:
                raise SetupError(f"getUpdates failed: {clean_error(exc, bot.token)}") from None
            for update in updates:
                offset = update.update_id + 1
                message = update.message
                sender = message.from_user if message is not None else None
                if message is None or sender is None or sender.is_bot:
                    continue
                if message.chat.type == Chat.PRIVATE:
                    if not told_private:
                        setup.say(
                            "That was a private message to the bot: write in the group instead "
                            "(or stop, and pass --chat-id with your user id for a private chat)."
                        )
                        told_private = True
                    continue
                if message.chat.type not in (Chat.GROUP, Chat.SUPERGROUP):
                    continue
                with contextlib.suppress(TelegramError):  # confirmed: the bridge won't see it
                    await bot.get_updates(offset=offset, timeout=0)
                title = message.chat.title or str(message.chat.id)
                setup.say(f"Got it: {_who(sender)} wrote in “{title}” (chat id {message.chat.id}).")
                return message.chat.id, sender
        raise SetupError(
            f"no message reached {bot_name} in the group within {human_duration(wait)}. Is it in "
            f"the group? Send /start{bot_name} there and run this again. ({_NO_MESSAGE})"
        )

    async def _check_chat(
        self, setup: SetupContext, bot: Bot, me: User, chat_id: int, token: str
    ) -> tuple[int, ChatFullInfo, bool]:
        """The chat (its id may change when a group becomes a supergroup), and whether it
        gets a topic per session."""
        bot_name = f"@{me.username}"
        while True:
            try:
                chat = await bot.get_chat(chat_id)
            except ChatMigrated as exc:
                setup.say(f"The group is a supergroup now, with a new id: {exc.new_chat_id}.")
                chat_id = exc.new_chat_id
                continue
            except TelegramError as exc:
                raise SetupError(
                    f"cannot open chat {chat_id}: {clean_error(exc, token)}. Add {bot_name} to the "
                    "group, and check the id (a group's id starts with -100)."
                ) from None
            if chat.type == Chat.CHANNEL:
                raise SetupError(f"chat {chat_id} is a channel: the bot needs a group")
            if setup.options["no_topics"]:
                setup.say(f"Sessions will be reply chains in “{_title(chat)}” (--no-topics).")
                return chat_id, chat, False
            problems = await _topic_problems(bot, me, chat)
            if not problems:
                setup.say(f"ok    “{_title(chat)}” has topics, and {bot_name} may manage them.")
                return chat_id, chat, True
            setup.say(f"For a topic per session, “{_title(chat)}” is not ready yet:")
            for what, fix in problems:
                setup.say(f"  FAIL  {what}")
                setup.say(f"        fix: {fix}")
            if setup.confirm(
                "Continue without topics (each session a reply chain in the chat)?",
                default=False,
            ):
                return chat_id, chat, False
            if setup.assume_yes:
                raise SetupError(
                    "nothing written: fix the above and run this again, or pass --no-topics "
                    "for reply chains"
                )
            if not setup.confirm("Fixed it in Telegram? Check again?", default=True):
                raise SetupError(
                    "nothing written: fix the above and run `aep-bridge setup telegram` again"
                )

    # -- approvers ---------------------------------------------------------------------------

    def _approvers(self, setup: SetupContext, sender: User | None, chat: ChatFullInfo) -> list[str]:
        given = setup.options["approver"]
        if given:
            wrong = [str(i) for i in given if int(i) <= 0]
            if wrong:
                raise SetupError(f"--approver takes a user's numeric id, not {', '.join(wrong)}")
            shared = [str(i) for i in given if shared_id_reason(str(int(i)))]
            if shared:
                raise SetupError(
                    f"{', '.join(shared)} can never be an approver: Telegram shows it for many "
                    "people (anonymous admins, channels); give each person's own user id"
                )
            return [str(int(i)) for i in given]
        if sender is not None and shared_id_reason(str(sender.id)) is not None:
            setup.say(
                f"That message came from {sender.id} ({shared_id_reason(str(sender.id))}): "
                "Telegram does not say who wrote it, so it cannot be an approver. Turn off "
                "Remain anonymous in your admin rights to be found, or give your id below."
            )
        elif sender is not None:
            if setup.confirm(
                f"Make {_who(sender)} an approver, allowed to answer the agents' questions?",
                default=True,
            ):
                return [str(sender.id)]
        elif chat.type == Chat.PRIVATE and setup.confirm(
            f"Make the user of this private chat ({chat.id}) an approver?", default=True
        ):
            return [str(chat.id)]
        answer = setup.ask(
            "Approvers' numeric user ids, separated by spaces (@userinfobot tells you yours; "
            "empty: none for now)",
            default="",
            check=_user_ids_problem,
        )
        return answer.replace(",", " ").split()


async def _get_me(base: str, token: str) -> tuple[Bot, User]:
    """A started `Bot` and who it is; a `SetupError` that never quotes the token."""
    if not _TOKEN.fullmatch(token):
        raise SetupError(
            "that is not a bot token: @BotFather's look like 123456789:AAH..., digits, a "
            "colon, then letters"
        )
    bot = Bot(token, base_url=base)
    try:
        await bot.initialize()  # getMe
    except (InvalidToken, Forbidden):  # their messages quote the token: never shown
        await _close(bot)
        raise SetupError(
            "Telegram refused the token: it is wrong, or was revoked. In @BotFather: /mybots "
            "→ your bot → API Token, and copy it again"
        ) from None
    except TelegramError as exc:
        await _close(bot)
        raise SetupError(
            f"cannot reach {base}: {clean_error(exc, token)}; check the network (or --api-base-url)"
        ) from None
    return bot, bot.bot


async def _topic_problems(bot: Bot, me: User, chat: ChatFullInfo) -> list[tuple[str, str]]:
    """What keeps `chat` from a topic per session, each with what to do in Telegram."""
    title = _title(chat)
    bot_name = f"@{me.username}"
    found: list[tuple[str, str]] = []
    if chat.type == Chat.PRIVATE:
        if not getattr(me, "has_topics_enabled", False):
            found.append(
                (
                    "a private chat has topics only when the bot has topic mode",
                    "turn on topic mode for the bot in @BotFather, or continue without topics",
                )
            )
        return found
    if chat.type == Chat.GROUP:
        found.append(
            (
                f"“{title}” is a basic group, which has no topics",
                f"{_TOPICS_FIX} (it becomes a supergroup, with a new id: this wizard follows it)",
            )
        )
    elif not chat.is_forum:
        found.append((f"“{title}” has no topics", _TOPICS_FIX))
    try:
        member = await bot.get_chat_member(chat.id, me.id)
    except TelegramError as exc:
        found.append(
            (
                f"cannot see the bot's rights: {clean_error(exc, bot.token)}",
                f"add {bot_name} to the group",
            )
        )
        return found
    if member.status not in ("administrator", "creator"):
        found.append(
            (
                f"{bot_name} is not an admin of “{title}”",
                f"in the group: tap its name → Administrators → Add Admin → {bot_name}, with "
                "Manage Topics on",
            )
        )
    elif member.status == "administrator" and not getattr(member, "can_manage_topics", False):
        found.append(
            (
                f"{bot_name} is an admin, but may not manage topics",
                f"in the group: tap its name → Administrators → {bot_name} → turn on Manage Topics",
            )
        )
    return found


def _user_ids_problem(answer: str) -> str | None:
    ids = answer.replace(",", " ").split()
    wrong = [i for i in ids if not i.isdigit() or int(i) == 0]
    if wrong:
        return f"Not a numeric user id: {', '.join(wrong)} (usernames can change; ids cannot)."
    shared = [i for i in ids if shared_id_reason(i)]
    if shared:
        return (
            f"{', '.join(shared)} can never be an approver: Telegram shows it for many people "
            "(anonymous admins, channels). Give each person's own user id."
        )
    return None


def _who(user: User) -> str:
    name = " ".join(x for x in (user.first_name, user.last_name) if x) or "someone"
    handle = f"@{user.username}, " if user.username else ""
    return f"{name} ({handle}user id {user.id})"


def _title(chat: ChatFullInfo) -> str:
    return chat.title or chat.username or chat.first_name or str(chat.id)


async def _close(bot: Bot) -> None:
    try:
        await bot.shutdown()
    except Exception:  # it may never have started; closing must not hide the real error
        return
