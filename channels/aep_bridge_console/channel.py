"""The console channel: one line per message, answers typed back on standard input.

A question is printed with a short code per option (`c7Qa 1 = Allow`); typing the code
presses that button, and typing the card id followed by other words sends those words as a
free-text answer. The core resolves either from the card id alone (contract 1.2), so the
console keeps nothing to take an answer, and a card printed before a restart still takes one.
The person at the keyboard is the user `local`, which the embedded defaults list as the
console's approver.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import sys
from typing import TextIO

from pydantic import Field

from aep_bridge import (
    BridgeCore,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelUser,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
    split_text,
)

_MARKS = {
    "text": "",
    "thought": "(thinking) ",
    "tool_call": "tool: ",
    "tool_update": "tool: ",
    "plan": "plan: ",
    "usage": "usage: ",
    "session_end": "ended: ",
    "error": "error: ",
    "attachment": "file: ",
    "system_message": "note: ",
}


class ConsoleConfig(ChannelConfig):
    """The console channel's options."""

    read_input: bool = Field(
        default=True, description="read typed answers from standard input when it is a terminal"
    )


class ConsoleChannel(ChannelAdapter[ConsoleConfig]):
    """Sessions and questions printed in the terminal; answers typed back."""

    name = "console"
    config_model = ConsoleConfig
    contract_version = "1.2"
    capabilities = ChannelCapabilities(
        threads=False,
        buttons=True,
        edits=False,
        text_answers=True,
        forms=False,
        max_message_length=2000,
        max_button_data=32,
        max_buttons=20,
        identifies_users=False,
    )

    def __init__(
        self,
        core: BridgeCore,
        config: ConsoleConfig,
        *,
        output: TextIO | None = None,
        answers: asyncio.StreamReader | None = None,
    ) -> None:
        super().__init__(core, config)
        self.output = output or sys.stdout
        self.user = ChannelUser(id="local", name=getpass.getuser())
        self._answers = answers
        self._reader: asyncio.Task[None] | None = None
        self._names: dict[str, str] = {}
        #: the session each card on screen belongs to, to label what an answer got (display)
        self._card_sessions: dict[str, str] = {}

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        reads = self._answers is not None or (self.config.read_input and sys.stdin.isatty())
        if reads:
            self._reader = asyncio.create_task(self._read_answers(), name="console-answers")

    async def stop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    # -- output ----------------------------------------------------------------------------

    def _print(self, label: str | None, text: str) -> None:
        prefix = f"[{label}] " if label else ""
        for piece in split_text(text, self.capabilities.max_message_length):
            print(f"{prefix}{piece}", file=self.output, flush=True)

    async def _name(self, session_id: str) -> str:
        """The session's name, kept in the channel's state so a restart still knows it."""
        name = self._names.get(session_id)
        if name is None:
            name = await self.core.state(self.instance_name).get(f"name:{session_id}")
            self._names[session_id] = name or session_id
        return self._names[session_id]

    async def _set_name(self, session_id: str, name: str) -> None:
        self._names[session_id] = name
        await self.core.state(self.instance_name).set(f"name:{session_id}", name)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        mark = _MARKS.get(content.type, f"{content.type}: ")
        self._print(await self._name(session_id), f"{mark}{content.text}")

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        self._card_sessions[request.id] = session_id
        lines = [f"? {request.title}"]
        if request.description:
            lines.append(request.description)
        if request.informational:
            lines.append("(answered in the agent's own terminal)")
        else:
            choices = "   ".join(
                f"{request.id} {i} = {o.label}" for i, o in enumerate(request.options, 1)
            )
            if choices:
                lines.append(f"answer with: {choices}")
            if request.accepts_text or not request.options:
                lines.append(f"or type: {request.id} <your answer>")
        self._print(await self._name(session_id), "\n".join(lines))

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        self._print(await self._name(session_id), f"{request.title}: {outcome.summary()}")
        if outcome.closed:
            self._card_sessions.pop(request.id, None)

    async def send_notification(self, notification: NotificationMessage) -> None:
        self._print(None, f"! {notification.summary}")

    async def create_session_thread(self, session_id: str, name: str) -> str:
        await self._set_name(session_id, name)
        self._print(None, f"session {name}")
        return session_id

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        old = await self._name(session_id)
        await self._set_name(session_id, new_name)
        self._print(None, f"session {old} is now {new_name}")

    # -- input -----------------------------------------------------------------------------

    async def _read_answers(self) -> None:
        reader = self._answers or await _stdin_reader()
        while line := await reader.readline():
            await self.handle_line(line.decode(errors="replace"))

    async def handle_line(self, line: str) -> Resolution | None:
        """One typed line: `<card> <n>` presses option n, `<card> <words>` answers in words.

        Both go to the core by card id, which says what became of them (an unknown card
        too). A number that is none of the card's options is words ("how many retries?").
        """
        card, _, answer = line.strip().partition(" ")
        answer = answer.strip()
        if not card or not answer:
            return None
        resolution: Resolution
        if answer.isascii() and answer.isdigit():
            resolution = await self.core.resolve_permission(card, int(answer) - 1, self.user)
            if resolution.status is ResolutionStatus.REJECTED:  # no such option
                resolution = await self.core.answer_text(card, answer, self.user)
        else:
            resolution = await self.core.answer_text(card, answer, self.user)
        session_id = self._card_sessions.get(card)
        label = await self._name(session_id) if session_id is not None else card
        self._print(label, resolution.message)
        return resolution


async def _stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader
