"""`aep-bridge setup slack`: from an app's two tokens to a checked channel block.

The wizard checks the bot token (`auth.test`, and its scopes against the doctor's list, saying
how to add the missing ones) and the app token (`apps.connections.open`: Socket Mode), lists
the channels the bot is in (`users.conversations`, waiting for an `/invite` when there is none)
to pick the sessions' channel and a heads-up channel from, and pairs the first approver: it
connects over Socket Mode and prints a one-time code; whoever types it in the sessions' channel
becomes the first approver. It writes the block with the tokens as `${SLACK_BOT_TOKEN}` and
`${SLACK_APP_TOKEN}` (never their values) and runs the channel's doctor. Every question has a
flag, for scripts: `--bot-token-env`, `--app-token-env`, `--channel-id`,
`--notifications-channel-id`, `--approver`, `--yes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from aep_bridge import (
    PairingCode,
    SetupContext,
    SetupError,
    SetupOption,
    SetupToken,
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
    wait_option,
    wait_setup_option,
    wait_until,
    write_channel_block,
)

from .config import SLACK_API
from .doctor import (
    _NETWORK,
    APP_TOKEN_HOW,
    BOT_TOKEN_HOW,
    MANIFEST,
    REFUSED,
    describe,
    error_code,
    granted_scopes,
    missing_scopes,
)

#: the variables the tokens are read from at run time, unless the `--...-env` flags name others
BOT_ENV: Final = "SLACK_BOT_TOKEN"
APP_ENV: Final = "SLACK_APP_TOKEN"
#: how long the pairing code is taken (and the longest `--wait`): ten minutes
CODE_LIFE: Final = 600.0
DEFAULT_WAIT: Final = CODE_LIFE
#: digits of the pairing code
CODE_DIGITS: Final = 8
#: seconds between two looks for the bot in a channel: short at first, then every 5 (Slack
#: holds users.conversations to Tier 2, about 20 calls a minute)
_FIRST_POLL: Final = 0.25
_POLL: Final = 5.0
_MEMBER_ID_HOW: Final = "a person's profile > ⋮ > Copy member ID"
_USER: Final = re.compile(r"[UW][A-Z0-9]{2,}")
_CHANNEL: Final = re.compile(r"[CG][A-Z0-9]{2,}")


@dataclass(frozen=True, slots=True)
class _Channel:
    id: str
    name: str
    private: bool

    @property
    def label(self) -> str:
        return f"#{self.name}"


class SlackSetup(SetupWizard):
    """A Slack app's bot and app tokens, a channel, and a first approver, checked on Slack."""

    name = "slack"
    description = (
        "a Slack app over Socket Mode (its two tokens, the channel it is in, a pairing code)"
    )
    #: what the wizard decides; over an existing block (--force) its other keys are kept
    block_keys: ClassVar = frozenset(
        {
            "bot_token",
            "app_token",
            "channel_id",
            "notifications_channel_id",
            "approvers",
            "api_base_url",
        }
    )
    options: ClassVar = (
        SetupOption(
            "--bot-token-env",
            "read the bot token (xoxb-...) from this environment variable (the config then "
            f"reads it from there too) instead of asking; default: ask, or use ${BOT_ENV}",
            metavar="VAR",
        ),
        SetupOption(
            "--app-token-env",
            "read the app-level token (xapp-...) from this environment variable instead of "
            f"asking; default: ask, or use ${APP_ENV}",
            metavar="VAR",
        ),
        SetupOption(
            "--channel-id",
            "the channel the sessions go to (one the bot is in), instead of asking",
            metavar="ID",
        ),
        SetupOption(
            "--notifications-channel-id",
            "a channel for heads-ups, or none, instead of asking",
            metavar="ID|none",
        ),
        approver_option("a Slack member id (U...)"),
        wait_setup_option(
            "for the bot to be invited to a channel, and for the code",
            default=DEFAULT_WAIT,
            longest=True,
        ),
        SetupOption(
            "--api-base-url",
            f"Slack's Web API elsewhere (GovSlack, a proxy), instead of {SLACK_API} (written "
            "into the block as api_base_url)",
            metavar="URL",
        ),
    )

    async def run(self, setup: SetupContext) -> bool:
        options = setup.options
        given_base = options["api_base_url"]
        if given_base and not re.match(r"https?://[^/?#]+(/[^?#]*)?$", given_base.strip()):
            raise SetupError(
                f"--api-base-url takes an http:// or https:// URL without a query, such as "
                f"{SLACK_API}"
            )
        base = given_base.strip().rstrip("/") + "/" if given_base else SLACK_API
        bot = self._token(setup, "bot")
        client, bot = await self._bot(setup, base, bot)
        await self._check_scopes(setup, client)
        app = await self._app(setup, base, self._token(setup, "app"), bot)
        channels = await self._channels(setup, client, bot.value)
        channel = self._pick_channel(setup, channels)
        notes = self._pick_notifications(setup, channels, channel)
        approvers = await self._approvers(setup, client, base, channel, bot, app)
        block: dict[str, Any] = {
            "bot_token": bot.reference,
            "app_token": app.reference,
            "channel_id": channel.id,
        }
        if notes is not None:
            block["notifications_channel_id"] = notes.id
        block["approvers"] = approvers
        if given_base:
            block["api_base_url"] = base
        write_channel_block(setup, block)
        keep_tokens(setup, (bot, app))
        return await check_with_doctor(setup, (bot, app), becomes=f"a thread in {channel.label}")

    # -- the tokens --------------------------------------------------------------------------

    def _token(self, setup: SetupContext, kind: str) -> SetupToken:
        """The bot or app token: from the variable its flag names, else the default variable
        (when the person says so), else typed."""
        what = _what(kind)
        return ask_token(
            setup,
            flag=f"--{kind}-token-env",
            variable=BOT_ENV if kind == "bot" else APP_ENV,
            prompt=f"{what[0].upper()}{what[1:]}",
            example=f"{_prefix(kind)}...",
            what=f"{kind} token",
            hint=f"the {what}",
        )

    async def _bot(
        self, setup: SetupContext, base: str, bot: SetupToken
    ) -> tuple[AsyncWebClient, SetupToken]:
        """A client with the bot token Slack took, and its `auth.test`; a typed token that is
        refused is asked for again."""
        (client, me), bot = await check_token(
            setup, bot, lambda value: _auth(base, value), again="The bot token, again"
        )
        setup.say(
            f"ok    the bot token is @{me.get('user') or 'the bot'}'s, in "
            f"{me.get('team') or 'the workspace'}."
        )
        return client, bot

    async def _check_scopes(self, setup: SetupContext, client: AsyncWebClient) -> None:
        """The bot token's scopes (Slack names them in each answer's `x-oauth-scopes`):
        missing ones are named with what each is for, and looked at again once added."""
        while True:
            try:
                me = await client.auth_test()
            except (SlackApiError, *_NETWORK) as exc:
                raise SetupError(
                    f"cannot ask Slack for the bot's scopes: {describe(exc)}"
                ) from None
            granted = granted_scopes(me.headers)
            if granted is None:
                setup.say("note  Slack did not say which scopes the bot has: not checked.")
                return
            missing = missing_scopes(granted)
            if not missing:
                setup.say("ok    the bot has every scope it needs.")
                return
            setup.say("FAIL  the bot token lacks these scopes:")
            for scope, why in missing:
                setup.say(f"        {scope}: to {why}")
            setup.say(
                "      fix: in your app's settings (api.slack.com/apps), OAuth & Permissions > "
                "Scopes > Bot Token Scopes, add them (or create the app from"
            )
            setup.say(f"      {MANIFEST}), then Install App > Reinstall to Workspace")
            if setup.assume_yes or not setup.confirm(
                "Added them and reinstalled? Check again?", default=True
            ):
                raise SetupError(
                    "the bot token lacks scopes the channel needs: add them, reinstall the "
                    "app, then run this again (nothing written)"
                )

    async def _app(
        self, setup: SetupContext, base: str, app: SetupToken, bot: SetupToken
    ) -> SetupToken:
        """The app token, checked by opening a Socket Mode URL (never connected to here)."""

        async def opens(value: str) -> None:
            problem = await _socket_mode_problem(base, value, bot.value)
            if problem is not None:
                raise SetupError(problem)

        _, app = await check_token(setup, app, opens, again="The app-level token, again")
        setup.say("ok    the app token opens Socket Mode.")
        return app

    # -- the channels ------------------------------------------------------------------------

    async def _channels(
        self, setup: SetupContext, client: AsyncWebClient, bot: str
    ) -> list[_Channel]:
        """The channels the bot is in; none yet: says how to invite it, and waits."""
        wait = _wait(setup)
        return await wait_until(
            setup,
            lambda: _member_channels(client, bot),
            wait=wait,
            first=_FIRST_POLL,
            most=_POLL,
            how=(
                "The bot is in no channel yet. In Slack, open the channel the sessions go to",
                "(or create one) and invite the bot: type /invite @ and the app's name there.",
            ),
            gave_up=f"the bot was invited to no channel within {human_duration(wait)}: type "
            "/invite @app in the channel for the sessions, then run this again",
        )

    def _pick_channel(self, setup: SetupContext, channels: Sequence[_Channel]) -> _Channel:
        """The sessions' channel: `--channel-id`, else asked from the numbered list."""
        given = setup.options["channel_id"]
        if given is not None:
            if (channel := _given(channels, given)) is None:
                raise SetupError(
                    f"the bot is not in {given}: invite it there (/invite @app in the channel), "
                    "or pick one it is in: " + ", ".join(f"{c.label} ({c.id})" for c in channels)
                )
            setup.say(f"Sessions go to {channel.label} (a thread per session).")
            return channel
        index = ask_choice(
            setup,
            "The channels the bot is in (each session becomes a thread in the one you pick):",
            [f"{c.label}{' (private)' if c.private else ''}" for c in channels],
            "Which channel holds the sessions (a number)?",
            flag="--channel-id ID",
        )
        return channels[index]

    def _pick_notifications(
        self, setup: SetupContext, channels: Sequence[_Channel], sessions: _Channel
    ) -> _Channel | None:
        """The heads-up channel, or None: `--notifications-channel-id`, else asked (`none` by
        default, and not asked when the bot is in no other channel)."""
        given = setup.options["notifications_channel_id"]
        if given is not None:
            if given.strip().lower() == "none":
                return None
            if (channel := _given(channels, given)) is None:
                raise SetupError(
                    f"--notifications-channel-id {given}: the bot is not in that channel; invite "
                    "it there first (/invite @app), or give none"
                )
            setup.say(f"Heads-ups go to {channel.label}.")
            return channel
        others = [c for c in channels if c != sessions]
        if not others:
            return None
        index = ask_number(
            setup,
            "Heads-ups (done, failed, waiting for you) to which channel (a number, or none)?",
            len(channels),
            default="none",
            flag="--notifications-channel-id ID",
            or_none=True,
        )
        return None if index is None else channels[index]

    # -- the first approver ------------------------------------------------------------------

    async def _approvers(
        self,
        setup: SetupContext,
        client: AsyncWebClient,
        base: str,
        channel: _Channel,
        bot: SetupToken,
        app: SetupToken,
    ) -> list[str]:
        """`--approver`, else whoever types the pairing code in the sessions' channel."""
        takes = f"a Slack member id such as U0123456789 ({_MEMBER_ID_HOW})"
        if given := given_approvers(setup, _USER.fullmatch, takes):
            return given
        return [await _pair(setup, client, base, channel, bot.value, app.value)]


async def _auth(base: str, token: str) -> tuple[AsyncWebClient, dict[str, Any]]:
    """A client with the bot token and its `auth.test`; a `SetupError` that never quotes the
    token."""
    if not token.startswith("xoxb-"):
        raise SetupError(
            "that is not a bot token: bot tokens start with xoxb- (OAuth & Permissions > Bot "
            "User OAuth Token)"
        )
    client = AsyncWebClient(token=token, base_url=base)
    try:
        me = await client.auth_test()
    except SlackApiError as exc:
        if error_code(exc) in REFUSED:
            raise SetupError(f"Slack refused the bot token: {BOT_TOKEN_HOW}") from None
        raise SetupError(f"Slack did not take the bot token: {describe(exc)}") from None
    except _NETWORK as exc:
        raise SetupError(
            f"cannot reach {base}: {describe(exc, token)}; check the network (or --api-base-url)"
        ) from None
    if not me.get("bot_id"):
        raise SetupError(
            "that token is not a bot's: copy OAuth & Permissions > Bot User OAuth Token (xoxb-...)"
        )
    return client, dict(me.data) if isinstance(me.data, dict) else {}


async def _socket_mode_problem(base: str, app: str, bot: str) -> str | None:
    """Why the app token does not open Socket Mode, or None when it does."""
    if not app.startswith("xapp-"):
        return (
            "that is not an app-level token: they start with xapp- (Basic Information > "
            "App-Level Tokens)"
        )
    try:
        await AsyncWebClient(base_url=base).apps_connections_open(app_token=app)
    except SlackApiError as exc:
        return (
            f"Slack did not open Socket Mode with the app token ({describe(exc)}): {APP_TOKEN_HOW}"
        )
    except _NETWORK as exc:
        return f"cannot reach {base}: {describe(exc, app, bot)}; check the network"
    return None


async def _member_channels(client: AsyncWebClient, bot: str) -> list[_Channel]:
    """The public and private channels the bot is in, not archived, by name."""
    found: list[_Channel] = []
    cursor: str | None = None
    while True:
        try:
            page = await client.users_conversations(
                types="public_channel,private_channel",
                exclude_archived=True,
                limit=200,
                **({"cursor": cursor} if cursor else {}),
            )
        except (SlackApiError, *_NETWORK) as exc:
            raise SetupError(
                f"cannot list the bot's channels: {describe(exc, bot)} (it needs the scopes "
                "channels:read and groups:read)"
            ) from None
        for item in page.get("channels") or []:
            channel_id = str(item.get("id") or "")
            if _CHANNEL.fullmatch(channel_id) and not item.get("is_archived"):
                name = str(item.get("name") or channel_id)
                found.append(_Channel(channel_id, name, bool(item.get("is_private"))))
        cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "") or None
        if cursor is None:
            return sorted(found, key=lambda c: (c.name, c.id))


async def _pair(
    setup: SetupContext,
    client: AsyncWebClient,
    base: str,
    where: _Channel,
    bot: str,
    app: str,
) -> str:
    """The member id of whoever types a fresh one-time code in `where`, heard over Socket
    Mode; every other message (a wrong code, another channel, a bot) is passed over, its text
    never shown."""
    wait = _wait(setup)
    loop = asyncio.get_running_loop()
    pairing = PairingCode(digits=CODE_DIGITS, lifetime=wait, clock=loop.time)
    # code-shaped messages only, and a few: past its attempts the code is spent anyway
    typed: asyncio.Queue[tuple[str, str]] = asyncio.Queue(maxsize=pairing.attempts + 1)
    listening = False  # nothing is heard before the code is shown

    async def hear(socket: AsyncBaseSocketModeClient, request: SocketModeRequest) -> None:
        # every envelope is acked, or Slack sends it again
        await socket.send_socket_mode_response(SocketModeResponse(request.envelope_id))
        if request.type != "events_api" or not listening:
            return
        event: dict[str, Any] = dict(request.payload.get("event") or {})
        if (
            event.get("type") != "message"
            or event.get("subtype")
            or event.get("bot_id")
            or event.get("channel") != where.id
            or not isinstance(event.get("user"), str)
            or not pairing.looks_like_code(text := str(event.get("text") or ""))
        ):
            return
        with contextlib.suppress(asyncio.QueueFull):
            typed.put_nowait((event["user"], text))

    async def heard() -> AsyncIterator[tuple[str, str]]:
        deadline = loop.time() + wait
        while (remaining := deadline - loop.time()) > 0:
            try:
                yield await asyncio.wait_for(typed.get(), remaining)
            except TimeoutError:
                return

    async def who(user: str) -> str:
        return await _who(client, user)

    quiet = logging.getLogger(f"{__name__}.socket_mode")  # its chatter is not the person's
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    socket = SocketModeClient(app_token=app, web_client=AsyncWebClient(base_url=base), logger=quiet)
    socket.socket_mode_request_listeners.append(hear)
    try:
        try:
            await socket.connect()  # type: ignore[no-untyped-call]
        except (SlackApiError, *_NETWORK) as exc:
            raise SetupError(
                f"cannot connect over Socket Mode to hear the code: {describe(exc, app, bot)}; "
                "or pass --approver ID"
            ) from None
        listening = True
        return await pair_from(
            setup, pairing, heard(), where=where.label, wait=wait, how=_MEMBER_ID_HOW, who=who
        )
    finally:
        await socket.close()  # type: ignore[no-untyped-call]


async def _who(client: AsyncWebClient, user: str) -> str:
    """A person as `Alice (@alice, member id U0ALICE)`, or their id when Slack says no more."""
    try:
        found = await client.users_info(user=user)
    except (SlackApiError, *_NETWORK):
        return f"member {user}"
    info: dict[str, Any] = dict(found.get("user") or {})
    profile: dict[str, Any] = dict(info.get("profile") or {})
    name = info.get("real_name") or profile.get("real_name") or profile.get("display_name")
    handle = info.get("name")
    if name and handle:
        return f"{name} (@{handle}, member id {user})"
    if name or handle:
        return f"{name or '@' + str(handle)} (member id {user})"
    return f"member {user}"


def _prefix(kind: str) -> str:
    return "xoxb-" if kind == "bot" else "xapp-"


def _what(kind: str) -> str:
    if kind == "bot":
        return "bot token: OAuth & Permissions > Bot User OAuth Token, xoxb-..."
    return "app-level token: Basic Information > App-Level Tokens, xapp-..."


def _wait(setup: SetupContext) -> float:
    return wait_option(setup, most=CODE_LIFE)


def _given(channels: Sequence[_Channel], given: str) -> _Channel | None:
    """The channel whose id was given (`--channel-id`, `--notifications-channel-id`), if
    the bot is in it."""
    return next((channel for channel in channels if channel.id == given.strip()), None)
