"""The Telegram channel inside a whole bridge, against a model, in random orders and restarts.

Hypothesis drives the real bridge (`Rig`: hub, store, core loop, outbox) whose one channel is
the real `TelegramChannel` (python-telegram-bot, long-polling) on the fake Bot API, which
outlives the bridge's restarts as Telegram does (its forum, topics, messages and buttons
stay). Two agents start sessions, ask questions (options, informational cards, forms, words),
answer some in their terminal (a press racing that answer too) and end their sessions;
approvers (Alice, Bob) and a stranger (Mallory) press buttons, twice at once, fill in forms
one field at a time on the card (a restart between the fields too), and write words in a
session's topic or in reply to a card; the bridge restarts, cleanly or killed, also while a
card is on its way.

After every step: one topic per session, never a second, closed once the session ended, and
one Notifications topic at most; each question answered through Telegram reached its agent
as exactly one `control.attention.respond` with the chosen option (or words, or the form's
values), credited on its card to the approver who chose it; a stranger's press sends nothing,
leaves the card as it was and is answered privately (a toast), their words are refused in
a reply; a closed card shows its outcome and has no buttons; an open card keeps its buttons,
which work after a restart; a question's heads-up (in the Notifications topic, linking to its
card) is one message; Telegram saw no broken limit and every press was answered. A kill while
a card is on its way may show it (and its heads-up) twice (delivery is at least once); so
may a kill while a topic is made, so that rule stops the bridge cleanly.

An approver's words for an open form fill its fields one at a time, which `_fill_in` drives:
the words rule leaves an open form to it.

The fake keeps Telegram's size limits but not its rate limits, and the outbox runs on
`VirtualTime`: the end-to-end tests keep the real limits, this one the orders of events.
"""

from __future__ import annotations

import asyncio
import json
from types import ModuleType
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import aep_bridge_telegram
from aep_bridge.testing.model import CLOSED, REFUSED, Asked, Pressed
from tests.core.rig import ChannelMachine, machine_settings

from .fake_bot_api import ALICE, BOB, FORUM_ID, FakeBotApi, FakeMessage, Limits

MALLORY: dict[str, Any] = {"id": 333333333, "is_bot": False, "first_name": "Mallory"}
PEOPLE = {"alice": ALICE, "bob": BOB, "mallory": MALLORY}
#: the toast of a press the core took (no note: the card shows it)
SENT = "Sent to the agent"
#: seconds to wait for something the fake Bot API and python-telegram-bot do over loopback
WAIT = 10.0


class TelegramBridge(ChannelMachine):
    """The kit's `ChannelModel` with the Telegram channel on the fake Bot API: a session's
    place is a forum topic, a refusal a toast, a form its fields one at a time on the card;
    its own rule is words in a session's topic, or in reply to a card."""

    PLUGIN: ClassVar[ModuleType] = aep_bridge_telegram
    CHANNEL = "telegram"
    PEOPLE: ClassVar[dict[str, Any]] = PEOPLE
    APPROVERS = ("alice", "bob")
    NAMES: ClassVar[dict[str, str]] = {"alice": "Alice (@alice)", "bob": "Bob (@bob)"}

    async def _open_fake(self) -> FakeBotApi:
        return await FakeBotApi(limits=Limits.no_rate_limits()).__aenter__()

    def _channel_block(self) -> dict[str, Any]:
        approvers = [str(ALICE["id"]), str(BOB["id"])]
        return self.telegram.channel_block(approvers=approvers, poll_timeout=1)

    # -- the kit's platform hooks ----------------------------------------------------------

    @property
    def telegram(self) -> FakeBotApi:
        assert self.fake is not None
        return self.fake  # type: ignore[no-any-return]

    async def _until(self, what: str, check: Any) -> Any:
        return await self.telegram.wait_until(check, timeout=WAIT, what=what)

    def _tap(self, asked: Asked, data: str, who: str) -> Pressed:
        """`who` taps the card's button carrying `data`, under way."""
        card = self._card(asked)
        return self._begun(self.telegram.press(FORUM_ID, card.message_id, data, PEOPLE[who]), who)

    def _press(self, asked: Asked, index: int, who: str) -> Pressed:
        return self._tap(asked, self._card(asked).callback_data[index], who)

    async def _answered(self, pressed: Pressed) -> None:
        """Wait until the press was answered (its toast: the core decided), then for what the
        bridge queued."""
        await self._until(
            "the press answered",
            lambda: self.telegram.pressed[pressed.what].answered_at is not None,
        )
        await self._idle()

    def _toasts(self, who: str) -> list[str]:
        """The toasts `who` was shown that say something (not that the core took it)."""
        mine = {q for q, p in self.telegram.pressed.items() if p.user["id"] == PEOPLE[who]["id"]}
        said = [a.text for a in self.telegram.answers if a.query_id in mine]
        return [t for t in said if t and t != SENT]

    def _notes(self, who: str) -> int:
        return len(self._toasts(who))

    def _note(self, who: str) -> str:
        return self._toasts(who)[-1]

    def _bot_messages(self, k: int) -> list[FakeMessage]:
        thread = self._thread_of(k)
        assert thread is not None
        return self.telegram.messages(FORUM_ID, int(thread), from_bot=True)

    def _message(self, key: int) -> FakeMessage:
        return self.telegram.message(FORUM_ID, key)

    def _message_key(self, message: FakeMessage) -> int:
        return message.message_id

    def _shown(self, message: FakeMessage) -> str:
        return message.text

    def _buttons(self, message: FakeMessage) -> int:
        return len(message.buttons)

    def _look(self, message: FakeMessage) -> Any:
        return message.text, json.dumps(message.reply_markup), len(message.edits)

    def _sessions_topics(self) -> set[int | None]:
        threads = (self._thread_of(k) for k, s in enumerate(self.sessions) if s.started)
        return {int(t) for t in threads if t is not None}

    def _heads_ups(self, asked: Asked) -> list[str]:
        """Messages outside the sessions' topics whose link leads to the card."""
        elsewhere = [
            m
            for m in self.telegram.messages(FORUM_ID, from_bot=True)
            if m.message_thread_id not in self._sessions_topics()
        ]
        link = f"/{asked.message}"
        return [
            m.text
            for m in elsewhere
            if any(str(e.get("url", "")).endswith(link) for e in m.entities)
        ]

    def _faults(self) -> list[Any]:
        unanswered = [p for p in self.telegram.pressed.values() if p.answered_at is None]
        return [*self.telegram.violations, *unanswered]

    def _fill_in(self, asked: Asked, who: str, restart: bool) -> None:
        """Fill in shows the approver's first field on the card (Environment: a choice),
        then their second (Release note: words in reply to the card), each tap's toast
        silent (nothing went to the agent yet); a restart between keeps their progress. A
        stranger's tap is refused and moves nothing."""
        before = self._look(self._card(asked))
        pressed = self._press(asked, 0, who)
        self._run(self._answered(pressed))
        if who not in self.APPROVERS:
            self._refused(who, asked, before)
            return
        self._run(self._until("the first field", lambda: "Staging" in self._labels(asked)))
        assert self._toast(pressed) is None  # a step shown: nothing went to the agent yet
        if restart:  # the card shows the person's step across the restart
            self._restart_all()
            self._settle()
        self._event(f"form filled by an approver, restart between: {restart}")
        chose = self._tap(asked, self._data(asked, "Production"), who)
        self._run(self._answered(chose))
        self._run(self._until("the second field", lambda: self._labels(asked) == []))
        assert self._toast(chose) is None
        card = self._card(asked)
        self.telegram.say(FORUM_ID, "ships it", PEOPLE[who], reply_to_message_id=card.message_id)
        self._run(
            self._until("the form's answer", lambda: self._all_commands() > chose.commands_before)
        )
        self._settle()
        self._taken(asked, who, None)

    def _toast(self, pressed: Pressed) -> str | None:
        """What the press's toast said (None: nothing)."""
        return next(a.text for a in self.telegram.answers if a.query_id == pressed.what)

    def _labels(self, asked: Asked) -> list[str]:
        return [b["text"] for b in self._card(asked).buttons]

    def _data(self, asked: Asked, label: str) -> str:
        return next(b["callback_data"] for b in self._card(asked).buttons if b["text"] == label)

    def _check_places(self) -> None:
        """One topic per session, never a second, closed once the session ended; one
        Notifications topic at most."""
        topics = self.telegram.topics(FORUM_ID)
        started = [k for k, s in enumerate(self.sessions) if s.started]
        names = sorted(t.name for t in topics if t.name != "Notifications")
        assert names == [f"session {k}" for k in started], names
        assert len(topics) - len(names) <= 1, [t.name for t in topics]
        for k in started:
            thread = self._thread_of(k)
            assert thread is not None
            topic = self.telegram.topic(FORUM_ID, int(thread))
            assert topic.name == f"session {k}"
            assert topic.closed == self.sessions[k].ended, (k, topic)

    # -- Telegram's own rule ---------------------------------------------------------------

    def _words(self, asked: Asked, who: str, *, reply: bool) -> None:
        """`who` writes in the card's topic (`reply`: in reply to the card). Words that
        reply to a card are for it; other words are for the session's one open question
        that takes words, if there is exactly one, else a chat message to the session. An
        approver's words answer an open question; anyone else's, or words for a closed card,
        are refused in a reply to them; words for an open informational card are a chat
        message to the session, as words for no card are, and send no command."""
        takers = [
            a
            for a in self.asked
            if a.session == asked.session and a.state == "open" and not a.informational
        ]
        target = asked if reply else (takers[0] if len(takers) == 1 else None)
        approver = who in self.APPROVERS
        if target is not None and target.form and target.state == "open" and approver:
            return  # an approver's words fill the form's fields: `_fill_in`
        thread = self._thread_of(asked.session)
        assert thread is not None
        before = self._look(self._card(target)) if target is not None else None
        text = f"words from {who}"
        commands = self._all_commands()
        said = self.telegram.say(
            FORUM_ID,
            text,
            PEOPLE[who],
            message_thread_id=int(thread),
            reply_to_message_id=self._card(asked).message_id if reply else None,
        )

        def answers() -> list[str]:
            bot = self.telegram.messages(FORUM_ID, int(thread), from_bot=True)
            return [m.text for m in bot if m.reply_to_message_id == said.message_id]

        taken = target is not None and approver and target.state == "open"
        taken = taken and target is not None and not target.informational
        # words for an open informational card are no answer: a chat message, whoever wrote
        told = target is not None and not (target.informational and target.state == "open")
        if taken:
            self._run(self._until("the words sent", lambda: self._all_commands() > commands))
        elif told:
            self._run(self._until("the words refused", answers))
        else:  # a chat message: read, handled, nothing sent
            self._run(
                self._until(
                    "the words read",
                    lambda: all(
                        u.get("message", {}).get("message_id") != said.message_id
                        for u in self.telegram.pending_updates
                    ),
                )
            )
            self._run(asyncio.sleep(0.1))
        self._settle()
        self._event(f"words by {who} for {'no card' if target is None else target.state}")
        if taken:
            assert target is not None
            target.state, target.by = "answered", self.NAMES[who]
            target.answer, target.shown = {"text": text}, text
            return
        assert self._all_commands() == commands
        if target is not None and told:
            [answer] = answers()
            if not approver:
                assert answer == REFUSED, answer
                assert self._look(self._card(target)) == before
            else:
                assert answer.startswith(CLOSED), answer

    @precondition(lambda self: any(not self.sessions[a.session].ended for a in self.asked))
    @rule(data=st.data(), who=st.sampled_from(sorted(PEOPLE)), reply=st.booleans())
    def write_in_a_topic(self, data: st.DataObject, who: str, reply: bool) -> None:
        """Words in an ended session's topic are left out: Telegram keeps a closed topic
        for its admins."""
        live = [a for a in self.asked if not self.sessions[a.session].ended]
        self._words(data.draw(st.sampled_from(live)), who, reply=reply)


TestTelegramBridge = TelegramBridge.TestCase
TestTelegramBridge.settings = machine_settings(examples=10, steps=20)


# -- sequences the machine found, kept as explicit tests -----------------------------------


def test_a_form_s_steps_say_nothing_was_sent_and_survive_a_restart() -> None:
    """Tapping Fill in, then a choice, shows the approver's next field: each toast is
    silent (it said "Sent to the agent" while nothing was), the progress outlives a
    restart, and the finished form reaches the agent once, with its values."""
    machine = TelegramBridge()
    try:
        asked = machine._ask(0, "form")
        machine._fill_in(asked, "alice", restart=True)
        machine.check()
    finally:
        machine.teardown()
