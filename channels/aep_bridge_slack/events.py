"""What people do in Slack, as the core hears it: slack-bolt's listeners of a `SlackChannel`.

Every listener acks and returns at once, the rest of its work a task of the adapter's: the
app runs with `process_before_response`, so bolt sends the ack the moment a listener returns
(without it, bolt looks for the ack only every 10 ms, which was most of a press's time to the
ack). The work then hands what happened to the core by card id: a
press (`resolve_permission`), a form's "Fill in" (`may_answer`, then the modal) and its
submission (`answer_form`), words in a session's thread (`answer_text` or
`handle_incoming_message`), `/aep`. Who did it is a `ChannelUser`: their id, their name, and
the user groups of `approver_roles` they are in (asked of Slack at most once a minute). A
refusal is told to that person alone (an ephemeral message in the thread).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import aiohttp
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from aep_bridge import (
    BridgeCore,
    CardRecords,
    ChannelUser,
    IncomingMessage,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
    SessionThreads,
    Tasks,
)

from . import look, modal, mrkdwn
from .config import SlackConfig

#: seconds a user group's members are taken as known (`approver_roles`)
GROUPS_TTL: Final = 60.0
#: `/aep` and its verbs
COMMAND: Final = "/aep"
VERBS: Final = ("sessions", "status", "cancel", "pause", "resume", "away", "back")


class Adapter(Protocol):
    """What the listeners use of their `SlackChannel` (which imports them: a protocol,
    not an import back)."""

    core: BridgeCore
    config: SlackConfig
    tasks: Tasks

    @property
    def instance_name(self) -> str: ...
    @property
    def client(self) -> AsyncWebClient: ...
    @property
    def cards(self) -> CardRecords[dict[str, Any]]: ...
    @property
    def sessions(self) -> SessionThreads: ...
    def permalink(self, channel: str, ts: str, thread: str | None = None) -> str: ...
    def channel_of(self, session_id: str) -> str: ...
    def failed(self, what: str, exc: BaseException) -> None: ...
    async def pass_on(
        self, session_id: str | None, thread_id: str | None, user: ChannelUser, text: str
    ) -> None: ...


class Listeners:
    """The listeners of one adapter's bolt app, and who is who (names, user groups)."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self._names: dict[str, str] = {}
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}

    def listen(self, app: AsyncApp) -> None:
        """Every kind of envelope the app is sent has a listener: bolt acks nothing no
        listener matches, and Slack then sends it again (or shows the person an error)."""
        app.action(look.ANSWER_ACTION)(self._on_answer)  # `aep_answer_{index}`
        app.action(look.FORM_ACTION)(self._on_form)
        app.view(look.FORM_CALLBACK)(self._on_submit)
        app.command(COMMAND)(self._on_command)
        app.event("message")(self._on_message)
        app.action(re.compile(".*"))(_just_ack)  # a button of another app version
        app.view(re.compile(".*"))(_just_ack)
        app.view_closed(re.compile(".*"))(_just_ack)

    async def _on_answer(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        """An option's button: acked at once, then handed to the core by card id."""
        await ack()
        self.adapter.tasks.spawn(self._answer(body))

    async def _answer(self, body: dict[str, Any]) -> None:
        try:
            action = body["actions"][0]
            key, _, index = str(action.get("value", "")).rpartition(":")
            user = await self._user(body.get("user") or {})
            option = int(index) if index.isdigit() else None
            resolution = await self.adapter.cards.press(self.adapter.core, key, option, user)
            if not resolution.accepted:  # a refusal is logged by the core; the presser is told
                await self._tell(body, user.id, resolution.message)
        except Exception as exc:  # never into bolt's log, which may quote the payload
            self.adapter.failed("a press", exc)

    async def _on_form(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        """A form's "Fill in": asked of the core first (a stranger opens nothing), then the
        form as a modal, for the person who pressed (within Slack's 3 s of the press)."""
        await ack()
        self.adapter.tasks.spawn(self._form(body))

    async def _form(self, body: dict[str, Any]) -> None:
        try:
            key = str(body["actions"][0].get("value", ""))
            card_id = await self.adapter.cards.of_key(key)
            user = await self._user(body.get("user") or {})
            refused = await self.adapter.core.may_answer(card_id, user) if card_id else None
            card = await self.adapter.cards.get(card_id or "")
            if refused is None and (card is None or not card.get("request")):
                refused = Resolution(status=ResolutionStatus.UNKNOWN)
            if refused is not None:
                await self._tell(body, user.id, refused.message)
                return
            assert card is not None
            request = PermissionRequest.model_validate(card["request"])
            await self.adapter.client.views_open(
                trigger_id=body["trigger_id"], view=modal.modal_view(request, key)
            )
        except Exception as exc:
            self.adapter.failed("a form", exc)

    async def _on_submit(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        """A form's modal submitted: the values read (a wrong one goes back in the ack,
        shown under its field), then the answer to the core, which checks approvers."""
        view = body.get("view") or {}
        card_id = await self.adapter.cards.of_key(str(view.get("private_metadata", "")))
        card = await self.adapter.cards.get(card_id or "")
        request = None
        if card_id is not None and card is not None and card.get("request"):
            request = PermissionRequest.model_validate(card["request"])
        values = (
            modal.form_values(request, (view.get("state") or {}).get("values") or {})
            if request is not None
            else None
        )
        if isinstance(values, modal.FormErrors):
            await ack(response_action="errors", errors=dict(values))
            return
        await ack()  # who submitted is looked up after: it may ask Slack (user groups)
        self.adapter.tasks.spawn(self._submitted(body, card_id, card, values))

    async def _submitted(
        self,
        body: dict[str, Any],
        card_id: str | None,
        card: dict[str, Any] | None,
        values: dict[str, Any] | None,
    ) -> None:
        try:
            user = await self._user(body.get("user") or {})
            if card_id is None or values is None:
                unknown = Resolution(status=ResolutionStatus.UNKNOWN)
                await self._ephemeral_card(card, user.id, unknown.message)
                return
            resolution = await self.adapter.core.answer_form(card_id, values, user)
            if not resolution.accepted:
                await self._ephemeral_card(card, user.id, resolution.message)
        except Exception as exc:
            self.adapter.failed("a form", exc)

    async def _on_message(self, body: dict[str, Any]) -> None:
        """Words in a session's thread: bolt acks the event as this returns."""
        self.adapter.tasks.spawn(self._message(body))

    async def _message(self, body: dict[str, Any]) -> None:
        """The answer to the thread's one open question that takes words, else the core's
        (a chat command, a message to the agent)."""
        event = body.get("event") or {}
        if event.get("subtype") or event.get("bot_id"):
            return  # an edit, a join, a bot's own message
        thread = event.get("thread_ts")
        if not thread or thread == event.get("ts"):
            return  # not in a thread
        try:
            session = await self.adapter.sessions.session_of(thread)
            text = _unescape(str(event.get("text") or "")).strip()
            if session is None or not text:
                return
            channel = self.adapter.channel_of(session)
            if event.get("channel") != channel:
                return  # a thread of the same `ts` elsewhere: not the session's
            user = await self._user({"id": event.get("user", "")})
            said = IncomingMessage(
                channel=self.adapter.instance_name,
                session_id=session,
                thread_id=thread,
                user=user,
                text=text,
            )
            answered = await self.adapter.cards.words(self.adapter.core, said)
            if answered is not None and not answered[1].accepted:
                await self._ephemeral(channel, user.id, answered[1].message, thread=thread)
        except Exception as exc:
            self.adapter.failed("a message", exc)

    async def _on_command(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any]) -> None:
        """`/aep VERB [session]`: answered at once, privately; a session's verb then goes to
        the core as that session's chat command (it checks approvers, answers in the
        thread)."""
        config = self.adapter.config
        asked_in = body.get("channel_id")
        live = await self.adapter.sessions.live()
        if asked_in != config.notifications_channel_id:
            # each channel's people see its own sessions: where a route placed a team's
            # sessions, the other teams' stay out of its answers
            live = {s: kept for s, kept in live.items() if self.adapter.channel_of(s) == asked_in}
        if asked_in not in (config.channel_id, config.notifications_channel_id) and not live:
            # the sessions are shown to their channels: elsewhere in the workspace, someone
            # who cannot read their threads learns nothing (not even their names)
            await ack(text=f"{COMMAND} answers in the agents' channel, <#{config.channel_id}>.")
            return
        words = str(body.get("text") or "").split()
        verb = words[0].lower() if words else "sessions"
        if verb not in VERBS:
            await ack(text=f"Usage: {COMMAND} {'|'.join(VERBS)} [session]")
            return
        if verb == "sessions":
            await ack(text=self._sessions_text(live))
            return
        found = _named(live, " ".join(words[1:]))
        if found is None:
            await ack(
                text=(
                    f"Which session? {COMMAND} {verb} NAME, with one of:\n"
                    + self._sessions_text(live)
                )
            )
            return
        session, (thread, name) = found
        await ack(
            text=f"/{verb} for {mrkdwn.escape(name)}: asked; the answer follows in its thread."
        )
        self.adapter.tasks.spawn(self._command(body, verb, session, thread))

    async def _command(self, body: dict[str, Any], verb: str, session: str, thread: str) -> None:
        try:
            user = await self._user(
                {"id": body.get("user_id", ""), "username": body.get("user_name")}
            )
            await self.adapter.pass_on(session, thread, user, f"/{verb}")
        except Exception as exc:
            self.adapter.failed("a command", exc)

    def _sessions_text(self, live: dict[str, list[str]]) -> str:
        if not live:
            return "No agent session is running."
        lines = [
            f"• <{self.adapter.permalink(self.adapter.channel_of(session), thread)}|"
            f"{mrkdwn.escape(name)}>"
            for session, (thread, name) in live.items()
        ]
        return "Sessions:\n" + "\n".join(lines)

    # -- people ----------------------------------------------------------------------------

    async def _user(self, who: dict[str, Any]) -> ChannelUser:
        """Who pressed or wrote: their user id, their name as Slack shows it (`users.info`,
        asked once a person; a payload carries only their handle, the fallback), and the
        user groups of `approver_roles` they are in."""
        user_id = str(who.get("id") or "")
        name = self._names.get(user_id)
        if name is None and user_id:
            name = await self._name(user_id)
            if name:
                self._names[user_id] = name
        name = name or who.get("username") or who.get("name")
        roles: list[str] = []
        for group in self.adapter.config.approver_roles:
            if user_id in await self._members(group):
                roles.append(group)
        return ChannelUser(id=user_id, name=str(name) if name else None, roles=tuple(roles))

    async def _name(self, user_id: str) -> str | None:
        try:
            found = (await self.adapter.client.users_info(user=user_id)).data
        except (SlackApiError, aiohttp.ClientError, OSError, TimeoutError):
            return None
        user = dict(found.get("user") or {}) if isinstance(found, dict) else {}
        profile = dict(user.get("profile") or {})
        return (
            str(profile.get("display_name") or profile.get("real_name") or user.get("name") or "")
            or None
        )

    async def _members(self, group: str) -> frozenset[str]:
        """A user group's members, asked of Slack at most once a `GROUPS_TTL`; when Slack
        cannot say, the last answer (or nobody)."""
        known = self._groups.get(group)
        if known is not None and time.monotonic() - known[0] < GROUPS_TTL:
            return known[1]
        try:
            found = (await self.adapter.client.usergroups_users_list(usergroup=group)).data
        except (SlackApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            self.adapter.failed(f"usergroups.users.list {group}", exc)
            return known[1] if known is not None else frozenset()
        listed = found.get("users") if isinstance(found, dict) else None
        users = frozenset(str(u) for u in listed or [])
        self._groups[group] = (time.monotonic(), users)
        return users

    async def warm_groups(self) -> None:
        for group in self.adapter.config.approver_roles:
            await self._members(group)

    # -- private answers -------------------------------------------------------------------

    async def _tell(self, body: dict[str, Any], user_id: str, text: str) -> None:
        """Tell the presser alone, in the thread of the message they pressed."""
        channel = str((body.get("channel") or {}).get("id") or self.adapter.config.channel_id)
        message = body.get("message") or {}
        thread = message.get("thread_ts") or (body.get("container") or {}).get("thread_ts")
        await self._ephemeral(channel, user_id, text, thread=thread)

    async def _ephemeral_card(self, card: dict[str, Any] | None, user_id: str, text: str) -> None:
        channel = card["channel"] if card else self.adapter.config.channel_id
        await self._ephemeral(channel, user_id, text, thread=card.get("thread") if card else None)

    async def _ephemeral(
        self, channel: str, user_id: str, text: str, *, thread: str | None = None
    ) -> None:
        """A note only `user_id` sees (why a press or words were not taken). Sent at once:
        `chat.postEphemeral` has its own, roomier limit than the messages the outbox paces."""
        extra: dict[str, Any] = {"thread_ts": thread} if thread else {}
        try:
            await self.adapter.client.chat_postEphemeral(
                channel=channel, user=user_id, text=mrkdwn.escape(text), **extra
            )
        except (SlackApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            self.adapter.failed("chat.postEphemeral", exc)


async def _just_ack(ack: Callable[..., Awaitable[Any]]) -> None:
    """What the app does not know (a button of another version of it): acked, nothing else."""
    await ack()


def _unescape(text: str) -> str:
    """A message's text as the person typed it: Slack sends `&`, `<`, `>` as entities."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _named(live: dict[str, list[str]], words: str) -> tuple[str, list[str]] | None:
    """The live session `words` name: its name, or the start of its id or name; with one
    session live, no words name it."""
    if not words:
        return next(iter(live.items())) if len(live) == 1 else None
    wanted = words.casefold()
    for rule in ("name", "id", "start"):
        found = [
            (sid, entry)
            for sid, entry in live.items()
            if (rule == "name" and entry[1].casefold() == wanted)
            or (rule == "id" and sid.startswith(words))
            or (rule == "start" and entry[1].casefold().startswith(wanted))
        ]
        if len(found) == 1:
            return found[0]
    return None
