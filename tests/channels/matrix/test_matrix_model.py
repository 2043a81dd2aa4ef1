"""The Matrix channel inside a whole bridge, against a model, in random orders and restarts.

Hypothesis drives the real bridge (`Rig`: hub, store, core loop, outbox) whose one channel is
the real `MatrixChannel` (mautrix, and its own `/sync` long-poll loop) on the fake
homeserver, which outlives the bridge's restarts as a homeserver does (its room, threads,
messages and reactions stay). Two agents start sessions, ask questions (options,
informational cards, words), answer some in their terminal (a reaction racing that answer
too) and end their sessions; approvers (Ada, Bob) and a stranger react to cards (a reaction
per option, which the card lists), twice at once, also while the bridge is down, or with an
emoji that is no option, and write words in a session's thread or in reply to a card; the
bridge restarts, cleanly or killed, also while a card is on its way.

After every step: one root message per session in the room, never a second, saying it ended
once it did; each question answered through Matrix reached its agent as exactly one
`control.attention.respond` with the chosen option (or words), credited on its card to the
approver who chose it; a stranger's reaction or words send nothing and leave the card as it
was, and are refused in the card's thread, once per person and card while the bridge runs
(`_tell`); a closed card shows its outcome and lists no reactions, an open one lists one
per option and carries the bot's reaction for each, to tap (after a restart too), and the
bot reacts to no card with anything else; a reaction made while the bridge was down answers
after the restart; the homeserver saw no broken limit. A kill while
a card is on its way may show it twice (delivery is at least once); so may a kill while a
root is posted, so that rule stops the bridge cleanly.

Two of the kit's rules do not fit Matrix: it has no forms (`forms=False`: a form's card asks
for words in the thread, as a words question's does), so the model asks words where the kit
asks a form and never fills one in; and no heads-ups (`heads_ups=False`: the card rings in
the room), so no message but the card may point at it.

The fake keeps Synapse's size limits but not its rate limit, and the outbox runs on
`VirtualTime`: the end-to-end tests keep the real limits, this one the orders of events.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

import aep_bridge_matrix
from aep_bridge.testing.model import CLOSED, REFUSED, Asked, Pressed
from aep_bridge_matrix.html import CARD_FIELD, OPTION_KEYS
from tests.core.rig import ChannelMachine, machine_settings

from .fake_homeserver import ADA, BOB, BOT, STRANGER, FakeHomeserver, FakeMessage, Limits
from .probe import buttons, make_config, make_room, visible

PEOPLE = {"ada": ADA, "bob": BOB, "stranger": STRANGER}
#: seconds to wait for something the fake homeserver and mautrix do over loopback
WAIT = 10.0


class MatrixBridge(ChannelMachine):
    """The kit's `ChannelModel` with the Matrix channel on the fake homeserver: a session's
    place is a root message and its thread, a press a reaction, a refusal a notice in the
    card's thread; its own rules are words (in the thread, or in reply to a card), a
    reaction made while the bridge is down and one with an emoji that is no option."""

    PLUGIN: ClassVar[ModuleType] = aep_bridge_matrix
    CHANNEL = "matrix"
    PEOPLE: ClassVar[dict[str, Any]] = PEOPLE
    APPROVERS = ("ada", "bob")
    NAMES: ClassVar[dict[str, str]] = {"ada": ADA, "bob": BOB}  # a card credits the user id

    def __init__(self) -> None:
        self.room = ""
        #: (question, person) whose refusal the running bridge said already
        self.told: set[tuple[int, str]] = set()
        super().__init__()

    async def _open_fake(self) -> FakeHomeserver:
        fake = await FakeHomeserver(limits=Limits.loose()).__aenter__()
        self.room = make_room(fake)
        return fake

    def _channel_block(self) -> dict[str, Any]:
        return make_config(self.matrix, self.room, approvers=[ADA, BOB])

    def _restart(self, agents: list[Any], *, flush_timeout: float = 5.0) -> None:
        """The rig's restart; the new adapter says every refusal once again."""
        self.told.clear()
        super()._restart(agents, flush_timeout=flush_timeout)

    def _ask(
        self, k: int, kind: str, options: int = 2, turns: int = 0, restart: bool | None = None
    ) -> Asked:
        """Matrix has no forms: a form's card takes words, as a words question's does."""
        return super()._ask(k, "words" if kind == "form" else kind, options, turns, restart)

    def _tell(self, who: str, asked: Asked) -> None:
        """Matrix says a refusal (or what became of the card) in the card's thread, once per
        person and card while the bridge runs."""
        told = (self.asked.index(asked), who)
        if told not in self.told:
            self.told.add(told)
            super()._tell(who, asked)

    # -- the kit's platform hooks ----------------------------------------------------------

    @property
    def matrix(self) -> FakeHomeserver:
        assert self.fake is not None
        return self.fake  # type: ignore[no-any-return]

    async def _until(self, what: str, check: Any) -> Any:
        return await self.matrix.wait_until(check, timeout=WAIT, what=what)

    def _begin_event(self, who: str, send: Any) -> Pressed:
        """`who` does something in the room (`send()` returns its event id): under way until
        the bridge's sync asks from past it."""
        synced = len(self.matrix.synced_from)
        event_id = send()
        return self._begun((self.matrix.event(event_id).pos, synced), who)

    def _standing(self, who: str, event_id: str, key: str) -> str | None:
        """`who`'s reaction with `key` to `event_id`, if it stands (not taken back)."""
        return next(
            (
                e.event_id
                for e in self.matrix.events(self.room)
                if e.type == "m.reaction"
                and e.sender == PEOPLE[who]
                and e.target == event_id
                and e.relates_to.get("key") == key
                and e.redacted_by is None
            ),
            None,
        )

    def _react(self, asked: Asked, key: str, who: str) -> Pressed:
        """`who` reacts to the card with `key`; a reaction of theirs with it that stands is
        taken back first, as a client's second tap does (the homeserver takes one each)."""
        card = self._card(asked)
        standing = self._standing(who, card.event_id, key)
        if standing is not None:
            self.matrix.redact_as(PEOPLE[who], self.room, standing)
        return self._begin_event(
            who, lambda: self.matrix.react_as(PEOPLE[who], self.room, card.event_id, key)
        )

    def _press(self, asked: Asked, index: int, who: str) -> Pressed:
        key = buttons(self._card(asked))[index].data.decode()  # as the card lists it
        return self._react(asked, key, who)

    async def _answered(self, pressed: Pressed) -> None:
        """Wait until the bridge's sync asked from past the event (it handled it), then for
        what it queued: a command, a notice, or nothing (a refusal said already)."""
        pos, synced = pressed.what
        await self._until(
            "the event read", lambda: any(s >= pos for s in self.matrix.synced_from[synced:])
        )
        await self._idle()

    def _notices(self, who: str) -> list[str]:
        """What the bot said to `who` in the room (`@user: ...`), oldest first."""
        prefix = f"{PEOPLE[who]}: "
        said = [visible(m) for m in self.matrix.messages(self.room, from_bot=True)]
        return [s.removeprefix(prefix) for s in said if s.startswith(prefix)]

    def _notes(self, who: str) -> int:
        return len(self._notices(who))

    def _note(self, who: str) -> str:
        return self._notices(who)[-1]

    def _bot_messages(self, k: int) -> list[FakeMessage]:
        root = self._thread_of(k)
        assert root is not None
        return [m for m in self.matrix.thread(self.room, root) if m.sender == BOT]

    def _is_card(self, message: FakeMessage, prompt: str) -> bool:
        return CARD_FIELD in message.versions[0] and prompt in visible(message)

    def _message(self, key: str) -> FakeMessage:
        return self.matrix.message(key)

    def _message_key(self, message: FakeMessage) -> str:
        return message.event_id

    def _shown(self, message: FakeMessage) -> str:
        return visible(message)

    def _buttons(self, message: FakeMessage) -> int:
        return len(buttons(message))

    def _look(self, message: FakeMessage) -> Any:
        return json.dumps(message.content), len(message.edits)

    def _heads_ups(self, asked: Asked) -> list[str]:
        """No heads-ups: the bot's messages but the card that point at it (none should)."""
        return [
            visible(m)
            for m in self.matrix.messages(self.room, from_bot=True)
            if m.event_id != asked.message and str(asked.message) in json.dumps(m.versions)
        ]

    def _faults(self) -> list[Any]:
        return list(self.matrix.violations)

    def _fill_in(self, asked: Asked, who: str, restart: bool) -> None:
        raise AssertionError("Matrix has no forms: the model asks none")

    def _check_places(self) -> None:
        """One root message per session, never a second, saying it ended once it did."""
        roots = self.matrix.messages(self.room, from_bot=True, include_threads=False)
        started = [k for k, s in enumerate(self.sessions) if s.started]
        assert len(roots) == len(started), [visible(r) for r in roots]
        for k in started:
            root = self._thread_of(k)
            assert root is not None
            [shown] = [visible(r) for r in roots if r.event_id == root]
            assert f"session {k}" in shown, shown
            assert ("(ended)" in shown) == self.sessions[k].ended, (k, shown)

    # -- Matrix's own rules and invariants -------------------------------------------------

    def _bot_reactions(self, asked: Asked) -> list[str]:
        return [k for k, who in self.matrix.reactions(str(asked.message)).items() if BOT in who]

    @invariant()
    def an_open_card_carries_a_reaction_per_option_to_tap(self) -> None:
        """The bot reacts to an open card with its options' keys, so a person taps one
        (they follow the card, one at a time); to no other card with anything else."""
        for n, asked in enumerate(self.asked):
            keys = OPTION_KEYS[: 0 if asked.informational else len(asked.options)]
            if asked.state == "open" and keys:
                self._run(
                    self._until(
                        f"the bot's reactions to question {n}",
                        lambda a=asked, k=keys: sorted(self._bot_reactions(a)) == sorted(k),
                    )
                )
            assert set(self._bot_reactions(asked)) <= set(keys), asked

    def _words(self, asked: Asked, who: str, *, reply: bool) -> None:
        """`who` writes in the card's thread (`reply`: in reply to the card). Words that
        reply to a card are for it; other words are for the session's one open question
        that takes words, if there is exactly one, else a chat message to the session. An
        approver's words answer an open question; anyone else's, or words for a closed or
        informational card, are refused in the thread (once per person and card); a chat
        message sends no command."""
        root = self._thread_of(asked.session)
        assert root is not None
        takers = [
            a
            for a in self.asked
            if a.session == asked.session and a.state == "open" and not a.informational
        ]
        target = asked if reply else (takers[0] if len(takers) == 1 else None)
        before = self._look(self._card(target)) if target is not None else None
        text = f"words from {who}"
        card = str(asked.message) if reply else None
        matrix = self.matrix
        said = self._begin_event(
            who,
            lambda: matrix.send_as(PEOPLE[who], self.room, text, thread_root=root, reply_to=card),
        )
        self._run(self._answered(said))
        self._event(f"words by {who} for {'no card' if target is None else target.state}")
        if target is None:  # a chat message
            assert self._all_commands() == said.commands_before
        elif who in self.APPROVERS and target.state == "open" and not target.informational:
            target.state, target.by = "answered", self.NAMES[who]
            target.answer, target.shown = {"text": text}, text
        else:
            assert self._all_commands() == said.commands_before
            self._tell(who, target)
            note = self._note(who)
            if who not in self.APPROVERS:
                assert note == REFUSED, note
                assert self._look(self._card(target)) == before
            elif target.state != "open":
                assert note.startswith(CLOSED), note

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), who=st.sampled_from(sorted(PEOPLE)), reply=st.booleans())
    def write_in_a_thread(self, data: st.DataObject, who: str, reply: bool) -> None:
        self._words(data.draw(st.sampled_from(self.asked)), who, reply=reply)

    @precondition(lambda self: self._pressable())
    @rule(data=st.data(), killed=st.booleans())
    def react_while_the_bridge_is_down(self, data: st.DataObject, killed: bool) -> None:
        asked = data.draw(st.sampled_from(self._pressable()))
        who = data.draw(st.sampled_from(sorted(PEOPLE)))
        index = data.draw(st.integers(0, len(asked.options) - 1))
        self._react_while_down(asked, index, who, killed)

    def _react_while_down(self, asked: Asked, index: int, who: str, killed: bool) -> None:
        """The bridge is down (stopped, or killed) when someone reacts: its sync position is
        kept, so after the restart it reads the reaction, and answers or refuses it."""
        before = self._look(self._card(asked))
        self._run(self.rig.stop(0.0 if killed else 5.0))
        pressed = self._press(asked, index, who)
        self._restart_all()  # it is down already: this starts it
        self._run(self._answered(pressed))
        self._event(f"a reaction while the bridge was down, by {who}")
        if who in self.APPROVERS:
            self._taken(asked, who, index)
        else:
            self._refused(who, asked, before)

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), who=st.sampled_from(sorted(PEOPLE)))
    def react_with_another_emoji(self, data: st.DataObject, who: str) -> None:
        """A reaction that is no option (👍) is nobody's answer: nothing is sent or said."""
        asked = data.draw(st.sampled_from(self.asked))
        before = self._look(self._card(asked))
        pressed = self._react(asked, "👍", who)
        self._run(self._answered(pressed))
        assert self._all_commands() == pressed.commands_before
        assert self._notes(who) == pressed.notes_before
        assert self._look(self._card(asked)) == before

    def _press_twice(self, asked: Asked, picks: list[int], first: str, second: str) -> None:
        """A second tap of the same reaction takes the first back (a client's toggle): one
        person's two reactions at once are two options, or one reaction."""
        if first == second and picks[0] == picks[1]:
            if len(asked.options) == 1:
                self._press_once(asked, picks[0], first)
                return
            picks = [picks[0], (picks[0] + 1) % len(asked.options)]
        super()._press_twice(asked, picks, first, second)


TestMatrixBridge = MatrixBridge.TestCase
TestMatrixBridge.settings = machine_settings(examples=10, steps=20)


# -- sequences the machine found, kept as explicit tests -----------------------------------


def test_a_card_s_reactions_cut_short_by_a_restart_are_made_after_it() -> None:
    """The bridge stops (cleanly, or killed) while the bot reacts to a new card, one option
    at a time: after the restart the card has its reaction for every option, each once (the
    ones a stop cut short were lost for good)."""
    for turns in range(0, 12, 3):
        for killed in (False, True):
            machine = MatrixBridge()
            try:
                machine._ask(0, "options", 3, turns, killed)
                machine.check()
                machine.an_open_card_carries_a_reaction_per_option_to_tap()
            finally:
                machine.teardown()


def test_a_reaction_made_while_the_bridge_was_killed_answers_after_the_restart() -> None:
    """A kill, then a stranger's and an approver's reactions while nothing listens: the
    restarted bridge reads both from its kept sync position, refuses one, sends the other."""
    machine = MatrixBridge()
    try:
        asked = machine._ask(0, "options", 2)
        machine._react_while_down(asked, 0, "stranger", killed=True)
        machine._react_while_down(asked, 1, "bob", killed=True)
        machine.check()
    finally:
        machine.teardown()
