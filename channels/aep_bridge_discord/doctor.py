"""`aep-bridge doctor` for a Discord channel: is everything in place for the bot to work?

REST only (no gateway), so it runs beside a running bridge. The permissions it checks are
`permissions`' lists, the ones the setup wizard's invite asks for.
"""

from __future__ import annotations

from typing import Final

import aiohttp
import discord

from aep_bridge import DoctorCheck, doctor_fail, doctor_ok

from .config import DiscordConfig
from .permissions import NEEDED, NEEDED_LOCK, NEEDED_TEXT


def describe(exc: BaseException | None) -> str:
    """A failure in a line: Discord's answer (which never quotes the token), or the error."""
    if exc is None:
        return ""
    if isinstance(exc, discord.HTTPException):
        return f"{exc.status} {exc.text}"
    return f"{type(exc).__name__}: {exc}"


#: what the bot needs in the sessions' channel is in `permissions` (the invite asks for it too)
_FIX_PERMISSIONS: Final = (
    "give the bot's role these permissions on the channel (Edit Channel > Permissions), or "
    "invite it again with them"
)


async def run_doctor(client: discord.Client, config: DiscordConfig) -> list[DoctorCheck]:
    """The token, the Message Content intent, the server, the channel and what the bot may
    do there, the notifications channel: each failure with its fix. REST only."""
    checks: list[DoctorCheck] = []
    try:
        await client.login(config.token.get_secret_value())
    except discord.LoginFailure:
        return [
            doctor_fail(
                "token",
                "Discord refused the token",
                "reset the token in the Developer Portal (Bot > Reset Token) and copy it",
            )
        ]
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        return [
            doctor_fail(
                "token",
                f"cannot reach {config.api_base_url}: {describe(exc)}",
                "check the network, or api_base_url if you use a proxy",
            )
        ]
    me = client.user
    checks.append(doctor_ok("token", f"the bot is {me}"))
    flags = client.application_flags
    if flags.gateway_message_content or flags.gateway_message_content_limited:
        checks.append(doctor_ok("intents", "Message Content is on"))
    else:
        checks.append(
            doctor_fail(
                "intents",
                "the Message Content intent is off: replies to cards cannot be read",
                "turn on Message Content Intent in the Developer Portal (Bot > Privileged "
                "Gateway Intents)",
            )
        )
    try:
        guild = await client.fetch_guild(int(config.guild_id))
        channels = {c.id: c for c in await guild.fetch_channels()}
        member = await guild.fetch_member(me.id if me else 0)
    except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
        checks.append(
            doctor_fail(
                "server",
                f"server {config.guild_id}: {describe(exc)}",
                "invite the bot to the server (Developer Portal > OAuth2 > URL Generator, "
                "scopes bot and applications.commands), and check guild_id",
            )
        )
        return checks
    checks.append(doctor_ok("server", guild.name))
    channel = channels.get(int(config.channel_id))
    if not isinstance(channel, discord.TextChannel | discord.ForumChannel):
        checks.append(
            doctor_fail(
                "channel",
                f"{config.channel_id} is not a text or forum channel of {guild.name}",
                "set channel_id to a text or forum channel (right-click it > Copy Channel ID)",
            )
        )
        return checks
    kind = (
        "forum: a post per session"
        if isinstance(channel, discord.ForumChannel)
        else ("text channel: a thread per session")
    )
    checks.append(doctor_ok("channel", f"#{channel.name} ({kind})"))
    needed = list(NEEDED)
    if isinstance(channel, discord.TextChannel):
        needed += NEEDED_TEXT
    if config.lock_on_end:
        needed += NEEDED_LOCK
    allowed = channel.permissions_for(member)
    missing = [why for name, why in needed if not getattr(allowed, name)]
    names = [name for name, _ in needed if not getattr(allowed, name)]
    if missing:
        checks.append(
            doctor_fail(
                "permissions",
                f"in #{channel.name} the bot may not {'; '.join(missing)} ({', '.join(names)})",
                _FIX_PERMISSIONS,
            )
        )
    else:
        checks.append(doctor_ok("permissions", f"all it needs in #{channel.name}"))
    if config.notifications_channel_id is not None:
        notes = channels.get(int(config.notifications_channel_id))
        if not isinstance(notes, discord.TextChannel):
            checks.append(
                doctor_fail(
                    "notifications",
                    f"{config.notifications_channel_id} is not a text channel of {guild.name}",
                    "set notifications_channel_id to a text channel, or leave it unset",
                )
            )
        elif not (rights := notes.permissions_for(member)).send_messages or not (
            rights.view_channel
        ):
            checks.append(
                doctor_fail(
                    "notifications", f"the bot may not post in #{notes.name}", _FIX_PERMISSIONS
                )
            )
        else:
            checks.append(doctor_ok("notifications", f"#{notes.name}"))
    return checks
