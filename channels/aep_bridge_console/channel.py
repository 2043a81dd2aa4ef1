"""The console channel: one line per message, answers typed back on standard input.

Everything printed is made safe for the terminal first (`aep_bridge.visible`): an
agent's escape sequences, control characters and bidi overrides are shown, never acted on;
and a message's further lines are indented two spaces, so no line an agent wrote can pass for
a line of another session's or of the bridge's log.

A tool call is printed once, when it finishes (its line then says what came of it): its
start is held back, and printed only when the call runs longer than `LONG_CALL` seconds or
when something else of its session is printed first (a question the call asks), so the log
keeps the order things happened in and a call still running is never hidden.

A question is printed with a short id and a code per option (`k3f9 1 = Allow`); typing the
code presses that button, and typing the short id followed by other words sends those words
as a free-text answer. A form's card lists its fields, their choices and how to answer each;
typing the short id and `1=2; 3=yes` fills the form in (`forms`).

The short id (4 to 6 characters, unique among the questions still open) stands for the
core's card id (`c` and 16 hex digits, too long to type), which is what the answer goes to:
the core resolves it from the card id alone (contract 1.2). The alias is kept in the
channel's `ChannelState`, so a card printed before a restart still takes an answer; a card id
of 6 characters or fewer is printed as it is. A line whose first word is no short id goes to
the core as a card id, which says what became of it.

The person at the keyboard is the user `local`, which the embedded defaults list as the
console's approver. Answers are read only when standard input is a terminal; otherwise the
channel says so once at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import re
import secrets
import sys
from collections.abc import Iterator
from typing import TextIO

from pydantic import Field

from aep_bridge import (
    BridgeCore,
    ChannelAdapter,
    ChannelCapabilities,
    ChannelConfig,
    ChannelUser,
    FormField,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
    split_text,
    visible,
)

from . import forms

log = logging.getLogger("aep_bridge.console")
#: the core's reason for a press on an option the request lacks (`types.NO_SUCH_OPTION`): then
#: the digits typed are taken as words; any other refusal (an approval counted already) is said
NO_SUCH_OPTION = "no such option"

#: what short ids are made of: lower-case letters and digits that are not read as each
#: other (no i, l, o, 0 or 1); each starts with a letter
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_LETTERS = "abcdefghjkmnpqrstuvwxyz"
SHORT_LENGTHS = (4, 5, 6)
#: tries at each length before a longer id is drawn
_DRAWS = 20
#: what starts each further line of a message (an empty one stays empty)
CONTINUATION = "  "
_FURTHER_LINE = re.compile(r"(?<=\n)(?=.)")
#: seconds a tool call's start is held back, waiting for its end (printed instead of both)
LONG_CALL = 3.0

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

    def instructions_by_default(self) -> bool:
        """The console is the operator's own terminal."""
        return True


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
        forms=True,
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
        #: per session, the tool calls started and not printed yet: call id -> (label, text,
        #: the timer that prints it once the call runs long)
        self._started: dict[str, dict[str, tuple[str, str, asyncio.TimerHandle]]] = {}

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        terminal = sys.stdin is not None and sys.stdin.isatty()
        if self._answers is not None or (self.config.read_input and terminal):
            self._reader = asyncio.create_task(self._read_answers(), name="console-answers")
        elif self.config.read_input:
            log.warning(
                "console %s: standard input is not a terminal, so answers cannot be typed "
                "here; questions are still shown (run the bridge in a terminal to answer "
                "them here, or set read_input to false if another channel answers them)",
                self.instance_name,
            )

    async def stop(self) -> None:
        for session_id in list(self._started):
            self._print_started(session_id)
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    # -- output ----------------------------------------------------------------------------

    def _print(self, label: str | None, text: str) -> None:
        """Everything the console shows goes through here, and through `visible`: an agent's
        text (and a session's name) reaches the terminal as text, its escape sequences and
        bidi overrides shown as `\\u001b`, `\\u202e`, never acted on (docs/security.md).
        A message's further lines are indented, so a line an agent wrote never starts where
        the console's own lines (`[session] ...`) and the log's (`aep-bridge: ...`) start."""
        prefix = "" if label is None else f"[{visible(label, one_line=True)}] "
        for piece in split_text(text, self.capabilities.max_message_length):
            shown = _FURTHER_LINE.sub(CONTINUATION, visible(piece))
            print(f"{prefix}{shown}", file=self.output, flush=True)

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
        label = await self._name(session_id)
        call = content.metadata.get("call_id")
        if content.type == "tool_call" and isinstance(call, str) and call:
            self._hold(session_id, call, label, f"{mark}{content.text}")
            return
        started = self._started.get(session_id, {})
        if content.type == "tool_update" and isinstance(call, str) and call in started:
            started.pop(call)[2].cancel()  # it finished: its end is printed instead of both
        self._print_started(session_id)
        self._print(label, f"{mark}{content.text}")

    def _hold(self, session_id: str, call: str, label: str, text: str) -> None:
        """Hold a call's start back until it finishes, runs long, or something else of its
        session is printed."""
        started = self._started.setdefault(session_id, {})
        if call in started:
            started.pop(call)[2].cancel()
        loop = asyncio.get_running_loop()
        timer = loop.call_later(LONG_CALL, self._print_long, session_id, call)
        started[call] = (label, text, timer)

    def _print_long(self, session_id: str, call: str) -> None:
        """A call still running after `LONG_CALL`: its start is printed (and what was held
        before it, in order)."""
        started = self._started.get(session_id, {})
        if call in started:
            self._print_started(session_id, upto=call)

    def _print_started(self, session_id: str, upto: str | None = None) -> None:
        """Print the session's held starts, in the order they came (up to `upto`'s)."""
        started = self._started.get(session_id)
        while started:
            call, (label, text, timer) = next(iter(started.items()))
            del started[call]
            timer.cancel()
            self._print(label, text)
            if call == upto:
                break
        if not started:
            self._started.pop(session_id, None)

    # -- short ids ---------------------------------------------------------------------
    #
    # In the channel's state: `short:<id>` is the card a short id stands for (kept after the
    # card closes, so a late answer hears what became of it, until the id is drawn again),
    # and `open:<card>` the short id of a card still open; `form:<card>` the fields of an
    # open form's card, so a line typed after a restart still fills it in.

    async def _short_id(self, card_id: str) -> str:
        """The id the person types for `card_id`: unique among the open cards."""
        state = self.core.state(self.instance_name)
        known = await state.get(f"open:{card_id}")
        if known is not None:
            return known
        for short in _candidates(card_id):
            if await self._free(short.lower()):
                await state.set(f"short:{short.lower()}", card_id)
                await state.set(f"open:{card_id}", short)
                return short
        return card_id  # every draw taken (millions of open cards): the card id itself

    async def _free(self, short: str) -> bool:
        """Whether no open card uses `short` (a closed card's id may be drawn again)."""
        state = self.core.state(self.instance_name)
        holder = await state.get(f"short:{short}")
        return holder is None or await state.get(f"open:{holder}") is None

    async def _card_of(self, typed: str) -> str:
        """The card a typed id stands for: a short id's card, else the words as a card id."""
        return await self.core.state(self.instance_name).get(f"short:{typed.lower()}") or typed

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        self._card_sessions[request.id] = session_id
        self._print_started(session_id)  # the call that asks is above its question
        lines = [f"? {request.title}"]
        if request.description:
            lines.append(request.description)
        if request.informational:
            lines.append("(answered in the agent's own terminal)")
        else:
            short = await self._short_id(request.id)
            choices = "   ".join(
                f"{short} {i} = {o.label}" for i, o in enumerate(request.options, 1)
            )
            if choices:
                lines.append(f"answer with: {choices}")
            if request.fields:
                lines.extend(forms.card_lines(short, request.fields))
                await self._keep_form(request)
            if request.fields and request.accepts_text:
                lines.append(f"or type: {short} <your answer> (in words, instead of the form)")
            elif request.accepts_text or not request.options:
                lines.append(f"or type: {short} <your answer>")
        self._print(await self._name(session_id), "\n".join(lines))

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        self._print_started(session_id)
        self._print(await self._name(session_id), f"{request.title}: {outcome.summary()}")
        if outcome.closed:
            self._card_sessions.pop(request.id, None)
            # the short id may be drawn again; until then it still names this card
            await self.core.state(self.instance_name).delete(f"open:{request.id}")
            await self.core.state(self.instance_name).delete(f"form:{request.id}")

    async def _keep_form(self, request: PermissionRequest) -> None:
        fields = [field.model_dump(mode="json") for field in request.fields]
        await self.core.state(self.instance_name).set(f"form:{request.id}", json.dumps(fields))

    async def _form_of(self, card_id: str) -> list[FormField]:
        """The fields of an open form's card; none for any other card."""
        kept = await self.core.state(self.instance_name).get(f"form:{card_id}")
        return [FormField.model_validate(field) for field in json.loads(kept)] if kept else []

    async def send_notification(self, notification: NotificationMessage) -> None:
        """A heads-up: its session's name, then what happened (that alone for no session:
        an agent went offline)."""
        name = notification.session_name
        self._print(
            None, f"! {name}: {notification.summary}" if name else f"! {notification.summary}"
        )

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
        """One typed line: `<id> <n>` presses option n, `<id> <words>` answers in words,
        `<id> 1=2; 3=yes` fills in a form's fields.

        `<id>` is a card's short id (or its card id). Both go to the core by card id, which
        says what became of them (an unknown card too). A number that is none of the card's
        options is words ("how many retries?").
        """
        typed, _, answer = line.strip().partition(" ")
        answer = answer.strip()
        if not typed or not answer:
            return None
        card = await self._card_of(typed)
        resolution: Resolution
        fields = await self._form_of(card) if forms.FILLS.match(answer) else []
        if fields:
            resolution = await self._fill(card, fields, answer)
        elif answer.isascii() and answer.isdigit():
            resolution = await self.core.resolve_permission(card, int(answer) - 1, self.user)
            if resolution.reason == NO_SUCH_OPTION:  # words that look like a number
                resolution = await self.core.answer_text(card, answer, self.user)
        else:
            resolution = await self.core.answer_text(card, answer, self.user)
        session_id = self._card_sessions.get(card)
        label = await self._name(session_id) if session_id is not None else typed
        self._print(label, resolution.message)
        return resolution

    async def _fill(self, card: str, fields: list[FormField], answer: str) -> Resolution:
        """A form filled in on one line: who may answer is asked first, then the line is read
        (a line that does not parse says why and sends nothing)."""
        refused = await self.core.may_answer(card, self.user)
        if refused is not None:
            return refused
        values = forms.values(answer, fields)
        if isinstance(values, str):
            return Resolution(status=ResolutionStatus.REJECTED, reason=values)
        return await self.core.answer_form(card, values, self.user)


def _candidates(card_id: str) -> Iterator[str]:
    """The card id itself when it is short enough to type, then random ids, longer ones
    after `_DRAWS` tries at each length."""
    if len(card_id) <= SHORT_LENGTHS[-1]:
        yield card_id
    for length in SHORT_LENGTHS:
        for _ in range(_DRAWS):
            yield _draw(length)


def _draw(length: int) -> str:
    """A random short id: a letter, then letters and digits."""
    return secrets.choice(_LETTERS) + "".join(secrets.choice(_ALPHABET) for _ in range(length - 1))


async def _stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader
