"""The Discord channel inside a whole bridge, against a model, in random orders and restarts.

Hypothesis drives the real bridge (`Rig`: hub, store, core loop, outbox) whose one channel is
the real `DiscordChannel` (discord.py) connected to the fake Discord, which outlives the
bridge's restarts as Discord does (its threads, messages and buttons stay). Two agents start
sessions, ask questions (options, informational cards, forms, words), answer some in their
terminal (a press racing that answer too) and end their sessions; approvers (Alice, Bob: the
approver role) and a stranger (Mallory) press buttons, twice at once, reply to cards and fill
in forms (submitted after a restart too); the bridge restarts, cleanly or killed, also while
a card is on its way.

After every step: one thread per session, never a second; each question answered through
Discord reached its agent as exactly one `control.attention.respond` with the chosen option
(or words, or the form's values), credited on its card to the approver who chose it; a
stranger's press sends nothing, leaves the card as it was and is answered privately
(ephemeral), their reply is answered in the thread; a closed card shows its outcome and has
no buttons, and a press on the buttons a client still shows of it is answered privately with
that outcome (a stranger's with a refusal); an open card keeps its buttons, which work after
a restart; a question's heads-up is one message; an ended session's thread is archived;
Discord saw no broken limit and no unanswered interaction. A kill while a card is on its way
may show it (and its heads-up) twice (delivery is at least once); so may a kill while a
thread is made (a thread made but not yet recorded is made again), so that rule stops the
bridge cleanly.

The fake keeps Discord's size limits but not its rate limits, and the outbox runs on
`VirtualTime`: the end-to-end tests keep the real limits, this one the orders of events.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar

import discord.gateway
import discord.http
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import aep_bridge_discord
from aep_bridge.testing.model import CLOSED, REFUSED, Asked, Pressed
from tests.core.rig import ChannelMachine, machine_settings

from .fake_discord import (
    ALICE,
    APPROVER_ROLE_ID,
    BOB,
    MALLORY,
    NOTIFY_CHANNEL_ID,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    FakeMessage,
    Limits,
)
from .probe import channel_block, shown

PEOPLE = {"alice": ALICE, "bob": BOB, "mallory": MALLORY}
#: what a person fills in (the modal's inputs by position) and what the agent then gets
FILLED: dict[str, str | list[str]] = {"f0": ["1"], "f1": "ships it"}
#: seconds to wait for something the fake Discord and discord.py do over loopback
WAIT = 10.0


class DiscordBridge(ChannelMachine):
    """The kit's `ChannelModel` with the Discord channel on the fake Discord: a session's
    place is a thread, a refusal an ephemeral answer, a form a modal; its own rules are a
    reply to a card and a press on a closed card a client still shows."""

    PLUGIN: ClassVar[ModuleType] = aep_bridge_discord
    CHANNEL = "discord"
    PEOPLE: ClassVar[dict[str, Any]] = PEOPLE
    APPROVERS = ("alice", "bob")  # the approver role
    NAMES: ClassVar[dict[str, str]] = {"alice": "Alice", "bob": "Bob"}

    def __init__(self) -> None:
        self.endpoints = (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
        super().__init__()

    async def _open_fake(self) -> FakeDiscord:
        return await FakeDiscord(limits=Limits.loose()).__aenter__()

    def _channel_block(self) -> dict[str, Any]:
        return channel_block(self.discord, approver_roles=[str(APPROVER_ROLE_ID)])

    def _restored(self) -> None:
        discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = self.endpoints

    # -- the kit's platform hooks ----------------------------------------------------------

    @property
    def discord(self) -> FakeDiscord:
        assert self.fake is not None
        return self.fake  # type: ignore[no-any-return]

    async def _until(self, what: str, check: Any) -> Any:
        return await self.discord.wait_until(check, timeout=WAIT, what=what)

    def _press(self, asked: Asked, index: int, who: str) -> Pressed:
        card = self._card(asked)
        return self._begun(self.discord.press(card, card.custom_ids[index], PEOPLE[who]), who)

    async def _answered(self, pressed: Pressed) -> None:
        """Wait until the press was answered (deferred at once) and decided: a command at an
        agent, or a private note to the presser."""
        await self._until("the press answered", lambda: pressed.what.acknowledged)
        await self._decided(pressed)

    def _notes(self, who: str) -> int:
        return len(self.discord.ephemeral(PEOPLE[who]))

    def _note(self, who: str) -> str:
        return shown(self.discord.ephemeral(PEOPLE[who])[-1])

    def _bot_messages(self, k: int) -> list[FakeMessage]:
        thread = self._thread_of(k)
        assert thread is not None
        return self.discord.messages(int(thread), from_bot=True)

    def _is_card(self, message: FakeMessage, prompt: str) -> bool:
        return prompt in message.content

    def _message(self, key: int) -> FakeMessage:
        return self.discord.message(key)

    def _message_key(self, message: FakeMessage) -> int:
        return message.id

    def _shown(self, message: FakeMessage) -> str:
        return shown(message)

    def _buttons(self, message: FakeMessage) -> int:
        return len(message.buttons)

    def _look(self, message: FakeMessage) -> Any:
        return message.content, message.components

    def _heads_ups(self, asked: Asked) -> list[str]:
        heads_ups = self.discord.messages(NOTIFY_CHANNEL_ID, from_bot=True)
        return [shown(m) for m in heads_ups if f"/{asked.message}>" in m.content]

    def _faults(self) -> list[Any]:
        return [*self.discord.violations, *self.discord.unanswered()]

    def _fill_in(self, asked: Asked, who: str, restart: bool) -> None:
        before = self._look(self._card(asked))
        pressed = self._press(asked, 0, who)
        opened = pressed.what
        if who not in self.APPROVERS:
            self._run(self._answered(pressed))
            assert opened.modal is None
            self._refused(who, asked, before)
            return
        self._run(self._until("the modal", lambda: opened.modal is not None))
        if restart:  # the modal stays open in the person's Discord
            self._restart_all()
            self._settle()
        self._event(f"form submitted by an approver, restart between: {restart}")
        submitted = self._begun(self.discord.submit_modal(opened, FILLED), who)
        self._run(self._answered(submitted))
        self._taken(asked, who, None)

    def _check_places(self) -> None:
        """One thread per session, never a second, archived once the session ended."""
        threads = self.discord.threads(TEXT_CHANNEL_ID)
        started = [k for k, s in enumerate(self.sessions) if s.started]
        assert sorted(t.name for t in threads) == [f"session {k}" for k in started]
        for k in started:
            thread = self._thread_of(k)
            assert thread is not None
            found = self.discord.channel(int(thread))
            assert found.name == f"session {k}"
            assert found.archived == self.sessions[k].ended, (k, found)

    # -- Discord's own rules ---------------------------------------------------------------

    def _reply(self, asked: Asked, who: str) -> None:
        """`who` replies to the card in its thread: an approver's words answer it."""
        card = self._card(asked)
        before = card.content, card.components
        commands = self._all_commands()
        text = f"words from {who}"
        said = self.discord.say(card.channel_id, text, PEOPLE[who], reply_to=card)

        def answers() -> list[FakeMessage]:
            return [
                m
                for m in self.discord.messages(card.channel_id, from_bot=True)
                if m.reply_to == said.id
            ]

        self._run(
            self._until("the words decided", lambda: answers() or self._all_commands() > commands)
        )
        self._settle()
        self._event(f"reply by {who} to a card {asked.state}")
        if who not in self.APPROVERS:
            [answer] = answers()
            assert shown(answer) == REFUSED
            assert (self._card(asked).content, self._card(asked).components) == before
        elif asked.state == "open" and not asked.informational:  # every kind takes words
            assert answers() == []
            asked.state, asked.by = "answered", self.NAMES[who]
            asked.answer, asked.shown = {"text": text}, text
        else:
            [answer] = answers()  # why the words were not taken
            assert self._all_commands() == commands

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), who=st.sampled_from(sorted(PEOPLE)))
    def reply_to_a_card(self, data: st.DataObject, who: str) -> None:
        asked = data.draw(st.sampled_from(self.asked))
        if not self.sessions[asked.session].ended:  # an ended session's thread is archived
            self._reply(asked, who)

    def _posted_buttons(self, asked: Asked) -> list[str]:
        """The custom_ids the card had when it was posted (what a client that never redrew
        it still shows)."""
        card = self._card(asked)
        first = card.edits[0].components if card.edits else card.components
        return [c["custom_id"] for row in first for c in row.get("components", [])]

    def _closed_with_buttons(self) -> list[Asked]:
        return [
            a
            for a in self.asked
            if a.state != "open" and a.message is not None and self._posted_buttons(a)
        ]

    @precondition(lambda self: self._closed_with_buttons())
    @rule(data=st.data(), who=st.sampled_from(sorted(PEOPLE)))
    def press_a_closed_card_a_client_still_shows(self, data: st.DataObject, who: str) -> None:
        """A client that never redrew a card whose question closed still shows its buttons
        (an option's, or a form's Fill in). Discord sends the press with the card as it is,
        without them: discord.py drops it, the channel answers it, privately, within 3 s.
        An approver is told what the card says became of the question; a stranger only that
        they may not answer. Nothing is sent, the card does not change (issue 30, item 9)."""
        asked = data.draw(st.sampled_from(self._closed_with_buttons()))
        custom = data.draw(st.sampled_from(self._posted_buttons(asked)))
        card = self._card(asked)
        before = card.content, card.components
        pressed = self._begun(self.discord.press(card, custom, PEOPLE[who], seen=0), who)
        self._run(self._answered(pressed))
        self.notes[who] += 1
        note, after = self._note(who), self._card(asked)
        self._event(f"press by {who} on a closed card a client still shows")
        if who in self.APPROVERS:
            said = note.removeprefix(CLOSED)
            assert note.startswith(CLOSED), note
            assert said in shown(after), (note, shown(after))
        else:
            assert note == REFUSED
        assert pressed.what.modal is None
        assert (after.content, after.components) == before
        assert self._all_commands() == pressed.commands_before


TestDiscordBridge = DiscordBridge.TestCase
TestDiscordBridge.settings = machine_settings(examples=10, steps=20)


# -- sequences the machine found, kept as explicit tests -----------------------------------


def test_a_thread_made_while_the_bridge_stops_is_kept() -> None:
    """A session starts and the bridge is stopped cleanly at once, while Discord makes its
    thread: after the restart the session has that one thread, not a second."""
    machine = DiscordBridge()
    try:
        machine.start_and_restart_at_once(turns=0)  # session 1
        machine.check()
    finally:
        machine.teardown()


def test_a_form_opened_before_a_restart_is_answered_after_it() -> None:
    """Discord keeps a modal open in the person's client while the bridge restarts; its
    submission must still answer the agent (discord.py forgets modals it sent)."""
    machine = DiscordBridge()
    try:
        asked = machine._ask(0, "form")
        machine._fill_in(asked, "alice", restart=True)
        machine.check()
    finally:
        machine.teardown()
