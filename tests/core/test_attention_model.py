"""The attention loop against a model of what a person should see, in random orders.

Hypothesis drives a whole bridge (`Rig`: the real hub, store, bridge, outboxes and memory
channels) through random sequences of questions, presses and text replies by approvers and
strangers in either channel, an agent that accepts, refuses, or answers only after the ack
window has passed, answers in the terminal, timeouts, the end of the session, restarts
of the bridge, and answers given while the agent is away. After every step the cards in
both channels, the presses' results and the commands the agent received are compared with
a small model of the loop's promises: the first allowed answer wins and is credited to
whoever gave it, exactly one command goes out per answer taken, a refusal or silence opens
the request again, an answer given while the agent is away waits for it (and goes as soon as
the agent's `hello` is back, though it say nothing more), a closed card has no buttons, and a
restart loses no card and makes no second thread or card. A held Stop's question (issue 33:
marked `aepbridgesteer`, answered by **Done** or by words that become the agent's next
instruction) takes words only where the channel allows instructions (alpha, not beta),
refuses them elsewhere without closing, and once the agent took them shows them in the
thread of every channel as the person's own message, once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from aep_bridge.aep import Event
from aep_bridge.contract.types import ChannelUser, ResolutionStatus
from aep_bridge.intake.hub import Delivery
from aep_bridge.intake.principals import Principal
from aep_bridge.loop.approvers import NOT_OWNER

from .rig import ALICE, BOB, MALLORY, BridgeMachine, machine_settings, two_channels

#: what a card says while its answer waits for the agent to reconnect
WAITING = "waiting for the agent to reconnect"

CHANNELS = ("alpha", "beta")
#: an approver of both channels in the owner model only, where the route admits the owner
#: (alice) and bob alone: refused there before anything changes, as mallory is everywhere
CAROL = ChannelUser(id="carol", name="Carol")
PEOPLE = {"alice": ALICE, "bob": BOB, "carol": CAROL, "mallory": MALLORY}
APPROVERS = ("alice", "bob")  # on both channels (`two_channels`)
REPLY = "only the staging one"
#: the words of an instruction (a text answer to a held Stop)
INSTRUCTION = "run the tests again"
#: the channel that allows instructions (beta does not)
INSTRUCTING = "alpha"
#: the agent's behaviour towards the next answer: take it, refuse it, or stay silent past
#: the ack window and take it later (when the model says the agent catches up)
AGENT = ("accepts", "refuses", "is slow")
#: short, so a silent agent does not slow the run down
ACK_WINDOW = 0.05
#: who answers and how the agent takes it, for a press or a reply
ANSWERING = {
    "channel": st.sampled_from(CHANNELS),
    "who": st.sampled_from(sorted(PEOPLE)),
    "behaviour": st.sampled_from(AGENT),
}


#: presses by card id that fit no option of the request (a crafted button or callback)
FORGED = (
    "past the last option",
    "a negative index",
    "an option id it does not have",
    "form values on a permission card",
)


@dataclass
class Asked:
    """What the model expects of one question."""

    event: Event
    options: tuple[str, ...]
    informational: bool = False  # answered only in the agent's terminal: a card, no buttons
    state: str = "open"  # open, answered (from chat), elsewhere, expired, dismissed
    by: str | None = None  # who answered it from chat
    shown: str | None = None  # the answer its card shows
    commands: int = 0  # commands the agent should have received for it
    last: str | None = None  # what became of the last answer that did not close it
    steer: bool = False  # a held Stop's question: its words are an instruction


@dataclass
class Held:
    """An answer the slow agent received and has not acknowledged yet."""

    command: Event
    asked: Asked
    by: str
    shown: str


class AttentionLoop(BridgeMachine):
    rig_options: ClassVar[dict[str, Any]] = {
        "ack_timeout": ACK_WINDOW,
        "channels": {
            name: {**block, "allow_instructions": name == INSTRUCTING}
            for name, block in two_channels().items()
        },
    }
    #: beta shows a card's context (Telegram, Discord and Slack do): what its session said
    #: just before a card goes in the card's message there, as its own messages in alpha
    carrying: ClassVar[frozenset[str]] = frozenset({"beta"})
    #: whose token the agent emits with (its session's owner), and what a refusal says
    principal: ClassVar[Principal | None] = None
    refusal: ClassVar[str] = "you are not an approver for this channel"

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[Asked] = []
        self.held: list[Held] = []
        self.ended = False
        self.behaviour = "accepts"
        self.received: list[Event] = []
        self.said: list[str] = []  # the agent's replies, in the order it gave them
        self.audit_ids: list[object] = []  # the audit trail's record ids seen so far
        # its `hello` names its process: after a restart, saying it again is enough
        self.agent = self.rig.agent(
            decide=self._decide, instance="test-host/4242", principal=self.principal
        )
        self.agent.participant.push = self._push
        self.agent.start()
        self._settle()

    # -- plumbing ------------------------------------------------------------------------

    def _push(self, item: object) -> None:
        if isinstance(item, Delivery) and self.behaviour == "is slow":
            self.received.append(item.event)  # taken, not acknowledged until it catches up
            return
        self.agent._push(item)

    def _decide(self, command: Event) -> str | None:
        """A real agent takes one answer per request and refuses any after it."""
        asked = self._asked(command.subject)
        if self.behaviour == "refuses" or asked.state != "open":
            return "invalid"
        return None

    def _asked(self, request_id: str | None) -> Asked:
        return next(a for a in self.asked if a.event.id == request_id)

    # -- the agent -------------------------------------------------------------------------

    @precondition(lambda self: not self.ended and len(self.asked) < 6)
    @rule(options=st.integers(min_value=1, max_value=3), informational=st.booleans())
    def ask(self, options: int, informational: bool) -> None:
        ids = tuple(f"opt{n}" for n in range(options))
        how = {"respond_via": ["oob"]} if informational else {}
        event = self.agent.ask(f"question {len(self.asked)}?", options=ids, **how)
        self.asked.append(Asked(event, ids, informational))
        self._settle()

    @precondition(lambda self: not self.ended and len(self.asked) < 6)
    @rule()
    def finish_and_ask_what_next(self) -> None:
        """The daemon holds the agent's Stop and asks what next (issue 33, interface 3)."""
        event = self.agent.emit(
            "attention.requested",
            {
                "kind": "input",
                "prompt": f"question {len(self.asked)}? test-agent finished: what next?",
                "options": [{"id": "done", "label": "Done"}],
                "respond_via": ["control"],
            },
            capture="full",
            extensions={"aepbridgesteer": "stop"},
        )
        self.asked.append(Asked(event, ("done",), steer=True))
        self._settle()

    @precondition(lambda self: not self.ended and len(self.asked) < 6)
    @rule(options=st.integers(min_value=1, max_value=3))
    def ask_and_answer_in_the_terminal_at_once(self, options: int) -> None:
        """A question answered in the terminal before its card could go out: the card goes
        in the thread's order, once, closed, and its heads-up never rings."""
        ids = tuple(f"opt{n}" for n in range(options))
        event = self.agent.ask(f"question {len(self.asked)}?", options=ids)
        request = event.id
        self.agent.emit("attention.answered", {"answer": {"option": ids[-1]}}, subject=request)
        self.agent.emit("attention.resolved", {"resolution": "answered"}, subject=request)
        self.asked.append(Asked(event, ids, state="elsewhere", shown=ids[-1].capitalize()))
        self._settle()

    @precondition(lambda self: not self.ended)
    @rule(calls=st.integers(min_value=0, max_value=2))
    def work_and_say_so(self, calls: int) -> None:
        """Tool calls (one activity message, edited) and a reply, between the questions."""
        for _ in range(calls):
            n = len(self.said)
            tool = {"name": "Bash", "call_id": f"call-{n}-{_}"}
            self.agent.emit("tool.requested", {"tool": tool, "args_redacted": {"command": "ls"}})
            self.agent.emit("tool.completed", {"tool": tool, "status": "success"})
        text = f"said {len(self.said)}"
        self.agent.emit(
            "message.agent.replied", {"message_id": text, "text": text}, capture="redacted"
        )
        self.said.append(text)
        self._settle()

    @precondition(lambda self: not self.ended and len(self.asked) < 6)
    @rule(calls=st.integers(min_value=0, max_value=2), options=st.integers(1, 3))
    def say_and_ask_at_once(self, calls: int, options: int) -> None:
        """Work, a reply and a question in one burst: where the channel shows a card's
        context, the card carries them (issue 32); their later edits reach it."""
        for _ in range(calls):
            tool = {"name": "Bash", "call_id": f"burst-{len(self.said)}-{_}"}
            self.agent.emit("tool.requested", {"tool": tool, "args_redacted": {"command": "ls"}})
        text = f"said {len(self.said)}"
        self.agent.emit(
            "message.agent.replied", {"message_id": text, "text": text}, capture="redacted"
        )
        self.said.append(text)
        ids = tuple(f"opt{n}" for n in range(options))
        event = self.agent.ask(f"question {len(self.asked)}?", options=ids)
        self.asked.append(Asked(event, ids))
        for _ in range(calls):  # the calls finish after the question: an edit of the card
            tool = {"name": "Bash", "call_id": f"burst-{len(self.said) - 1}-{_}"}
            self.agent.emit("tool.completed", {"tool": tool, "status": "success"})
        self._settle()

    @precondition(lambda self: self.asked)
    @rule(data=st.data())
    def answer_in_the_terminal(self, data: st.DataObject) -> None:
        asked = data.draw(st.sampled_from(self.asked))
        option = data.draw(st.sampled_from(asked.options))
        if asked.state != "open":
            return  # the agent has moved on from it
        request = asked.event.id
        self.agent.emit("attention.answered", {"answer": {"option": option}}, subject=request)
        self.agent.emit("attention.resolved", {"resolution": "answered"}, subject=request)
        asked.state, asked.shown = "elsewhere", option.capitalize()
        self._settle()

    @precondition(lambda self: self.asked)
    @rule(data=st.data())
    def time_out(self, data: st.DataObject) -> None:
        asked = data.draw(st.sampled_from(self.asked))
        if asked.state != "open":
            return
        self.agent.emit("attention.timeout", {}, subject=asked.event.id)
        asked.state = "expired"
        self._settle()

    @precondition(lambda self: not self.ended)
    @rule()
    def end_the_session(self) -> None:
        self.agent.emit("session.ended", {"reason": "normal"})
        self.ended = True
        for asked in self.asked:
            if asked.state == "open":
                asked.state = "dismissed"
        self._settle()

    @precondition(lambda self: self.held)
    @rule()
    def the_slow_agent_catches_up(self) -> None:
        """It acknowledges what it was sent, in order: the first answer still open wins."""
        held, self.held = self.held, []
        self.behaviour = "accepts"
        for answer in held:
            taken = answer.asked.state == "open"
            self.agent._react(answer.command)  # its ack, and its answered and resolved
            if taken:
                answer.asked.state, answer.asked.by = "answered", answer.by
                answer.asked.shown = answer.shown
        self._settle()

    # -- people ------------------------------------------------------------------------

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), **ANSWERING)
    def press(self, data: st.DataObject, channel: str, who: str, behaviour: str) -> None:
        k = data.draw(st.integers(min_value=0, max_value=len(self.asked) - 1))
        asked = self.asked[k]
        index = data.draw(st.integers(min_value=0, max_value=len(asked.options) - 1))
        card_id = self.rig.card(channel, k)[1].id
        expected = self._expected(asked, who)
        pressing = self.rig.channel(channel).press(f"{card_id}:{index}", PEOPLE[who])
        result = self._answer(behaviour, pressing)
        assert result.status is expected, (result, expected, asked)
        self._told_what_the_card_says(result, channel, k)
        if expected is ResolutionStatus.ACCEPTED:
            self._taken(asked, who, behaviour, asked.options[index].capitalize())

    def _told_what_the_card_says(self, result: Any, channel: str, k: int) -> None:
        """A press on a card that cannot be answered any more is told what became of its
        question, in the card's own words; a stranger is told only that they may not answer
        (issue 30, item 9)."""
        if result.status in (ResolutionStatus.ALREADY_ANSWERED, ResolutionStatus.EXPIRED):
            assert result.outcome, result
            assert result.message == f"This question is closed: {result.outcome}"[:200]
            assert result.outcome in self.rig.card_text(channel, k), (result, channel, k)
        else:
            assert result.outcome is None, result
        if result.status is ResolutionStatus.NOT_ALLOWED:
            assert result.message == f"Refused: {self.refusal}"

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), **ANSWERING)
    def reply_to_the_card(
        self, data: st.DataObject, channel: str, who: str, behaviour: str
    ) -> None:
        k = data.draw(st.integers(min_value=0, max_value=len(self.asked) - 1))
        asked = self.asked[k]
        message_id = self.rig.card(channel, k)[2]
        thread = self.rig.thread_of(channel)
        taken = self._expected(asked, who, channel, words=True) is ResolutionStatus.ACCEPTED
        self._answer(
            behaviour, self.rig.channel(channel).reply(thread, REPLY, PEOPLE[who], message_id)
        )
        if taken:
            self._taken(asked, who, behaviour, REPLY)

    @precondition(lambda self: any(a.steer for a in self.asked))
    @rule(data=st.data(), **ANSWERING)
    def instruct(self, data: st.DataObject, channel: str, who: str, behaviour: str) -> None:
        """Words for a held Stop: the agent's next instruction from an approver where the
        channel allows them; refused, and nothing changes, from anyone else or elsewhere."""
        k = data.draw(st.sampled_from([k for k, a in enumerate(self.asked) if a.steer]))
        asked = self.asked[k]
        card_id = self.rig.card(channel, k)[1].id
        expected = self._expected(asked, who, channel, words=True)
        answering = self.rig.channel(channel).core.answer_text(card_id, INSTRUCTION, PEOPLE[who])
        result = self._answer(behaviour, answering)
        assert result.status is expected, (result, expected, asked, channel)
        if expected is ResolutionStatus.REJECTED:
            assert "allow_instructions" in (result.reason or ""), result
        if expected is ResolutionStatus.ACCEPTED:
            self._taken(asked, who, behaviour, INSTRUCTION)

    @precondition(lambda self: self.asked)
    @rule(
        data=st.data(),
        channel=st.sampled_from(CHANNELS),
        who=st.sampled_from(sorted(PEOPLE)),
        forged=st.sampled_from(FORGED),
    )
    def press_something_the_card_does_not_offer(
        self, data: st.DataObject, channel: str, who: str, forged: str
    ) -> None:
        """A crafted press by card id (contract 1.2) that fits no option of the request: the
        core refuses it, after the approver check, and sends nothing."""
        k = data.draw(st.integers(min_value=0, max_value=len(self.asked) - 1))
        asked = self.asked[k]
        card_id = self.rig.card(channel, k)[1].id
        core, user = self.rig.channel(channel).core, PEOPLE[who]
        match forged:
            case "past the last option":
                pressing = core.resolve_permission(card_id, len(asked.options), user)
            case "a negative index":
                pressing = core.resolve_permission(card_id, -1, user)
            case "an option id it does not have":
                pressing = core.resolve_permission(card_id, "zz", user)
            case _:  # "form values on a permission card"
                pressing = core.answer_form(card_id, {"f1": "c1"}, user)
        result = self._answer("accepts", pressing)
        expected = self._expected(asked, who)
        if expected is ResolutionStatus.ACCEPTED:
            expected = ResolutionStatus.REJECTED
        assert result.status is expected, (forged, result, expected, asked)

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), channel=st.sampled_from(CHANNELS), who=st.sampled_from(sorted(PEOPLE)))
    def ask_before_a_step_of_a_form(self, data: st.DataObject, channel: str, who: str) -> None:
        """What a channel asks before it changes anything for a press that is not yet an
        answer (a form's step, a form's modal): a stranger is refused whatever became of the
        card; an approver may go on while the question is open, and is told what became of
        it once it is not; asking changes nothing (the invariants check it)."""
        k = data.draw(st.integers(min_value=0, max_value=len(self.asked) - 1))
        card_id = self.rig.card(channel, k)[1].id
        result = self._run(self.rig.channel(channel).core.may_answer(card_id, PEOPLE[who]))
        expected = self._expected(self.asked[k], who)
        if expected is ResolutionStatus.ACCEPTED:
            assert result is None, (who, result)
        else:
            assert result is not None, who
            assert result.status is expected, (result, expected)
            self._told_what_the_card_says(result, channel, k)
        self._settle()

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), behaviour=st.sampled_from(AGENT))
    def alice_and_bob_press_at_once(self, data: st.DataObject, behaviour: str) -> None:
        """One press in each channel in the same turn of the loop: one wins, one is told."""
        k = data.draw(st.integers(min_value=0, max_value=len(self.asked) - 1))
        asked = self.asked[k]
        options = st.integers(min_value=0, max_value=len(asked.options) - 1)
        picks = {"alice": data.draw(options), "bob": data.draw(options)}
        cards = {name: self.rig.card(name, k)[1].id for name in CHANNELS}
        expected = self._expected(asked, "alice")
        alpha, beta = self.rig.channel("alpha"), self.rig.channel("beta")

        async def both() -> list[Any]:
            return await asyncio.gather(
                alpha.press(f"{cards['alpha']}:{picks['alice']}", ALICE),
                beta.press(f"{cards['beta']}:{picks['bob']}", BOB),
            )

        statuses = [r.status for r in self._answer(behaviour, both())]
        if expected is not ResolutionStatus.ACCEPTED:
            assert statuses == [expected, expected], statuses
            return
        assert sorted(statuses) == [ResolutionStatus.ACCEPTED, ResolutionStatus.ALREADY_ANSWERED]
        who = "alice" if statuses[0] is ResolutionStatus.ACCEPTED else "bob"
        self._taken(asked, who, behaviour, asked.options[picks[who]].capitalize())

    def _expected(
        self, asked: Asked, who: str, channel: str | None = None, *, words: bool = False
    ) -> ResolutionStatus:
        """What an answer to `asked` by `who` gets: a press, or (`words`) a text answer in
        `channel`, which to a held Stop is an instruction."""
        if who not in APPROVERS:
            return ResolutionStatus.NOT_ALLOWED
        if words and asked.steer and channel != INSTRUCTING:
            return ResolutionStatus.REJECTED  # whatever became of it: the channel's rule
        if asked.state == "expired":
            return ResolutionStatus.EXPIRED
        if asked.state != "open":
            return ResolutionStatus.ALREADY_ANSWERED
        if asked.informational:  # a press forged on a card that has no buttons
            return ResolutionStatus.INFORMATIONAL
        return ResolutionStatus.ACCEPTED

    def _answer(self, behaviour: str, answering: Any) -> Any:
        """Answer (press or reply) with the agent behaving so; wait until all is settled."""
        self.behaviour = behaviour
        try:
            result = self._run(answering)
            self._settle()  # a slow agent's ack window passes here
        finally:
            self.behaviour = "accepts"
        return result

    def _taken(self, asked: Asked, who: str, behaviour: str, shown: str) -> None:
        """`who`'s answer to `asked` was taken and sent: what the model expects of it."""
        asked.commands += 1
        if behaviour == "accepts":
            asked.state, asked.by, asked.shown = "answered", PEOPLE[who].name, shown
        elif behaviour == "refuses":
            asked.last = "refused the answer"
        else:
            asked.last = "did not reach the agent"
            [command] = self.received
            self.held.append(Held(command, asked, PEOPLE[who].name, shown))
        self.received.clear()

    # -- the bridge ------------------------------------------------------------------------

    @precondition(lambda self: self.asked)
    @rule(
        data=st.data(),
        channel=st.sampled_from(CHANNELS),
        who=st.sampled_from(APPROVERS),
        behaviour=st.sampled_from(("accepts", "is slow")),
        steps=st.integers(min_value=0, max_value=6),
    )
    def restart_with_an_answer_on_its_way(
        self, data: st.DataObject, channel: str, who: str, behaviour: str, steps: int
    ) -> None:
        """Stop the bridge `steps` turns of the loop after a press, before the agent's ack
        (a slow agent has not acked when the bridge stops): the answer is sent again after
        the restart, with the same id, and the agent acts on it once."""
        k = data.draw(st.integers(min_value=0, max_value=len(self.asked) - 1))
        asked = self.asked[k]
        index = data.draw(st.integers(min_value=0, max_value=len(asked.options) - 1))
        card_id = self.rig.card(channel, k)[1].id
        expected = self._expected(asked, who)
        self.behaviour = behaviour
        result = self._run(self.rig.channel(channel).press(f"{card_id}:{index}", PEOPLE[who]))
        assert result.status is expected, (result, expected, asked)
        for _ in range(steps):
            self._run(asyncio.sleep(0))
        self._restart([self.agent], flush_timeout=0)
        self.behaviour = "accepts"
        for command in {c.id: c for c in self.received}.values():
            self.agent._react(command)  # it wakes up and takes it
        self.received.clear()
        self._settle()
        if expected is ResolutionStatus.ACCEPTED:
            asked.commands += 1
            asked.state, asked.by = "answered", PEOPLE[who].name
            asked.shown = asked.options[index].capitalize()

    @rule()
    def restart(self) -> None:
        self._restart([self.agent])
        self._settle()

    @precondition(lambda self: any(a.state == "open" and not a.informational for a in self.asked))
    @rule(data=st.data(), channel=st.sampled_from(CHANNELS), who=st.sampled_from(APPROVERS))
    def answer_while_the_agent_is_away_across_a_restart(
        self, data: st.DataObject, channel: str, who: str
    ) -> None:
        """The bridge restarts while the agent is away. An answer given then waits for the
        agent (its cards say so), outlives another restart, and is sent once, when the
        agent reconnects and sends its question again (which claims its session)."""
        k = data.draw(
            st.sampled_from(
                [k for k, a in enumerate(self.asked) if a.state == "open" and not a.informational]
            )
        )
        asked = self.asked[k]
        index = data.draw(st.integers(min_value=0, max_value=len(asked.options) - 1))
        self.rig.hub.leave(self.agent.participant)
        self._restart([])
        card_id = self.rig.card(channel, k)[1].id
        result = self._run(self.rig.channel(channel).press(f"{card_id}:{index}", PEOPLE[who]))
        assert result.status is ResolutionStatus.ACCEPTED, result
        self._settle()
        self._restart([])
        self._settle()
        for name in CHANNELS:
            assert WAITING in self.rig.card_text(name, k), self.rig.card_text(name, k)
            assert self.rig.buttons(name, k) == []
        sent = len(self.agent.commands)
        self.rig.hub.join(self.agent.participant)
        self.agent.hub = self.rig.hub
        self.rig.hub.admit([asked.event], origin=self.agent.participant)
        self._run(_until(lambda: len(self.agent.commands) > sent))
        self._settle()
        asked.commands += 1
        asked.state, asked.by = "answered", PEOPLE[who].name
        asked.shown = asked.options[index].capitalize()

    @precondition(lambda self: any(a.state == "open" and not a.informational for a in self.asked))
    @rule(
        data=st.data(),
        channel=st.sampled_from(CHANNELS),
        who=st.sampled_from(APPROVERS),
        back_first=st.booleans(),
        restarts=st.integers(min_value=1, max_value=2),
    )
    def restart_and_the_agent_reconnects_silently(
        self, data: st.DataObject, channel: str, who: str, back_first: bool, restarts: int
    ) -> None:
        """The bridge restarts (once or twice) while the agent is away; the agent reconnects
        and says `hello`, and nothing else (it waits for its answer). An answer given on an
        original card, before it is back or after, reaches it once, at once: its `hello`
        gives it its session back (issue 30, item 8)."""
        k = data.draw(
            st.sampled_from(
                [k for k, a in enumerate(self.asked) if a.state == "open" and not a.informational]
            )
        )
        asked = self.asked[k]
        index = data.draw(st.integers(min_value=0, max_value=len(asked.options) - 1))
        self.rig.hub.leave(self.agent.participant)
        for _ in range(restarts):
            self._restart([])
            self._settle()
        sent = len(self.agent.commands)
        if back_first:
            self.agent.reconnect(self.rig.hub)
        card_id = self.rig.card(channel, k)[1].id
        result = self._run(self.rig.channel(channel).press(f"{card_id}:{index}", PEOPLE[who]))
        assert result.status is ResolutionStatus.ACCEPTED, result
        self._settle()
        if not back_first:
            for name in CHANNELS:
                assert WAITING in self.rig.card_text(name, k), self.rig.card_text(name, k)
                assert self.rig.buttons(name, k) == []
            assert len(self.agent.commands) == sent
            self.agent.reconnect(self.rig.hub)  # a hello, no event
        self._run(_until(lambda: len(self.agent.commands) > sent))
        self._settle()
        asked.commands += 1
        asked.state, asked.by = "answered", PEOPLE[who].name
        asked.shown = asked.options[index].capitalize()

    # -- what everyone sees ------------------------------------------------------------------

    @invariant()
    def the_audit_trail_records_every_question_and_every_answer_sent_once(self) -> None:
        """Issue 34: one `question.asked` per question; each answer the agent got is on the
        trail once, by an approver, under the command's id; nothing on it ever goes away
        (restarts, kills of answers in flight), and no refused press is an answer."""
        rows = self.rig.store.execute("SELECT id, kind, command_id, actor_id FROM audit")
        ids = [row[0] for row in rows]
        assert ids[: len(self.audit_ids)] == self.audit_ids, "a record went away"
        self.audit_ids = ids
        assert [row[1] for row in rows].count("question.asked") == len(self.asked)
        answered = [r for r in rows if r[1] in ("question.answered", "instruction.sent")]
        by_command = [r[2] for r in answered]
        assert len(by_command) == len(set(by_command)), answered
        assert {r[3] for r in answered} <= set(APPROVERS), answered
        got = {c.id for c in [*self.agent.commands, *self.received]}
        assert got <= set(by_command), (got, answered)
        refused = {r[3] for r in rows if r[1] == "press.refused"}
        assert refused <= set(PEOPLE), refused

    @invariant()
    def one_thread_and_one_card_per_question_in_each_channel(self) -> None:
        for name in CHANNELS:
            memory = self.rig.channel(name)
            assert len(memory.threads) == 1, memory.threads
            assert len(memory.cards) == len(self.asked), (name, list(memory.cards))

    @invariant()
    def each_card_shows_what_became_of_its_question(self) -> None:
        for name in CHANNELS:
            for k, asked in enumerate(self.asked):
                text = self.rig.card_text(name, k)
                buttons = self.rig.buttons(name, k)
                where = (name, k, asked, text, buttons)
                assert f"question {k}?" in text, where  # a closed card keeps its question
                if asked.state == "open":
                    assert len(buttons) == (0 if asked.informational else len(asked.options)), where
                    if asked.last:
                        assert asked.last in text, where
                else:
                    assert buttons == [], where
                if asked.state == "answered":
                    assert f"Answered by {asked.by}: " in text, where
                    assert str(asked.shown) in text, where
                elif asked.state == "elsewhere":
                    assert f"Answered in the terminal: {asked.shown}" in text, where
                elif asked.state == "expired":
                    assert "Expired" in text, where
                elif asked.state == "dismissed":
                    assert "Dismissed" in text, where

    @invariant()
    def the_thread_keeps_the_order_the_agent_spoke_in(self) -> None:
        for name in CHANNELS:
            # a line of its own: in its message, merged, or in a card's context (issue 32)
            texts = [line for t in self.rig.thread_texts(name) for line in t.split("\n")]
            said = [t for t in texts if t.startswith("said ")]
            assert list(dict.fromkeys(said)) == self.said, (name, texts)

    @invariant()
    def every_reply_is_shown_once_in_each_channel(self) -> None:
        """In a message of its own, merged with others, or in a card's context: once."""
        for name in CHANNELS:
            lines = [line for t in self.rig.thread_texts(name) for line in t.split("\n")]
            for text in self.said:
                assert lines.count(text) == 1, (name, text, self.rig.thread_texts(name))

    @invariant()
    def a_question_rings_once_at_most_and_only_while_it_may_be_open(self) -> None:
        for name in CHANNELS:
            memory = self.rig.channel(name)
            rung = [m.text for m in memory.messages if m.thread_id is None]
            assert all("asks permission" in t or "asks for input" in t for t in rung), rung
            assert len(rung) <= len(self.asked), (name, rung)

    @invariant()
    def an_instruction_taken_shows_once_as_the_persons_message_everywhere(self) -> None:
        """Every instruction the agent took is in the thread of every channel as its
        sender's own message, once; a refused or pending one, a Done, or an ordinary
        question's words never are."""
        taken: dict[str, int] = {}
        for asked in self.asked:
            if asked.steer and asked.state == "answered" and asked.shown in (INSTRUCTION, REPLY):
                line = f"{asked.by}: {asked.shown}"
                taken[line] = taken.get(line, 0) + 1
        for name in CHANNELS:
            lines = [line for t in self.rig.thread_texts(name) for line in t.split("\n")]
            shown = {
                f"{p.name}: {words}": lines.count(f"{p.name}: {words}")
                for p in PEOPLE.values()
                for words in (INSTRUCTION, REPLY)
            }
            assert {k: v for k, v in shown.items() if v} == taken, (name, lines)

    @invariant()
    def the_agent_got_exactly_one_command_per_answer_taken(self) -> None:
        by_request: dict[str, set[str]] = {}
        for command in [*self.agent.commands, *self.received]:
            assert command.type == "control.attention.respond"
            by_request.setdefault(command.subject or "", set()).add(command.id)
        for answer in self.held:
            by_request.setdefault(answer.command.subject or "", set()).add(answer.command.id)
        for asked in self.asked:
            assert len(by_request.pop(asked.event.id, set())) == asked.commands, asked
        assert by_request == {}


async def _until(check: Any, seconds: float = 5.0) -> None:
    """Wait (real time, generously) until `check()` is true."""
    for _ in range(int(seconds / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("it did not happen in time")


TestAttentionLoop = AttentionLoop.TestCase
TestAttentionLoop.settings = machine_settings(examples=60, steps=25)


class OwnerAttentionLoop(AttentionLoop):
    """The same loop on a team's bridge (issue 34): the session is alice's (her token sent
    it), its route's approvers are "owner" and bob, and carol approves in both channels but
    is neither: her presses, replies and instructions are refused with the owner rule's
    reason before anything changes, and nothing is answered twice."""

    rig_options: ClassVar[dict[str, Any]] = {
        **AttentionLoop.rig_options,
        "channels": {
            name: {**block, "approvers": [*block["approvers"], "carol"]}
            for name, block in AttentionLoop.rig_options["channels"].items()
        },
        "people": {who: dict.fromkeys(CHANNELS, who) for who in ("alice", "bob", "carol")},
        "routes": [{"match": {}, "channels": list(CHANNELS), "approvers": ["owner", "bob"]}],
    }
    principal = Principal("alice", "agent")
    refusal = NOT_OWNER


TestOwnerAttentionLoop = OwnerAttentionLoop.TestCase
TestOwnerAttentionLoop.settings = machine_settings(examples=30, steps=25)
