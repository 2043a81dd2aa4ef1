"""`aep-bridge setup matrix`: homeserver, token (or a one-time password login: only the token it
returns is kept), an unencrypted room, a paired first approver (docs/channels/matrix.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Final

from mautrix.client import Client
from mautrix.types import RoomID, SyncToken, UserID, WhoamiResponse

from aep_bridge import (
    PairingCode,
    SetupContext,
    SetupError,
    SetupOption,
    SetupToken,
    SetupWizard,
    approver_option,
    ask_choice,
    ask_token,
    check_token,
    check_with_doctor,
    given_approvers,
    human_duration,
    keep_tokens,
    pair_from,
    token_env_option,
    url_problem,
    wait_option,
    wait_setup_option,
    wait_until,
    write_channel_block,
)

from .client import (
    CALL_TIMEOUT,
    RoomView,
    call,
    connected,
    look_at_room,
    newest_version,
    rooms_of,
    sync_filter,
)
from .config import USER_ID
from .doctor import ENCRYPTION_WHY, REFUSED_TOKEN, REFUSED_TOKEN_WHY

TOKEN_ENV: Final = "MATRIX_ACCESS_TOKEN"
#: how long the pairing code is taken (and the longest `--wait`)
CODE_LIFE: Final = 600.0
#: seconds a `/sync` long-poll waits (the homeserver has `CALL_TIMEOUT` on top to answer)
_LONG_POLL: Final = 30.0
_EXAMPLE_URL: Final = "https://matrix.example.org"
_UNKNOWN: Final = "@aep-bridge:unknown"
_USER_ID_HOW: Final = "a person's full Matrix id, such as @ada:example.org (Element: click them)"
_TOKEN_HOW: Final = (
    "Element, logged in as the bot: Settings > Help & About > Access Token; or pass "
    "--user-id and --password-env to log in once"
)


class MatrixSetup(SetupWizard):
    """A bot account's access token, an unencrypted room, a first approver, on Matrix."""

    name = "matrix"
    description = (
        "a Matrix bot account (its access token, an unencrypted room it is in, a pairing code)"
    )
    #: what the wizard decides; over an existing block (--force) its other keys are kept
    block_keys: ClassVar = frozenset(
        {"homeserver", "user_id", "access_token", "device_id", "room_id", "approvers"}
    )
    options: ClassVar = (
        SetupOption(
            "--homeserver",
            f"the homeserver's client-server URL, such as {_EXAMPLE_URL}, instead of asking",
            metavar="URL",
        ),
        token_env_option(TOKEN_ENV, what="bot's access token"),
        SetupOption(
            "--user-id",
            "the bot account's Matrix user id, such as @aep-bridge:example.org (with "
            "--password-env; a token says whose it is)",
            metavar="ID",
        ),
        SetupOption(
            "--password-env",
            "log in once as the bot with the password in this environment variable, and keep "
            "only the access token the login returns (the password is never written)",
            metavar="VAR",
        ),
        SetupOption(
            "--room-id",
            "the room the sessions go to (one the bot is in or invited to), instead of asking",
            metavar="ID",
        ),
        approver_option("a Matrix user id (@name:server)"),
        wait_setup_option(
            "for the bot to be invited to a room, and for the code", default=CODE_LIFE, longest=True
        ),
    )

    async def run(self, setup: SetupContext) -> bool:
        approvers = given_approvers(setup, USER_ID.match, _USER_ID_HOW)
        homeserver = await _homeserver(setup)
        token, bot = await _token(setup, homeserver)
        async with connected(homeserver, bot.user_id, token.value, bot.device_id) as client:
            room = await _room(setup, client, token.value)
            approvers = approvers or [await _pair(setup, client, room, token.value)]
        block: dict[str, Any] = {
            "homeserver": homeserver,
            "user_id": bot.user_id,
            "access_token": token.reference,
            "room_id": room.room_id,
            **({"device_id": bot.device_id} if bot.device_id else {}),
            "approvers": approvers,
        }
        write_channel_block(setup, block)
        keep_tokens(setup, (token,), example="syt_...")
        return await check_with_doctor(setup, (token,), becomes=f"a thread in {room.label}")


async def _homeserver(setup: SetupContext) -> str:
    """`--homeserver`, else asked; checked by asking it for `/versions`."""

    def problem(text: str) -> str | None:
        wrong = url_problem(text, example=_EXAMPLE_URL)
        return f"The URL {wrong}." if wrong else None

    url = setup.options["homeserver"]
    if url is not None and (wrong := problem(url)):
        raise SetupError(f"--homeserver {url}: {wrong}")
    url = url or setup.ask(
        "The homeserver's URL (the address your Matrix client signs in to, such as "
        f"{_EXAMPLE_URL})",
        flag="--homeserver URL",
        check=problem,
    )
    url = str(url).strip().rstrip("/")
    async with connected(url, _UNKNOWN, "") as client:
        newest = await newest_version(
            client,
            lambda why, _: SetupError(
                f"{url} does not answer as a Matrix homeserver ({why}): give the client-server "
                "URL your Matrix client signs in to, without /_matrix"
            ),
        )
    setup.say(f"ok    {url} is a Matrix homeserver (Matrix {newest}).")
    return url


async def _token(setup: SetupContext, homeserver: str) -> tuple[SetupToken, WhoamiResponse]:
    """The access token and whose it is, by a password login (`--password-env`), else typed
    or from the variable and checked with `whoami` (a refused typed one is asked again)."""
    user_id = setup.options["user_id"]
    if user_id is not None and not USER_ID.match(user_id := str(user_id).strip()):
        raise SetupError(
            f"--user-id takes the bot's full Matrix id, such as @aep-bridge:example.org, "
            f"not {user_id}"
        )
    if setup.options["password_env"]:
        return await _login(setup, homeserver, user_id)
    token = ask_token(
        setup,
        flag="--token-env",
        variable=TOKEN_ENV,
        prompt=f"The bot's access token ({_TOKEN_HOW})",
        example="syt_...",
        what="access token",
        hint=_TOKEN_HOW,
    )

    def refused(why: str, code: str | None) -> SetupError:
        if code in REFUSED_TOKEN:
            return SetupError(REFUSED_TOKEN_WHY.format("that"))
        return SetupError(f"cannot ask the homeserver whose the token is: {why}")

    async def whoami(value: str) -> WhoamiResponse:
        async with connected(homeserver, user_id or _UNKNOWN, value) as client:
            bot = await call(client.whoami(), refused, value)
        if user_id is not None and bot.user_id != user_id:
            raise SetupError(f"that access token is {bot.user_id}'s, not {user_id}'s (--user-id)")
        return bot

    bot, token = await check_token(setup, token, whoami, again="The bot's access token, again")
    device = f", device {bot.device_id}" if bot.device_id else ""
    setup.say(f"ok    the access token is {bot.user_id}'s{device}.")
    return token, bot


async def _login(
    setup: SetupContext, homeserver: str, user_id: str | None
) -> tuple[SetupToken, WhoamiResponse]:
    """Log in once with the password in `--password-env`; only the token it returns goes on."""
    variable = str(setup.options["password_env"])
    password = os.environ.get(variable, "")
    if not password:
        raise SetupError(f"${variable} is not set: export {variable}='the bot's password' first")
    user = user_id or setup.ask(
        "The bot account's Matrix user id (such as @aep-bridge:example.org)",
        flag="--user-id ID",
        check=lambda a: (
            None if USER_ID.match(a) else "Give a full id, such as @aep-bridge:example.org."
        ),
    )

    def refused(why: str, code: str | None) -> SetupError:
        if code == "M_FORBIDDEN":
            return SetupError(
                f"the homeserver refused {user} with the password in ${variable}: check both "
                "(nothing written)"
            )
        return SetupError(f"cannot log in as {user}: {why}")

    async with connected(homeserver, user, "") as client:
        login = await call(
            client.login(
                identifier=UserID(user),
                password=password,
                device_name="aep-bridge",
                store_access_token=False,
            ),
            refused,
            password,
        )
    token = SetupToken(str(setup.options["token_env"] or TOKEN_ENV), str(login.access_token), False)
    bot = WhoamiResponse(login.user_id, login.device_id)
    setup.say(
        f"ok    logged in as {bot.user_id}: the access token it gave is kept, the password is not."
    )
    return token, bot


async def _rooms(setup: SetupContext, client: Client, token: str) -> list[RoomView]:
    """The rooms the bot has joined or is invited to, by name; none yet: waits for an invite."""

    async def look() -> list[RoomView]:
        answer = await call(
            client.sync(timeout=0, filter_id=sync_filter()),
            lambda why, _: SetupError(f"cannot list the bot's rooms: {why}"),
            token,
        )
        return sorted(rooms_of(answer), key=lambda r: ((r.name or "~").lower(), r.room_id))

    bot, wait = str(client.mxid), wait_option(setup, most=CODE_LIFE)
    return await wait_until(
        setup,
        look,
        wait=wait,
        most=5.0,
        how=(
            f"The bot is in no room yet. In your Matrix client, invite {bot} to the room the",
            "sessions go to (an unencrypted one: create it with encryption off).",
        ),
        gave_up=f"the bot was invited to no room within {human_duration(wait)}: invite {bot} "
        "to the room for the sessions, then run this again",
    )


def _encrypted(room: RoomView) -> str | None:
    if not room.encrypted:
        return None
    return (
        f"{room.label} is encrypted, and {ENCRYPTION_WHY}: pick an unencrypted room, or create "
        "one with encryption off and invite the bot"
    )


async def _room(setup: SetupContext, client: Client, token: str) -> RoomView:
    """`--room-id`, else picked from a numbered list; an invite is accepted, an encrypted room
    refused."""
    bot = str(client.mxid)
    rooms = await _rooms(setup, client, token)
    if (given := setup.options["room_id"]) is not None:
        room = next((r for r in rooms if r.room_id == given.strip()), None)
        if room is None:
            raise SetupError(
                f"the bot is neither in nor invited to {given}: invite {bot} there, or pick one "
                "of: " + ", ".join(r.label for r in rooms)
            )
    elif all(r.encrypted for r in rooms):
        raise SetupError(
            f"every room the bot is in is encrypted, and {ENCRYPTION_WHY}: create a room with "
            f"encryption off, invite {bot}, then run this again"
        )
    else:
        labels = [r.label + _notes(r) for r in rooms]
        intro = "The rooms the bot is in (each session becomes a thread in the one you pick):"
        prompt = "Which room holds the sessions (a number)?"
        index = ask_choice(
            setup, intro, labels, prompt, flag="--room-id ID", also=lambda i: _encrypted(rooms[i])
        )
        room = rooms[index]
    if problem := _encrypted(room):
        raise SetupError(problem)
    if room.membership == "invite":  # accept it, and look again: the invite showed few events
        label = room.label

        def failed(why: str, _: object) -> SetupError:
            return SetupError(f"cannot accept the invite to {label}: {why}")

        await call(client.join_room_by_id(RoomID(room.room_id)), failed, token)
        room = await call(look_at_room(client, room.room_id), failed, token)
        setup.say(f"ok    accepted the invite to {room.label}.")
        if problem := _encrypted(room):
            raise SetupError(problem)
    setup.say(f"Sessions go to {room.label} (a thread per session).")
    return room


def _notes(room: RoomView) -> str:
    notes = ["invited: the bot joins it"] if room.membership == "invite" else []
    notes += ["encrypted: not supported"] if room.encrypted else []
    return f" ({'; '.join(notes)})" if notes else ""


async def _pair(setup: SetupContext, client: Client, room: RoomView, token: str) -> str:
    """Whoever types a fresh one-time code in `room`, heard by `/sync` long-polls from the
    moment the code is shown."""
    wait = wait_option(setup, most=CODE_LIFE)
    only = sync_filter([room.room_id], timeline=50)

    async def position() -> SyncToken:
        return SyncToken((await client.sync(timeout=0, filter_id=only))["next_batch"])

    since = await call(
        position(),
        lambda why, _: SetupError(
            f"cannot follow {room.label} to hear the code: {why}; or pass --approver ID"
        ),
        token,
    )

    def lost(why: str, _: object) -> SetupError:
        return SetupError(
            f"lost {room.label} while waiting for the code: {why}; run this again, or pass "
            "--approver ID"
        )

    async def heard() -> AsyncIterator[tuple[str, str]]:
        nonlocal since
        deadline = asyncio.get_running_loop().time() + wait
        while (remaining := deadline - asyncio.get_running_loop().time()) > 0:
            poll = min(remaining, _LONG_POLL)
            polled = client.sync(since, int(poll * 1000), filter_id=only)
            answer = await call(polled, lost, token, seconds=poll + CALL_TIMEOUT)
            since = SyncToken(answer.get("next_batch") or since)
            for message in _messages(answer, room.room_id, str(client.mxid)):
                yield message

    async def who(user: str) -> str:
        try:
            name = await call(client.get_displayname(UserID(user)), lambda *_: LookupError())
        except LookupError:  # no name to show: the id alone
            return user
        return f"{name} ({user})" if name else user

    pairing = PairingCode(digits=8, lifetime=wait, clock=asyncio.get_running_loop().time)
    return await pair_from(
        setup, pairing, heard(), where=room.label, wait=wait, how=_USER_ID_HOW, who=who
    )


def _messages(answer: dict[str, Any], room_id: str, bot: str) -> list[tuple[str, str]]:
    """(sender, text) of each new plain message a person (not the bot) wrote, not an edit."""
    room = ((answer.get("rooms") or {}).get("join") or {}).get(room_id) or {}
    found: list[tuple[str, str]] = []
    for event in (room.get("timeline") or {}).get("events") or []:
        content = event.get("content") if isinstance(event, dict) else None
        if (
            isinstance(content, dict)
            and event.get("type") == "m.room.message"
            and isinstance(sender := event.get("sender"), str)
            and sender != bot
            and content.get("msgtype") == "m.text"
            and (content.get("m.relates_to") or {}).get("rel_type") != "m.replace"
            and isinstance(body := content.get("body"), str)
        ):
            found.append((sender, body))
    return found
