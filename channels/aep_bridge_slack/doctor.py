"""`aep-bridge doctor` for a Slack channel: is everything in place for the app to work?

Web API only: it asks `apps.connections.open` for a Socket Mode URL but never connects to it
(Slack spreads events over an app's open connections, so a doctor connected beside a running
bridge would take some of its events). `NEEDED_SCOPES` is the list the app manifest
(docs/channels/slack-app-manifest.json) grants, and the one checked here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from aep_bridge import DoctorCheck, clean_error, doctor_fail, doctor_ok

if TYPE_CHECKING:
    from .config import SlackConfig

#: the bot token scopes the channel uses, each with what for (the manifest grants exactly these)
NEEDED_SCOPES: Final[tuple[tuple[str, str], ...]] = (
    ("chat:write", "post sessions, cards and heads-ups, and edit them"),
    ("channels:history", "read replies in a public channel's session threads"),
    ("groups:history", "read replies in a private channel's session threads"),
    ("channels:read", "look up a public channel, and list the bot's channels"),
    ("groups:read", "look up a private channel, and list the bot's channels"),
    ("commands", "take /aep"),
    ("usergroups:read", "read the members of approver_roles' user groups"),
    ("users:read", "name who answered"),
    ("im:write", "send a session's owner their heads-ups by direct message"),
)
#: where the manifest is, from the repository's root (the fixes name it)
MANIFEST: Final = "docs/channels/slack-app-manifest.json"
#: Slack's answers to a bot token it does not take
REFUSED: Final = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)
BOT_TOKEN_HOW: Final = (
    "in your app's settings (api.slack.com/apps), Install App > Reinstall to Workspace, then "
    "copy OAuth & Permissions > Bot User OAuth Token (xoxb-...) into $SLACK_BOT_TOKEN"
)
APP_TOKEN_HOW: Final = (
    "in your app's settings, Basic Information > App-Level Tokens > Generate Token and Scopes, "
    "with the scope connections:write, into $SLACK_APP_TOKEN; and turn on Settings > Socket Mode"
)
_SCOPES_HOW: Final = (
    "add them in OAuth & Permissions > Scopes > Bot Token Scopes (or create the app from "
    f"{MANIFEST}), then Install App > Reinstall to Workspace"
)
_NETWORK = (aiohttp.ClientError, OSError, TimeoutError)


def describe(exc: BaseException, *secrets: str) -> str:
    """A failure in a line: Slack's error code (its answers never quote the token), or the
    network's error with any token cut out."""
    if isinstance(exc, SlackApiError):
        error = exc.response.get("error") if exc.response is not None else None
        status = getattr(exc.response, "status_code", None)
        if error == "ratelimited" or status == 429:
            return "rate limited (429): try again in a minute"
        return str(error) if error else f"HTTP {status}"
    return clean_error(exc, *secrets, with_type=True)


def error_code(exc: BaseException) -> str | None:
    """Slack's error code (`invalid_auth`, `channel_not_found`, ...), or None."""
    if isinstance(exc, SlackApiError) and exc.response is not None:
        error = exc.response.get("error")
        return str(error) if error else None
    return None


def granted_scopes(headers: Mapping[str, Any] | None) -> set[str] | None:
    """The scopes in the `x-oauth-scopes` header of a Web API answer; None without it."""
    for key, value in (headers or {}).items():
        if str(key).lower() == "x-oauth-scopes":
            return {s.strip() for s in str(value).split(",") if s.strip()}
    return None


def missing_scopes(granted: set[str]) -> list[tuple[str, str]]:
    """The needed scopes (with what each is for) that `granted` lacks."""
    return [(scope, why) for scope, why in NEEDED_SCOPES if scope not in granted]


async def run_doctor(client: AsyncWebClient, config: SlackConfig) -> list[DoctorCheck]:
    """The bot token and its scopes, the app token (Socket Mode), the bot in the sessions'
    channel and the notifications channel, the approver user groups: each failure with its
    fix. `client` holds the bot token and `config.api_base_url`."""
    bot = config.bot_token.get_secret_value()
    app = config.app_token.get_secret_value()
    checks: list[DoctorCheck] = []
    try:
        me = await client.auth_test()
    except SlackApiError as exc:
        code = error_code(exc)
        refused = code in REFUSED
        return [
            doctor_fail(
                "bot_token",
                "Slack refused the bot token" if refused else describe(exc),
                BOT_TOKEN_HOW if refused else "check bot_token, and api_base_url",
            ),
            await _app_token(config, app, bot),
        ]
    except _NETWORK as exc:
        return [
            doctor_fail(
                "bot_token",
                f"cannot reach {config.api_base_url}: {describe(exc, bot, app)}",
                "check the network, or api_base_url if you use GovSlack or a proxy",
            )
        ]
    bot_name = str(me.get("user") or "the bot")
    team = str(me.get("team") or "the workspace")
    checks.append(doctor_ok("bot_token", f"@{bot_name} in {team}"))
    checks.append(_scopes(granted_scopes(me.headers)))
    checks.append(await _app_token(config, app, bot))
    checks.append(
        await _channel(client, "channel", config.channel_id, bot_name, "a thread per session")
    )
    if config.notifications_channel_id is not None:
        checks.append(
            await _channel(
                client, "notifications", config.notifications_channel_id, bot_name, "heads-ups"
            )
        )
    if config.approver_roles:
        checks.append(await _groups(client, list(config.approver_roles), team))
    return checks


def _scopes(granted: set[str] | None) -> DoctorCheck:
    if granted is None:
        return doctor_ok("scopes", "not checked: Slack's answer named no scopes (x-oauth-scopes)")
    missing = missing_scopes(granted)
    if not missing:
        return doctor_ok("scopes", "all it needs")
    return doctor_fail(
        "scopes",
        "the bot token lacks " + "; ".join(f"{scope} (to {why})" for scope, why in missing),
        _SCOPES_HOW,
    )


async def _app_token(config: SlackConfig, app: str, bot: str) -> DoctorCheck:
    """`apps.connections.open` with the app token: a Socket Mode URL, never connected to."""
    web = AsyncWebClient(base_url=config.api_base_url)
    try:
        await web.apps_connections_open(app_token=app)
    except SlackApiError as exc:
        return doctor_fail("app_token", f"Socket Mode cannot open: {describe(exc)}", APP_TOKEN_HOW)
    except _NETWORK as exc:
        return doctor_fail(
            "app_token",
            f"cannot reach {config.api_base_url}: {describe(exc, bot, app)}",
            "check the network, or api_base_url if you use GovSlack or a proxy",
        )
    return doctor_ok("app_token", "Socket Mode opens")


async def _channel(
    client: AsyncWebClient, name: str, channel_id: str, bot_name: str, what: str
) -> DoctorCheck:
    """The channel exists, the bot is in it, and it is not archived."""
    invite = f"in the channel, type /invite @{bot_name}"
    try:
        found = await client.conversations_info(channel=channel_id)
    except SlackApiError as exc:
        code = error_code(exc)
        if code in ("channel_not_found", "not_in_channel"):
            return doctor_fail(
                name,
                f"{channel_id}: no such channel the bot can see ({code})",
                f"check the id (the channel's details, at the bottom: Channel ID); for a "
                f"private channel, {invite} first",
            )
        return doctor_fail(name, f"{channel_id}: {describe(exc)}")
    except _NETWORK as exc:
        return doctor_fail(name, f"{channel_id}: {describe(exc)}")
    channel: dict[str, Any] = dict(found.get("channel") or {})
    label = f"#{channel.get('name') or channel_id}"
    if channel.get("is_archived"):
        return doctor_fail(name, f"{label} is archived", "unarchive it, or pick another channel")
    if channel.get("is_member") is False:
        return doctor_fail(
            name, f"the bot is not in {label}", f"{invite[0].upper()}{invite[1:]} ({label})"
        )
    return doctor_ok(name, f"{label} ({what})")


async def _groups(client: AsyncWebClient, groups: list[str], team: str) -> DoctorCheck:
    """Every `approver_roles` user group exists and its members can be read."""
    sizes: list[str] = []
    for group in groups:
        try:
            found = await client.usergroups_users_list(usergroup=group)
        except SlackApiError as exc:
            code = error_code(exc)
            if code == "missing_scope":
                fix = f"add the scope usergroups:read: {_SCOPES_HOW}"
            else:
                fix = (
                    "approver_roles lists user group ids (S...): People > User groups, open "
                    "the group; its id is in the page's URL"
                )
            return doctor_fail(
                "approver_roles", f"user group {group} in {team}: {describe(exc)}", fix
            )
        except _NETWORK as exc:
            return doctor_fail("approver_roles", f"user group {group}: {describe(exc)}")
        members = found.get("users") or []
        sizes.append(f"{group} ({len(members)} member{'s' if len(members) != 1 else ''})")
    return doctor_ok("approver_roles", ", ".join(sizes))
