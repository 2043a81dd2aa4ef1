"""`aep-bridge setup matrix`: from a bot account on a homeserver to a checked channel block.

The wizard checks that the homeserver answers (`/versions`), takes the bot's access token
(typed, or from `--token-env VAR`, or made by logging in once with `--password-env VAR`: only
the token the login returns is kept, never the password) and checks it with `whoami`; lists
the rooms the bot has joined or is invited to, to pick the sessions' room from (accepting an
invite, refusing an encrypted room); and pairs the first approver: it prints a one-time code,
and whoever types it in the room (heard by `/sync` long-polls) becomes the first approver. It
writes the block with the token as `${MATRIX_ACCESS_TOKEN}` (never its value) and runs the
channel's doctor. Every question has a flag, for scripts: `--homeserver`, `--token-env` or
`--user-id` with `--password-env`, `--room-id`, `--approver`, `--yes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from mautrix.api import Method, Path
from mautrix.client import Client
from mautrix.types import RoomID, UserID
from yarl import URL

from aep_bridge import (
    PairingCode,
    PairingVerdict,
    SetupContext,
    SetupError,
    SetupOption,
    SetupToken,
    SetupWizard,
    ask_number,
    ask_token,
    check_token,
    check_with_doctor,
    human_duration,
    keep_tokens,
    poll_times,
    token_env_option,
    wait_option,
    write_channel_block,
)

from .client import RateAwareAPI, close_client, make_client
from .config import _USER  # the config's own test of a user id
from .doctor import (
    ENCRYPTION_WHY,
    FAILURES,
    REFUSED_TOKEN,
    RoomView,
    describe,
    errcode,
    look_at_room,
    rooms_of,
    sync_filter,
)

#: the variable the token is read from at run time, unless `--token-env` names another
TOKEN_ENV: Final = "MATRIX_ACCESS_TOKEN"
#: how long the pairing code is taken (and the longest `--wait`): ten minutes
CODE_LIFE: Final = 600.0
CODE_DIGITS: Final = 8
#: the longest one `/sync` long-poll waits while the code is out, in seconds
_LONG_POLL: Final = 30.0
#: seconds a homeserver has for one call of the wizard's (a long-poll gets this on top)
_CALL: Final = 20.0
_USER_ID_HOW: Final = "a person's full Matrix id, such as @ada:example.org (Element: click them)"
_TOKEN_HOW: Final = (
    "Element, logged in as the bot: Settings > Help & About > Access Token; or pass "
    "--user-id and --password-env to log in once"
)


@dataclass(frozen=True, slots=True)
class _Bot:
    """Whose the token is, by `whoami` (or by the login that made it)."""

    user_id: str
    device_id: str | None


@dataclass(frozen=True, slots=True)
class _Room:
    room_id: str
    view: RoomView

    @property
    def label(self) -> str:
        return f"{self.view.name} ({self.room_id})" if self.view.name else self.room_id


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
            "the homeserver's client-server URL, such as https://matrix.example.org, instead "
            "of asking",
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
        SetupOption(
            "--approver",
            "a Matrix user id (@name:server) allowed to answer, instead of the pairing code",
            metavar="ID",
            repeat=True,
        ),
        SetupOption(
            "--wait",
            "seconds to wait for the bot to be invited to a room, and for the code (default "
            f"and most {CODE_LIFE:.0f}: the code is taken for ten minutes)",
            metavar="SECONDS",
            kind=float,
            default=CODE_LIFE,
        ),
    )

    async def run(self, setup: SetupContext) -> bool:
        homeserver = await _homeserver(setup)
        token, bot = await _token(setup, homeserver)
        client = make_client(homeserver, bot.user_id, token.value, bot.device_id)
        try:
            room = await _room(setup, client, token.value)
            approvers = await _approvers(setup, client, room, bot.user_id, token.value)
        finally:
            await close_client(client)
        block: dict[str, Any] = {
            "homeserver": homeserver,
            "user_id": bot.user_id,
            "access_token": token.reference,
            "room_id": room.room_id,
        }
        if bot.device_id:
            block["device_id"] = bot.device_id
        block["approvers"] = approvers
        write_channel_block(setup, block)
        keep_tokens(setup, (token,), example="syt_...")
        return await check_with_doctor(setup, (token,), becomes=f"a thread in {room.label}")


# -- the homeserver ----------------------------------------------------------------------------


def _url_problem(text: str) -> str | None:
    """Why `text` is not a homeserver URL, or None."""
    try:
        parts = urlsplit(text.strip())
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return "Give an http:// or https:// URL, such as https://matrix.example.org."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Give an http:// or https:// URL, such as https://matrix.example.org."
    if parts.query or parts.fragment:
        return "Give the URL without a query (?...) or a fragment (#...)."
    return None


async def _homeserver(setup: SetupContext) -> str:
    """`--homeserver`, else asked; checked by asking it for `/versions`."""
    given = setup.options["homeserver"]
    if given is not None:
        problem = _url_problem(given)
        if problem is not None:
            raise SetupError(f"--homeserver {given}: {problem}")
        url = str(given)
    else:
        url = setup.ask(
            "The homeserver's URL (the address your Matrix client signs in to, such as "
            "https://matrix.example.org)",
            flag="--homeserver URL",
            check=_url_problem,
        )
    url = url.strip().rstrip("/")
    api = RateAwareAPI(base_url=URL(url), default_retry_count=0)
    try:
        async with asyncio.timeout(_CALL):
            answer = await api.request(Method.GET, Path.versions)
    except FAILURES as exc:
        raise SetupError(
            f"{url} does not answer as a Matrix homeserver ({describe(exc)}): give the "
            "client-server URL your Matrix client signs in to, without /_matrix"
        ) from None
    finally:
        with contextlib.suppress(Exception):
            await api.session.close()
    versions = answer.get("versions") if isinstance(answer, dict) else None
    newest = f" (Matrix {versions[-1]})" if isinstance(versions, list) and versions else ""
    setup.say(f"ok    {url} is a Matrix homeserver{newest}.")
    return url


# -- the token ---------------------------------------------------------------------------------


async def _token(setup: SetupContext, homeserver: str) -> tuple[SetupToken, _Bot]:
    """The access token and whose it is: by a password login (`--password-env`), else from
    the variable, else typed, checked with `whoami` (a refused typed one is asked again)."""
    user_id = _user_option(setup)
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

    async def whoami(value: str) -> _Bot:
        return await _whoami(homeserver, value, user_id)

    bot, token = await check_token(setup, token, whoami, again="The bot's access token, again")
    device = f", device {bot.device_id}" if bot.device_id else ""
    setup.say(f"ok    the access token is {bot.user_id}'s{device}.")
    return token, bot


def _user_option(setup: SetupContext) -> str | None:
    given = setup.options["user_id"]
    if given is None:
        return None
    if not _USER.match(given.strip()):
        raise SetupError(
            f"--user-id takes the bot's full Matrix id, such as @aep-bridge:example.org, "
            f"not {given}"
        )
    return str(given).strip()


async def _whoami(homeserver: str, token: str, user_id: str | None) -> _Bot:
    """Whose `token` is; a `SetupError` that never quotes it."""
    client = make_client(homeserver, user_id or "@aep-bridge:unknown", token)
    try:
        async with asyncio.timeout(_CALL):
            me = await client.whoami()
    except FAILURES as exc:
        if errcode(exc) in REFUSED_TOKEN:
            raise SetupError(
                "the homeserver does not take that access token (logged out, expired, or "
                "another server's)"
            ) from None
        raise SetupError(
            f"cannot ask the homeserver whose the token is: {describe(exc, token)}"
        ) from None
    finally:
        await close_client(client)
    if user_id is not None and str(me.user_id) != user_id:
        raise SetupError(f"that access token is {me.user_id}'s, not {user_id}'s (--user-id)")
    return _Bot(str(me.user_id), str(me.device_id) if me.device_id else None)


async def _login(
    setup: SetupContext, homeserver: str, user_id: str | None
) -> tuple[SetupToken, _Bot]:
    """Log in once with the password in `--password-env`: the token it returns, never the
    password, goes on (into the env file, when the person says so)."""
    variable = str(setup.options["password_env"])
    password = os.environ.get(variable, "")
    if not password:
        raise SetupError(f"${variable} is not set: export {variable}='the bot's password' first")
    if user_id is None:
        user_id = setup.ask(
            "The bot account's Matrix user id (such as @aep-bridge:example.org)",
            flag="--user-id ID",
            check=lambda a: (
                None if _USER.match(a) else "Give a full id, such as @aep-bridge:example.org."
            ),
        )
    client = make_client(homeserver, user_id, "")
    try:
        async with asyncio.timeout(_CALL):
            login = await client.login(
                identifier=UserID(user_id),
                password=password,
                device_name="aep-bridge",
                store_access_token=False,
            )
    except FAILURES as exc:
        if errcode(exc) == "M_FORBIDDEN":
            raise SetupError(
                f"the homeserver refused {user_id} with the password in ${variable}: check both "
                "(nothing written)"
            ) from None
        raise SetupError(f"cannot log in as {user_id}: {describe(exc, password)}") from None
    finally:
        await close_client(client)
    variable_for_token = str(setup.options["token_env"] or TOKEN_ENV)
    token = SetupToken(variable_for_token, str(login.access_token), False)
    bot = _Bot(str(login.user_id), str(login.device_id) if login.device_id else None)
    setup.say(
        f"ok    logged in as {bot.user_id}: the access token it gave is kept, the password is not."
    )
    return token, bot


# -- the room ----------------------------------------------------------------------------------


async def _rooms(client: Client, token: str) -> list[_Room]:
    """The rooms the bot has joined or is invited to, by name."""
    try:
        async with asyncio.timeout(_CALL):
            answer = await client.sync(timeout=0, filter_id=sync_filter())  # type: ignore[arg-type]
    except FAILURES as exc:
        raise SetupError(f"cannot list the bot's rooms: {describe(exc, token)}") from None
    found = [_Room(room_id, view) for room_id, view in rooms_of(answer).items()]
    return sorted(found, key=lambda r: ((r.view.name or "~").lower(), r.room_id))


async def _some_rooms(setup: SetupContext, client: Client, token: str, bot: str) -> list[_Room]:
    """The bot's rooms; none yet: says how to invite it, and waits."""
    found = await _rooms(client, token)
    if found:
        return found
    wait = wait_option(setup, most=CODE_LIFE)
    setup.say("")
    setup.say(f"The bot is in no room yet. In your Matrix client, invite {bot} to the room the")
    setup.say("sessions go to (an unencrypted one: create it with encryption off).")
    setup.say(f"Waiting for it (up to {human_duration(wait)}; Ctrl-C stops)...")
    async for _ in poll_times(wait, first=0.25, most=5.0):
        found = await _rooms(client, token)
        if found:
            return found
    raise SetupError(
        f"the bot was invited to no room within {human_duration(wait)}: invite {bot} to the "
        "room for the sessions, then run this again"
    )


def _encrypted_problem(room: _Room) -> str:
    return (
        f"{room.label} is encrypted, and {ENCRYPTION_WHY}: pick an unencrypted room, or create "
        "one with encryption off and invite the bot"
    )


async def _room(setup: SetupContext, client: Client, token: str) -> _Room:
    """The sessions' room: `--room-id`, else picked from the numbered list; an invite is
    accepted; an encrypted room is refused."""
    bot = str(client.mxid)
    rooms = await _some_rooms(setup, client, token, bot)
    given = setup.options["room_id"]
    if given is not None:
        room = next((r for r in rooms if r.room_id == given.strip()), None)
        if room is None:
            raise SetupError(
                f"the bot is neither in nor invited to {given}: invite {bot} there, or pick one "
                "of: " + ", ".join(r.label for r in rooms)
            )
        if room.view.encrypted:
            raise SetupError(_encrypted_problem(room))
    else:
        if all(r.view.encrypted for r in rooms):
            raise SetupError(
                "every room the bot is in is encrypted, and "
                f"{ENCRYPTION_WHY}: create a room with encryption off, invite {bot}, then run "
                "this again"
            )
        setup.say("")
        setup.say("The rooms the bot is in (each session becomes a thread in the one you pick):")
        for number, each in enumerate(rooms, 1):
            notes = []
            if each.view.membership == "invite":
                notes.append("invited: the bot joins it")
            if each.view.encrypted:
                notes.append("encrypted: not supported")
            more = f" ({'; '.join(notes)})" if notes else ""
            setup.say(f"  {number}. {each.label}{more}")
        index = ask_number(
            setup,
            "Which room holds the sessions (a number)?",
            len(rooms),
            default="1" if len(rooms) == 1 else None,
            flag="--room-id ID",
            also=lambda i: _encrypted_problem(rooms[i]) if rooms[i].view.encrypted else None,
        )
        room = rooms[index]
    if room.view.membership == "invite":
        room = await _join(setup, client, room, token)
    setup.say(f"Sessions go to {room.label} (a thread per session).")
    return room


async def _join(setup: SetupContext, client: Client, room: _Room, token: str) -> _Room:
    """Accept the bot's invite to `room`, and look at it again now the bot is in (the invite
    showed only a few of its state events)."""
    try:
        async with asyncio.timeout(_CALL):
            await client.join_room_by_id(RoomID(room.room_id))
            view = await look_at_room(client, room.room_id)
    except FAILURES as exc:
        raise SetupError(
            f"cannot accept the invite to {room.label}: {describe(exc, token)}"
        ) from None
    joined = _Room(room.room_id, view)
    setup.say(f"ok    accepted the invite to {joined.label}.")
    if view.encrypted:
        raise SetupError(_encrypted_problem(joined))
    return joined


# -- the first approver ------------------------------------------------------------------------


async def _approvers(
    setup: SetupContext, client: Client, room: _Room, bot: str, token: str
) -> list[str]:
    """`--approver`, else whoever types the pairing code in the room."""
    given = [str(a).strip() for a in setup.options["approver"]]
    if given:
        wrong = [a for a in given if not _USER.match(a)]
        if wrong:
            raise SetupError(f"--approver takes {_USER_ID_HOW}, not {', '.join(wrong)}")
        return given
    return [await _pair(setup, client, room, bot, token)]


async def _pair(setup: SetupContext, client: Client, room: _Room, bot: str, token: str) -> str:
    """The user id of whoever types a fresh one-time code in `room`, heard by `/sync`
    long-polls from the moment the code is shown; every other message (a wrong code, chatter,
    the bot's own, an edit) is passed over, its text never shown."""
    wait = wait_option(setup, most=CODE_LIFE)
    only = sync_filter([room.room_id], timeline=50)
    try:
        async with asyncio.timeout(_CALL):
            since = str((await client.sync(timeout=0, filter_id=only))["next_batch"])  # type: ignore[arg-type]
    except (*FAILURES, KeyError) as exc:
        raise SetupError(
            f"cannot follow {room.label} to hear the code: {describe(exc, token)}; or pass "
            "--approver ID"
        ) from None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    pairing = PairingCode(digits=CODE_DIGITS, lifetime=wait, clock=loop.time)
    pairing.show(setup, room.label, wait)
    while (remaining := deadline - loop.time()) > 0:
        poll = min(remaining, _LONG_POLL)
        try:
            async with asyncio.timeout(poll + _CALL):
                answer = await client.sync(
                    since=since,  # type: ignore[arg-type]
                    timeout=int(poll * 1000),
                    filter_id=only,  # type: ignore[arg-type]
                )
        except FAILURES as exc:
            raise SetupError(
                f"lost {room.label} while waiting for the code: {describe(exc, token)}; run "
                "this again, or pass --approver ID"
            ) from None
        since = str(answer.get("next_batch") or since)
        for sender, body in _messages(answer, room.room_id, bot):
            verdict = pairing.check(body)
            if verdict is PairingVerdict.TAKEN:
                pairing.say_taken(setup, await _who(client, sender))
                return sender
            if verdict is PairingVerdict.WRONG:
                pairing.say_wrong(setup, await _who(client, sender))
    raise pairing.timed_out(room.label, wait, _USER_ID_HOW)


def _messages(answer: dict[str, Any], room_id: str, bot: str) -> list[tuple[str, str]]:
    """(sender, text) of each new message a person wrote in `room_id`: not the bot's, not an
    edit, not a notice."""
    room = ((answer.get("rooms") or {}).get("join") or {}).get(room_id) or {}
    found: list[tuple[str, str]] = []
    for event in (room.get("timeline") or {}).get("events") or []:
        content = event.get("content") if isinstance(event, dict) else None
        if (
            not isinstance(content, dict)
            or event.get("type") != "m.room.message"
            or event.get("sender") == bot
            or not isinstance(event.get("sender"), str)
            or content.get("msgtype") != "m.text"
            or (content.get("m.relates_to") or {}).get("rel_type") == "m.replace"
            or not isinstance(content.get("body"), str)
        ):
            continue
        found.append((event["sender"], content["body"]))
    return found


async def _who(client: Client, user: str) -> str:
    """A person as `Ada (@ada:example.org)`, or their id when the homeserver says no more."""
    try:
        async with asyncio.timeout(_CALL):
            name = await client.get_displayname(UserID(user))
    except FAILURES:
        return user
    return f"{name} ({user})" if name else user
