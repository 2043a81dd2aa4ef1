"""Heads-ups by direct message: a session's owner (`NotificationMessage.recipients`, Slack
user ids) hears of their agent's question privately, in the bot's DM with them.

The DM is opened once (`conversations.open`, Tier 3) and its id kept in the channel's state,
so a heads-up costs one `chat.postMessage`, in that DM. A person Slack will not let the bot
write to (an id that is wrong, a bot's, a deactivated account; the app's Messages tab off;
the bot token without `im:write`) is no error for the outbox: the send returns None, one
warning says once what to fix, and the channel posts the heads-up in the notifications
channel instead. A rate limit or Slack's own failure raises as any call does (the outbox
waits and tries the heads-up again; the DMs already sent are kept, so none is sent twice).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, Final, Protocol

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from aep_bridge import ChannelError, ChannelState

from . import look

log = logging.getLogger(__name__)

#: where a person's Slack id goes in the config (`{channel}`: the channel's name)
WHERE: Final = "`people.<name>.{channel}`"
#: how to find a member ID in Slack
MEMBER_ID: Final = "their profile > ⋮ > Copy member ID"
#: Slack's refusals of a DM that a person can fix, each with the fix: the heads-up goes to
#: the notifications channel instead
UNREACHABLE: Final = {
    "user_not_found": f"no such member in this workspace: put their member ID ({MEMBER_ID}) "
    f"in {WHERE}",
    "user_not_visible": f"the bot may not see this member: check the member ID in {WHERE}",
    "cannot_dm_bot": f"that id is a bot's: put the person's own member ID ({MEMBER_ID}) in {WHERE}",
    "user_disabled": f"the account is deactivated: put their current member ID in {WHERE}",
    "messages_tab_disabled": "the app cannot message people: turn on App Home > Show Tabs > "
    "Messages Tab in the app's settings (api.slack.com/apps)",
    "missing_scope": "the bot token lacks im:write: add it (OAuth & Permissions > Bot Token "
    "Scopes, as docs/channels/slack-app-manifest.json has it), then reinstall the app",
}
#: a DM kept in the state that Slack no longer knows: opened again, once
GONE: Final = frozenset({"channel_not_found", "is_archived"})


class Adapter(Protocol):
    """What direct messages use of their `SlackChannel` (which imports this module)."""

    @property
    def instance_name(self) -> str: ...
    @property
    def client(self) -> AsyncWebClient: ...
    def channel_state(self) -> ChannelState: ...
    async def post_raw(self, channel: str, shown: look.Look) -> str: ...
    async def call_raw(self, call: Awaitable[Any]) -> Any: ...
    def mapped(self, exc: SlackApiError) -> ChannelError: ...


class DirectMessages:
    """The bot's DMs with people, and the people it could not reach (warned once each)."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self._warned: set[tuple[str, str]] = set()

    async def send(self, user: str, shown: look.Look, fallback: str) -> tuple[str, str] | None:
        """Post `shown` in the bot's DM with `user`: (the DM's id, the message's ts), or None
        when Slack refuses that person (logged once; `fallback` names where it goes instead)."""
        state = self.adapter.channel_state()
        key = f"im:{user}"
        kept = await state.get(key)
        for attempt in (0, 1):
            try:
                im = kept if kept is not None and attempt == 0 else await self._open(user)
                if im != kept:
                    await state.set(key, im)
                return im, await self.adapter.post_raw(im, shown)
            except SlackApiError as exc:
                code = _code(exc)
                if code in GONE and kept is not None and attempt == 0:
                    kept = None  # closed or gone since: open it afresh
                    continue
                if code in UNREACHABLE or code in GONE:
                    self._warn(user, code or "", fallback)
                    return None
                raise self.adapter.mapped(exc) from None
        return None  # not reached: the second attempt returns or raises

    async def _open(self, user: str) -> str:
        """The id of the bot's DM with `user` (`conversations.open`: Slack opens it, or gives
        the one open)."""
        opened = await self.adapter.call_raw(self.adapter.client.conversations_open(users=user))
        channel: Any = opened.get("channel") or {}
        return str(channel["id"])

    def _warn(self, user: str, code: str, fallback: str) -> None:
        if (user, code) in self._warned:
            return
        self._warned.add((user, code))
        fix = UNREACHABLE.get(code) or f"the DM is gone: check the member ID in {WHERE}"
        log.warning(
            "slack %s: cannot send a direct message to %s (%s): %s; their heads-ups go to "
            "the notifications channel %s instead",
            self.adapter.instance_name,
            user,
            code,
            fix.format(channel=self.adapter.instance_name),
            fallback,
        )


def _code(exc: SlackApiError) -> str | None:
    response = exc.response
    error = response.get("error") if response is not None else None
    return str(error) if error else None
