"""`aep-bridge setup discord`: from a bot token to a checked channel block.

The wizard checks the token (GET /users/@me, and the application for the Message Content
intent, saying how to turn it on), prints the invite URL with exactly the permissions the
doctor checks (`permissions`), waits for the bot to join a server, lists the server's text and
forum channels to pick the sessions' channel and a heads-up channel from, and pairs the first
approver with a one-time code typed in the channel. It writes the block with the token as
`${DISCORD_BOT_TOKEN}` (never its value) and runs the channel's doctor. Every question has a
flag, for scripts: `--token-env`, `--guild-id`, `--channel-id`, `--notifications-channel-id`,
`--approver`, `--yes`; `--api-base-url` and `--gateway-url` for a proxy (or a test fake).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

import aiohttp
import discord
import discord.http

from aep_bridge import (
    PairingCode,
    SetupContext,
    SetupError,
    SetupOption,
    SetupWizard,
    approver_option,
    ask_choice,
    ask_number,
    ask_token,
    check_token,
    check_with_doctor,
    given_approvers,
    human_duration,
    keep_tokens,
    pair_from,
    poll_times,
    scrub_token,
    token_env_option,
    wait_option,
    wait_setup_option,
    write_channel_block,
)

from .config import DISCORD_API, DISCORD_GATEWAY
from .doctor import describe
from .permissions import invite_url

#: the variable the token is read from at run time, unless `--token-env` names another
TOKEN_ENV = "DISCORD_BOT_TOKEN"
DEFAULT_WAIT = 300.0
#: a bot token: three dot-separated parts of letters, digits, `_` and `-`
_TOKEN = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
#: seconds between two looks (for the bot in a server, for the code): short at first, for
#: someone quick, then every few seconds
_FIRST_POLL = 0.25
_POLL = 3.0
#: digits of the pairing code
_CODE_DIGITS = 6
#: messages read per look for the code
_PAGE = 50
_KINDS = {
    discord.ChannelType.text: "text channel: a thread per session",
    discord.ChannelType.forum: "forum: a post per session",
}
_PORTAL = "https://discord.com/developers/applications"
_INTENT_FIX = (
    f"in the Developer Portal ({_PORTAL}) > your application > Bot > Privileged Gateway "
    "Intents, turn on Message Content Intent and save"
)
_USER_ID_HOW = (
    "turn on Developer Mode (User Settings > Advanced), then right-click a name > Copy User ID"
)


class DiscordSetup(SetupWizard):
    """A bot token, a server and channel, and a first approver, checked against Discord."""

    name = "discord"
    description = (
        "a bot from the Developer Portal in your server (invite URL, channel, pairing code)"
    )
    #: what the wizard decides; over an existing block (--force) its other keys are kept
    block_keys: ClassVar = frozenset(
        {
            "token",
            "guild_id",
            "channel_id",
            "notifications_channel_id",
            "approvers",
            "api_base_url",
            "gateway_url",
        }
    )
    options: ClassVar = (
        token_env_option(TOKEN_ENV),
        SetupOption(
            "--guild-id",
            "the server's id, instead of waiting for the bot to join one",
            metavar="ID",
            kind=int,
        ),
        SetupOption(
            "--channel-id",
            "the text or forum channel the sessions go to, instead of asking",
            metavar="ID",
            kind=int,
        ),
        SetupOption(
            "--notifications-channel-id",
            "a text channel for heads-ups, or none, instead of asking",
            metavar="ID|none",
        ),
        approver_option("a Discord user id", kind=int),
        wait_setup_option("for the bot to join, and for the code", default=DEFAULT_WAIT),
        SetupOption(
            "--api-base-url",
            f"Discord's REST API through a proxy, instead of {DISCORD_API} "
            "(written into the block as api_base_url)",
            metavar="URL",
        ),
        SetupOption(
            "--gateway-url",
            f"Discord's gateway through a proxy, instead of {DISCORD_GATEWAY} (written into "
            "the block as gateway_url; the wizard itself uses only the REST API)",
            metavar="URL",
        ),
    )

    async def run(self, setup: SetupContext) -> bool:
        options = setup.options
        given_base = options["api_base_url"]
        if given_base and not re.match(r"https?://[^/]", given_base):
            raise SetupError(
                f"--api-base-url takes an http:// or https:// URL, such as {DISCORD_API}"
            )
        base = (given_base or DISCORD_API).rstrip("/")
        gateway = _gateway(options["gateway_url"])
        token = ask_token(
            setup,
            flag="--token-env",
            variable=TOKEN_ENV,
            prompt="Bot token from the Developer Portal, Bot > Reset Token",
            example="the token from the Developer Portal",
        )
        previous = discord.http.Route.BASE
        discord.http.Route.BASE = base
        try:
            client, token = await check_token(
                setup,
                token,
                lambda value: _login(base, value),
                again="Bot token from the Developer Portal, again",
            )
            try:
                setup.say(f"ok    the token is {client.user}'s.")
                await self._check_intent(setup, client)
                guild = await self._find_guild(setup, client)
                channels = await _channels(guild, token.value)
                channel = self._pick_channel(setup, guild, channels)
                notes = self._pick_notifications(setup, channels)
                approvers = await self._approvers(setup, client, channel, notes, token.value)
            finally:
                await _close(client)
        finally:
            discord.http.Route.BASE = previous
        block: dict[str, Any] = {
            "token": token.reference,
            "guild_id": str(guild.id),
            "channel_id": str(channel.id),
        }
        if notes is not None:
            block["notifications_channel_id"] = str(notes.id)
        block["approvers"] = approvers
        if given_base:
            block["api_base_url"] = base
        if gateway:
            block["gateway_url"] = gateway
        write_channel_block(setup, block)
        keep_tokens(setup, [token])
        where = (
            f"a post in #{channel.name}"
            if channel.type == discord.ChannelType.forum
            else f"a thread in #{channel.name}"
        )
        return await check_with_doctor(setup, [token], becomes=where)

    # -- the token ---------------------------------------------------------------------------

    async def _check_intent(self, setup: SetupContext, client: discord.Client) -> None:
        """The Message Content intent: without it the bot reads neither replies to its cards
        nor the pairing code. Missing, it says how to turn it on and looks again."""
        flags = client.application_flags
        while not (flags.gateway_message_content or flags.gateway_message_content_limited):
            setup.say("FAIL  the Message Content intent is off: the bot cannot read what people")
            setup.say("      write (replies to its cards, the pairing code)")
            setup.say(f"      fix: {_INTENT_FIX}")
            if setup.assume_yes or not setup.confirm("Turned it on? Check again?", default=True):
                raise SetupError(
                    "nothing written: turn on Message Content Intent (Developer Portal > Bot "
                    "> Privileged Gateway Intents), then run `aep-bridge setup discord` again"
                )
            try:
                flags = (await client.application_info()).flags
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                raise SetupError(f"cannot read the application: {_describe(exc)}") from None
        setup.say("ok    the Message Content intent is on.")

    # -- the server --------------------------------------------------------------------------

    async def _find_guild(self, setup: SetupContext, client: discord.Client) -> discord.Guild:
        """The server: `--guild-id`, else the one the bot is in (waiting for it to join one),
        asking which when it is in several."""
        url = invite_url(client.application_id or 0)
        setup.say("")
        setup.say("The bot's invite link (it asks for exactly the permissions the channel needs):")
        setup.say(f"  {url}")
        given = setup.options["guild_id"]
        if given is not None:
            try:
                return await client.fetch_guild(int(given))
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                raise SetupError(
                    f"the bot is not in server {given} ({_describe(exc)}): open the invite "
                    "link above and add it to that server, or check the id"
                ) from None
        guilds = await _guilds(client)
        if not guilds:
            guilds = await self._wait_for_guild(setup, client)
        if len(guilds) == 1:
            setup.say(f"ok    the bot is in “{guilds[0].name}” (server id {guilds[0].id}).")
            return guilds[0]
        setup.say("The bot is in these servers:")
        for number, guild in enumerate(guilds, 1):
            setup.say(f"  {number}. {guild.name} (server id {guild.id})")
        index = ask_number(setup, "Which server (a number)?", len(guilds), flag="--guild-id ID")
        return guilds[index]

    async def _wait_for_guild(
        self, setup: SetupContext, client: discord.Client
    ) -> list[discord.Guild]:
        wait = wait_option(setup)
        setup.say("Open it, pick your server and press Authorize (you need Manage Server there).")
        setup.say(f"Waiting for the bot to join (up to {human_duration(wait)}; Ctrl-C stops)...")
        async for _ in poll_times(wait, first=_FIRST_POLL, most=_POLL):
            guilds = await _guilds(client)
            if guilds:
                return guilds
        raise SetupError(
            f"the bot joined no server within {human_duration(wait)}: open the invite link above, "
            "pick your server and press Authorize, then run this again (or pass --guild-id ID "
            "once it is in)"
        )

    # -- the channels ------------------------------------------------------------------------

    def _pick_channel(
        self,
        setup: SetupContext,
        guild: discord.Guild,
        channels: Sequence[discord.abc.GuildChannel],
    ) -> discord.abc.GuildChannel:
        """The sessions' channel: `--channel-id`, else asked from the numbered list."""
        if not channels:
            raise SetupError(
                f"“{guild.name}” has no text or forum channel: create one (a forum gives a post "
                "per session, a text channel a thread per session), then run this again"
            )
        given = setup.options["channel_id"]
        if given is not None:
            for channel in channels:
                if channel.id == int(given):
                    setup.say(f"Sessions go to #{channel.name} ({_KINDS[channel.type]}).")
                    return channel
            raise SetupError(
                f"{given} is not a text or forum channel of “{guild.name}”: pick one of "
                + ", ".join(f"#{c.name} ({c.id})" for c in channels)
            )
        index = ask_choice(
            setup,
            f"The text and forum channels of “{guild.name}” (in a text channel each session "
            "is a thread, in a forum a post):",
            [
                f"#{c.name} ({'forum' if c.type == discord.ChannelType.forum else 'text channel'})"
                for c in channels
            ],
            "Which channel holds the sessions (a number)?",
            flag="--channel-id ID",
        )
        return channels[index]

    def _pick_notifications(
        self, setup: SetupContext, channels: Sequence[discord.abc.GuildChannel]
    ) -> discord.abc.GuildChannel | None:
        """The heads-up channel (a text channel), or None: `--notifications-channel-id`,
        else asked, `none` by default."""
        texts = {c.id for c in channels if c.type == discord.ChannelType.text}
        given = setup.options["notifications_channel_id"]
        if given is not None:
            if given.strip().lower() == "none":
                return None
            for channel in channels:
                if str(channel.id) == given.strip() and channel.id in texts:
                    setup.say(f"Heads-ups go to #{channel.name}.")
                    return channel
            raise SetupError(
                f"--notifications-channel-id {given} is not a text channel of the server: "
                "give a text channel's id, or none"
            )
        if not texts:
            return None
        index = ask_number(
            setup,
            "Heads-ups (done, failed, waiting for you) to which text channel (a number, or none)?",
            len(channels),
            default="none",
            flag="--notifications-channel-id ID",
            or_none=True,
            also=lambda i: (
                None
                if channels[i].id in texts
                else "Heads-ups go to a text channel, not a forum: pick another, or none."
            ),
        )
        return None if index is None else channels[index]

    # -- the first approver ------------------------------------------------------------------

    async def _approvers(
        self,
        setup: SetupContext,
        client: discord.Client,
        channel: discord.abc.GuildChannel,
        notes: discord.abc.GuildChannel | None,
        token: str,
    ) -> list[str]:
        """`--approver`, else whoever types the pairing code in the sessions' text channel
        (a forum's posts take no message: in the heads-up channel, else asked for an id)."""
        if given := given_approvers(setup, lambda i: int(i) > 0, "a user's numeric id"):
            return given
        where = notes if channel.type == discord.ChannelType.forum else channel
        if where is None:
            setup.say(
                f"#{channel.name} is a forum, where nobody can type a pairing code, and there "
                "is no heads-up channel: give the first approver's user id instead."
            )
            answer = setup.ask(
                f"Your Discord user id ({_USER_ID_HOW})",
                flag="--approver ID",
                check=_user_id_problem,
            )
            return [answer]
        return [await self._pair(setup, client, where, token)]

    async def _pair(
        self,
        setup: SetupContext,
        client: discord.Client,
        where: discord.abc.GuildChannel,
        token: str,
    ) -> str:
        """The user id of whoever types a fresh one-time code in `where`, reading its new
        messages; other messages (a wrong code too) are passed over."""
        fix = (
            f"give the bot's role View Channel and Read Message History in #{where.name} (Edit "
            "Channel > Permissions), or pass --approver ID"
        )
        try:
            latest = await client.http.logs_from(where.id, 1)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise SetupError(f"cannot read #{where.name}: {_describe(exc, token)}; {fix}") from None
        after = int(latest[0]["id"]) if latest else 0
        wait = wait_option(setup)
        authors: dict[str, dict[str, Any]] = {}

        async def heard() -> AsyncIterator[tuple[str, str]]:
            nonlocal after
            async for _ in poll_times(wait, first=_FIRST_POLL, most=_POLL):
                try:
                    found = await client.http.logs_from(where.id, _PAGE, after=after)
                except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                    raise SetupError(
                        f"cannot read #{where.name}: {_describe(exc, token)}; {fix}"
                    ) from None
                for message in sorted(found, key=lambda m: int(m["id"])):
                    after = max(after, int(message["id"]))
                    author: dict[str, Any] = dict(message.get("author") or {})
                    if not author.get("bot"):
                        authors[str(author["id"])] = author
                        yield str(author["id"]), str(message.get("content") or "")

        async def who(user: str) -> str:
            return _who(authors[user])

        # taken for the wait, and the last look at the channel that ends it
        pairing = PairingCode(digits=_CODE_DIGITS, lifetime=wait + _POLL)
        return await pair_from(
            setup, pairing, heard(), where=f"#{where.name}", wait=wait, how=_USER_ID_HOW, who=who
        )


async def _login(base: str, token: str) -> discord.Client:
    """A client logged in over REST (who the bot is, its application); a `SetupError` that
    never quotes the token."""
    if not _TOKEN.fullmatch(token):
        raise SetupError(
            "that is not a bot token: the Developer Portal's look like MTIz...NjQ.GhJk2a.x9..., "
            "three parts joined by dots (Bot > Reset Token)"
        )
    client = discord.Client(intents=discord.Intents.none())
    try:
        await client.login(token)
    except discord.LoginFailure:
        await _close(client)
        raise SetupError(
            "Discord refused the token: it is wrong, or was reset. In the Developer Portal "
            f"({_PORTAL}): your application > Bot > Reset Token, and copy the new one"
        ) from None
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        await _close(client)
        raise SetupError(
            f"cannot reach {base}: {_describe(exc, token)}; check the network (or --api-base-url)"
        ) from None
    return client


async def _guilds(client: discord.Client) -> list[discord.Guild]:
    try:
        return [guild async for guild in client.fetch_guilds(limit=200, with_counts=False)]
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        raise SetupError(f"cannot list the bot's servers: {_describe(exc)}") from None


async def _channels(guild: discord.Guild, token: str) -> list[discord.abc.GuildChannel]:
    """The server's text and forum channels, in Discord's order."""
    try:
        found = await guild.fetch_channels()
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        raise SetupError(
            f"cannot list the channels of “{guild.name}”: {_describe(exc, token)}"
        ) from None
    return sorted(
        (c for c in found if c.type in _KINDS),
        key=lambda c: (c.position, c.id),
    )


def _user_id_problem(answer: str) -> str | None:
    if answer.isascii() and answer.isdigit() and int(answer) > 0:
        return None
    return f"Not a user id: ids are numbers such as 123456789012345678 ({_USER_ID_HOW})."


def _who(author: dict[str, Any]) -> str:
    name = author.get("global_name") or author.get("username") or "someone"
    handle = f"@{author['username']}, " if author.get("username") else ""
    return f"{name} ({handle}user id {author.get('id')})"


def _gateway(given: str | None) -> str | None:
    """`--gateway-url` checked as the block's `gateway_url` will be, before anything is
    asked: a ws:// or wss:// URL with a host, and no query or fragment."""
    if not given:
        return None
    value = given.strip()
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("ws", "wss")
        or not parts.hostname
        or parts.query
        or parts.fragment
    ):
        raise SetupError(
            f"--gateway-url takes a ws:// or wss:// URL with a host (and no ?query), such as "
            f"{DISCORD_GATEWAY}"
        )
    return value


def _describe(exc: BaseException, token: str = "") -> str:
    """An error as one line, the token cut out (Discord's answers never quote it; the
    network's errors might)."""
    return scrub_token(describe(exc), token)


async def _close(client: discord.Client) -> None:
    try:
        await client.close()
    except Exception:  # it may never have started; closing must not hide the real error
        return
