"""The Slack channel inside a whole bridge, against a model, in random orders and restarts.

Hypothesis drives the real bridge (`Rig`: hub, store, core loop, outbox) whose one channel is
the real `SlackChannel` (slack-bolt and slack-sdk over Socket Mode) connected to the fake
Slack, which outlives the bridge's restarts as Slack does (its messages and buttons stay).
Two agents start sessions, ask questions (options, informational cards, forms, words), answer
some in their terminal (a press racing that answer too) and end their sessions; approvers
(Alice, through the approvers' user group; Bob, by his user id) and a stranger (Mallory)
press buttons, twice at once, reply in the session's thread and fill in forms (submitted
after a restart too); the bridge restarts, cleanly or killed, also while a card is on its
way.

After every step: one parent message per session in the sessions channel, never a second,
showing it ended once it did; each question answered through Slack reached its agent as
exactly one `control.attention.respond` with the chosen option (or words, or the form's
values), credited on its card to the approver who chose it; a stranger's press, reply or
form sends nothing, leaves the card as it was and is answered privately (ephemeral); a
closed card shows its outcome and has no buttons; an open card keeps its buttons, which work
after a restart; a question's heads-up is one message; Slack saw no broken limit and every
envelope was acked within 3 s. A kill while a card is on its way may show it (and its
heads-up) twice (delivery is at least once); so may a kill while a parent is posted, so that
rule stops the bridge cleanly.

The fake keeps Slack's size limits but not its rate limits, and the outbox runs on
`VirtualTime`: the end-to-end tests keep the real limits, this one the orders of events.
"""

from __future__ import annotations

import asyncio
import json
from types import ModuleType
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

import aep_bridge_slack
from aep_bridge.testing import library_logs_nothing_wrong
from aep_bridge.testing.model import REFUSED, Asked, Pressed
from tests.core.rig import ChannelMachine, machine_settings

from .conftest import AT_A_RESTART
from .fake_slack import ALICE, BOB, MALLORY, FakeMessage, FakeSlack, Limits, make_config

#: the conftest's check, but for one known record, as in test_slack_conformance.py: a restart
#: stops the bridge while bolt still acks an envelope over the closing Socket Mode session
#: (seen once in a full run, 2026-12-07, at this machine's teardown)
_slack_logs_no_errors = library_logs_nothing_wrong("slack_bolt", "slack_sdk", allow=AT_A_RESTART)

PEOPLE = {"alice": ALICE, "bob": BOB, "mallory": MALLORY}
CHANNEL = "C0AGENTS"
NOTIFY = "C0NOTIFY"
GROUP = "S0OPS"
#: what a person fills in (the modal's inputs by block: the menu's second choice, words) and
#: what the agent then gets
FILLED = {"f0": "1", "f1": "ships it"}
#: seconds to wait for something the fake Slack and slack-bolt do over loopback
WAIT = 10.0


def shown(message: Any) -> str:
    """What a person reads in a message: its blocks' texts (or its text without blocks),
    entities as their characters."""
    parts: list[str] = []
    for block in message.blocks or []:
        if block.get("type") in ("section", "header"):
            parts.append(str((block.get("text") or {}).get("text", "")))
        elif block.get("type") == "context":
            parts += [str(e.get("text", "")) for e in block.get("elements", [])]
    text = "\n".join(parts) if message.blocks else str(message.text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def action_ids(message: FakeMessage) -> list[str]:
    """The message's buttons' action ids, in order."""
    return [str(b.get("action_id")) for b in message.buttons]


class SlackBridge(ChannelMachine):
    """The kit's `ChannelModel` with the Slack channel on the fake Slack: a session's place
    is a parent message in the sessions channel, a refusal an ephemeral message, a form a
    modal; its own rule is words in a session's thread."""

    PLUGIN: ClassVar[ModuleType] = aep_bridge_slack
    CHANNEL = "slack"
    PEOPLE: ClassVar[dict[str, Any]] = PEOPLE
    APPROVERS = ("alice", "bob")  # Alice through the user group, Bob by id
    NAMES: ClassVar[dict[str, str]] = {"alice": ALICE["name"], "bob": BOB["name"]}

    async def _open_fake(self) -> FakeSlack:
        return await FakeSlack(limits=Limits.loose()).__aenter__()

    def _channel_block(self) -> dict[str, Any]:
        return make_config(self.slack, approvers=[BOB["id"]], approver_roles=[GROUP])

    # -- the kit's platform hooks ----------------------------------------------------------

    @property
    def slack(self) -> FakeSlack:
        assert self.fake is not None
        return self.fake  # type: ignore[no-any-return]

    def _parents(self) -> list[Any]:
        return [m for m in self.slack.parents(CHANNEL) if m.from_bot]

    def _notes(self, who: str) -> int:
        return len(self.slack.ephemeral(PEOPLE[who]))

    def _note(self, who: str) -> str:
        return str(self.slack.ephemeral(PEOPLE[who])[-1].text)

    async def _until(self, what: str, check: Any) -> Any:
        return await self.slack.wait_until(check, timeout=WAIT, what=what)

    def _begin(self, who: str, coroutine: Any) -> Pressed:
        """Something `who` does in Slack, under way (its envelope queued for the bridge)."""
        return self._begun(self.loop.create_task(coroutine), who)

    def _press(self, asked: Asked, index: int, who: str) -> Pressed:
        card = self._card(asked)
        return self._begin(who, self.slack.press(PEOPLE[who], card, action_ids(card)[index]))

    async def _answered(self, pressed: Pressed) -> Any:
        """Wait until the envelope was acked and decided: a command at an agent, or a private
        note to the person."""
        result = await asyncio.wait_for(pressed.what, WAIT)
        await self._decided(pressed, "the envelope decided")
        return result

    def _bot_messages(self, k: int) -> list[FakeMessage]:
        parent = self._thread_of(k)
        assert parent is not None
        return [m for m in self.slack.thread(CHANNEL, parent) if m.from_bot]

    def _message(self, key: str) -> Any:
        return self.slack.message(CHANNEL, key)

    def _message_key(self, message: FakeMessage) -> str:
        return str(message.ts)

    def _shown(self, message: Any) -> str:
        return shown(message)

    def _buttons(self, message: FakeMessage) -> int:
        return len(action_ids(message))

    def _look(self, message: Any) -> str:
        return json.dumps(message.blocks)

    def _heads_ups(self, asked: Asked) -> list[str]:
        heads_ups = [m for m in self.slack.messages(NOTIFY) if m.from_bot]
        link = f"p{(asked.message or '').replace('.', '')}"
        return [shown(m) for m in heads_ups if link in json.dumps(m.blocks) + m.text]

    def _faults(self) -> list[Any]:
        return [*self.slack.violations, *self.slack.unanswered()]

    def _fill_in(self, asked: Asked, who: str, restart: bool) -> None:
        before = self._look(self._card(asked))
        views = len(self.slack.views)
        pressed = self._press(asked, 0, who)
        if who not in self.APPROVERS:
            self._run(self._answered(pressed))
            assert len(self.slack.views) == views  # nothing opened for a stranger
            self._refused(who, asked, before)
            return
        self._run(asyncio.wait_for(pressed.what, WAIT))
        self._run(self._until("the modal", lambda: len(self.slack.views) > views))
        view = self.slack.views[-1]
        if restart:  # the modal stays open in the person's Slack
            self._restart_all()
            self._settle()
        self._event(f"form submitted by an approver, restart between: {restart}")
        submitted = self._begin(who, self.slack.submit(PEOPLE[who], view, FILLED))
        self._run(self._answered(submitted))
        self._taken(asked, who, None)

    def _check_places(self) -> None:
        """One parent message per session, never a second, showing it ended once it did."""
        parents = self._parents()
        started = [k for k, s in enumerate(self.sessions) if s.started]
        assert len(parents) == len(started), [shown(p) for p in parents]
        for k in started:
            ts = self._thread_of(k)
            assert ts is not None
            [parent] = [p for p in parents if p.ts == ts]
            text = shown(parent)
            assert f"session {k}" in text, text
            assert ("Ended" in text) == self.sessions[k].ended, (k, text)

    # -- Slack's own rule ------------------------------------------------------------------

    def _reply(self, asked: Asked, who: str) -> None:
        """`who` writes in the card's thread: while exactly one open question there takes
        words, an approver's words answer it and a stranger's are refused privately; else
        the words are a chat message to the session (the core answers in the thread)."""
        parent = self._thread_of(asked.session)
        assert parent is not None
        before = json.dumps(self._card(asked).blocks)
        takers = [
            a
            for a in self.asked
            if a.session == asked.session and a.state == "open" and not a.informational
        ]
        text = f"words from {who}"
        commands = self._all_commands()
        said = self._begin(who, self.slack.say(PEOPLE[who], CHANNEL, text, thread_ts=parent))
        if len(takers) == 1:
            self._run(self._answered(said))
        else:  # a chat message: the core's answer lands in the thread
            self._run(asyncio.wait_for(said.what, WAIT))
            self._run(asyncio.sleep(0.05))
            self._settle()
        self._event(f"words by {who} with {min(len(takers), 2)} question(s) taking them")
        if len(takers) != 1:
            assert self._all_commands() == commands
        elif who not in self.APPROVERS:
            self.notes[who] += 1
            assert self._note(who) == REFUSED
            assert json.dumps(self._card(asked).blocks) == before
        else:
            [taker] = takers
            taker.state, taker.by = "answered", self.NAMES[who]
            taker.answer, taker.shown = {"text": text}, text

    @precondition(lambda self: any(not self.sessions[a.session].ended for a in self.asked))
    @rule(data=st.data(), who=st.sampled_from(sorted(PEOPLE)))
    def reply_in_a_thread(self, data: st.DataObject, who: str) -> None:
        live = [a for a in self.asked if not self.sessions[a.session].ended]
        self._reply(data.draw(st.sampled_from(live)), who)


TestSlackBridge = SlackBridge.TestCase
TestSlackBridge.settings = machine_settings(examples=10, steps=20)


# -- sequences worth keeping as explicit tests ----------------------------------------------


def test_a_form_opened_before_a_restart_is_answered_after_it() -> None:
    """Slack keeps a modal open in the person's client while the bridge restarts; its
    submission must still answer the agent."""
    machine = SlackBridge()
    try:
        asked = machine._ask(0, "form")
        machine._fill_in(asked, "alice", restart=True)
        machine.check()
    finally:
        machine.teardown()


def test_a_card_posted_before_a_kill_is_answered_through_its_buttons() -> None:
    """The bridge is killed with a card out; after the restart its original buttons answer
    the agent once, and the session keeps its one parent message."""
    machine = SlackBridge()
    try:
        asked = machine._ask(0, "options")
        machine.restart(killed=True)
        machine._press_once(asked, 1, "bob")
        machine.check()
    finally:
        machine.teardown()
