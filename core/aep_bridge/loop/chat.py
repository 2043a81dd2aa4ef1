"""What people write in a session's thread: `/status`, `/cancel`, `/pause`, `/resume`,
`/away`, `/back`.

Control goes to the agent as `control.cancel` / `control.pause` / `control.resume` on the
session's own route, only from an approver, and the thread is told what the agent said (or
why nothing was sent). `/away` and `/back` switch the session's away mode (away.py), also
only from an approver. Anything else gets a one-line hint: answers to questions are given on
their cards, never guessed from loose text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from ..aep.envelope import Event
from ..contract.types import ChannelUser, IncomingMessage
from ..intake.source import CommandResult
from .attention import Attention
from .away import AwayState
from .sessions import SessionRecord, Sessions

#: A line from the bridge in one channel's thread of a session: (channel, session id, text).
Replier = Callable[[str, str, str], None]
#: The command for `/verb` in a session: (session, verb) -> `control.*` event.
CommandMaker = Callable[[SessionRecord, str], Event]
Sender = Callable[[SessionRecord, Event], Awaitable[CommandResult]]

log = logging.getLogger("aep_bridge.chat")

CONTROL_VERBS: Final = ("cancel", "pause", "resume")
AWAY_VERBS: Final = ("away", "back")
HELP: Final = (
    "Commands here: /status, /cancel, /pause, /resume, /away, /back. To answer a question, "
    "press a button on its card or reply to the card."
)
_REFUSALS: Final = {
    "no-route": "the agent is not connected, so nothing was sent",
    "unsupported": "this agent does not accept /{verb}",
    "ambiguous": "more than one agent claims this session, so nothing was sent",
    "unauthorized": "the endpoint refused the bridge's credentials",
}


def describe(verb: str, result: CommandResult, *, content: bool = True) -> str:
    """One line for the thread: what became of `/verb`. The agent's own words (a rejection's
    `detail`) are left out unless `content` (the channel's ceiling lets content through)."""
    match result.status:
        case "accepted":
            return f"/{verb}: the agent accepted it"
        case "rejected":
            why = ": ".join(x for x in (result.code, result.detail if content else None) if x)
            return f"/{verb}: the agent refused it" + (f" ({why})" if why else "")
        case "refused":
            reason = _REFUSALS.get(result.code or "", result.detail or "it could not be delivered")
            return f"/{verb}: " + reason.format(verb=verb)
        case "timeout":
            return f"/{verb}: the agent did not acknowledge it in time; it may not have arrived"
    return f"/{verb}: {result.status}"


class ChatCommands:
    """Handles `IncomingMessage`s. What it needs of the bridge is handed in, as `Attention`
    has it: the session registry, the pending requests, and the functions that decide who
    may act (`approve`), build and send a command, reply in a thread, and tell whether a
    channel's ceiling lets an agent's words through (`shows_content`)."""

    def __init__(
        self,
        sessions: Sessions,
        attention: Attention,
        *,
        approve: Callable[[str, ChannelUser, SessionRecord], str | None],
        reply: Replier,
        command: CommandMaker,
        send: Sender,
        shows_content: Callable[[str], bool],
        away: AwayState | None = None,
        person_of: Callable[[str, str], str | None] = lambda _channel, _user: None,
    ) -> None:
        """`person_of(channel, user_id)`: the person `people` maps a chat identity to, whose
        `/away` and `/back` switch their own sessions (the ones they own)."""
        self.sessions = sessions
        self.attention = attention
        self._approve = approve
        self._reply = reply
        self._command = command
        self._send = send
        self._shows_content = shows_content
        self._away = away
        self._person_of = person_of

    async def handle(self, channel: str, message: IncomingMessage) -> None:
        sessions = self.sessions
        session_id = message.session_id
        if session_id is None and message.thread_id is not None:
            session_id = sessions.session_of_thread(channel, message.thread_id)
        session = sessions.get(session_id) if session_id else None
        if session is None or channel not in sessions.channels(session.id):
            log.info(
                "message from %s in %s ignored: not in a session's thread", message.user.id, channel
            )
            return
        words = message.text.strip().split()
        verb = words[0][1:].split("@", 1)[0].lower() if words and words[0][:1] == "/" else ""
        if verb == "status":
            self._reply(channel, session.id, self.status(session))
        elif verb in CONTROL_VERBS:
            await self.control(channel, session, verb, message)
        elif verb in AWAY_VERBS and self._away is not None:
            self.switch_away(channel, session, verb, message, self._away)
        else:
            self._reply(channel, session.id, HELP)

    def status(self, session: SessionRecord) -> str:
        thread = self.sessions.thread(session.id, self.sessions.channels(session.id)[0])
        name = thread.name if thread else session.session
        waiting = self.attention.open_requests(session.id)
        state = "ended" if session.state == "ended" else "running"
        questions = f"{len(waiting)} question(s) waiting" if waiting else "no question waiting"
        away = ""
        if self._away is not None and self._away.is_away(session.id):
            away = "; away (its agent asks here what next when it finishes)"
        return f"{name}: {session.agent}, {state}; {questions}{away}"

    def _refused(
        self, channel: str, session: SessionRecord, verb: str, message: IncomingMessage
    ) -> bool:
        """Whether `/verb` is refused: its sender may not act on this session here (logged,
        and the thread is told why). Checked before anything is written or sent."""
        why = self._approve(channel, message.user, session)
        if why is None:
            return False
        log.warning(
            "refused /%s on %s from %s (%s): %s",
            verb,
            channel,
            message.user.id,
            message.user.display,
            why,
        )
        self._reply(channel, session.id, f"/{verb}: refused: {why}")
        return True

    def switch_away(
        self,
        channel: str,
        session: SessionRecord,
        verb: str,
        message: IncomingMessage,
        away: AwayState,
    ) -> None:
        """`/away` or `/back`: from a person `people` maps, their own switch (the sessions
        they own); else this session's own switch. From an approver only (checked before
        anything is written)."""
        if self._refused(channel, session, verb, message):
            return
        on = verb == "away"
        person = self._person_of(channel, message.user.id)
        if person is not None:
            away.set(on, session_id=None, person=person, by=f"{message.user.display} on {channel}")
            self._reply(
                channel,
                session.id,
                f"/away: {person} is away: when one of their agents finishes, it asks in its "
                "thread what next"
                if on
                else f"/back: {person} is back: their agents stop as usual when they finish",
            )
            return
        away.set(on, session_id=session.id, by=f"{message.user.display} on {channel}")
        minutes = max(1, round(away.hold_seconds / 60))
        self._reply(
            channel,
            session.id,
            f"/away: this session is away: when its agent finishes, it asks here what next and "
            f"waits up to {minutes} min for an answer"
            if on
            else "/back: this session is back: its agent stops as usual when it finishes",
        )

    async def control(
        self, channel: str, session: SessionRecord, verb: str, message: IncomingMessage
    ) -> None:
        if self._refused(channel, session, verb, message):
            return
        current = self.sessions.get(session.id)
        if current is not None and current.state == "ended":
            self._reply(channel, session.id, f"/{verb}: the session has ended")
            return
        command = self._command(session, verb)
        log.info("/%s for session %s from %s on %s", verb, session.id, message.user.id, channel)
        result = await self._send(session, command)
        self._reply(
            channel, session.id, describe(verb, result, content=self._shows_content(channel))
        )
