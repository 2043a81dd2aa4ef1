"""A model-based test of a channel inside a whole bridge: `ChannelModel`, a Hypothesis state
machine whose model of the questions, answers and people is the same for every platform.

Agents start sessions, ask questions (options, informational cards, forms, words), answer
some in their terminal (a press racing that answer too) and end their sessions; approvers and
a stranger press buttons, twice at once, and fill in forms (submitted after a restart too);
the bridge restarts, cleanly or killed, also while a card is on its way. After every step:
each question answered on the platform reached its agent as exactly one
`control.attention.respond` with the chosen option (or words, or the form's values), credited
on its card to the approver who chose it; a stranger's press sends nothing, leaves the card as
it was and is answered privately; every card is shown and shows what became of its question
(a closed one has no buttons); a question's heads-up is one message; the platform saw no
broken limit and nothing left unanswered. A kill while a card is on its way may show it (and
its heads-up) twice: delivery is at least once.

A subclass gives two sets of hooks (each raises `NotImplementedError` here):

- the bridge (`_run`, `_settle`, `_idle`, `_restart`, `_new_agent`, `_thread_of`): the
  real bridge in the machine's own event loop, the platform's fake outliving its restarts;
- the platform (`_until`, `_press`, `_answered` (`_decided` helps), `_notes`, `_note`,
  `_bot_messages`, `_message`, `_message_key`, `_shown`, `_buttons`, `_look`, `_heads_ups`,
  `_faults`, `_fill_in`, `_check_places`): what a person sees and does on the fake, and the
  platform's own rule for a session's place (a thread, a parent message); `_tell` where a
  platform tells a person less often than once per refusal (Matrix: once per card).

It adds its own rules and invariants (replies, a platform's quirks) beside these. `check()`
runs every shared invariant, for regression tests kept from what the machine found.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ..aep.envelope import Event
from .agent import ScriptedAgent

__all__ = [
    "CLOSED",
    "FORM",
    "FORM_ANSWER",
    "KINDS",
    "REFUSED",
    "Asked",
    "ChannelModel",
    "ModelSession",
    "Pressed",
]

#: what the core tells a stranger who presses, replies or submits
REFUSED = "Refused: you are not an approver for this channel"
#: how the core's private note to a late presser begins (the card's outcome follows)
CLOSED = "This question is closed: "
#: the questions an agent asks: buttons (twice as often), a card without buttons (answered in
#: the terminal only), a form, words
KINDS = ("options", "options", "informational", "form", "words")
#: the form the agent asks for, and the answer a person's filling in must become
FORM: list[dict[str, Any]] = [
    {
        "id": "env",
        "type": "select",
        "label": "Environment",
        "required": True,
        "choices": [{"id": "stg", "label": "Staging"}, {"id": "prod", "label": "Production"}],
    },
    {"id": "note", "type": "string", "label": "Release note", "required": True},
]
FORM_ANSWER: dict[str, Any] = {"values": {"env": "prod", "note": "ships it"}}


@dataclass
class ModelSession:
    """One agent's session, as the model knows it."""

    agent: ScriptedAgent
    started: bool = False
    ended: bool = False


@dataclass
class Asked:
    """What the model expects of one question and its card."""

    session: int
    event: Event
    options: tuple[str, ...]
    form: bool = False
    informational: bool = False
    state: str = "open"  # open, answered (on the platform), elsewhere, dismissed
    by: str | None = None  # the approver credited on the card
    shown: str | None = None  # the answer the card shows
    answer: dict[str, Any] | None = None  # what the agent was sent
    message: Any = None  # the card's message on the fake platform (`_message_key`)
    words: bool = False  # answered by words (a reply)
    refused: int = 0  # answers sent that the agent refused (it had answered in its terminal)
    restarts: int = 0  # of the bridge when the card was posted
    killed: bool = False  # the bridge was killed while its card was on its way

    @property
    def buttons(self) -> int:
        """How many buttons its card shows: none once closed, one (Fill in) for a form."""
        if self.state != "open" or self.informational or self.words:
            return 0
        return 1 if self.form else len(self.options)


@dataclass
class Pressed:
    """Something a person did (a press, a submission, words) and what it should become:
    `what` is the platform's handle on it (an interaction, a task)."""

    what: Any
    who: str
    notes_before: int = 0
    commands_before: int = 0


class ChannelModel(RuleBasedStateMachine):
    """The shared model, rules and invariants; see the module's docstring for the hooks."""

    #: the people by name (`alice`): the platform's user each one is
    PEOPLE: ClassVar[Mapping[str, Any]] = {}
    #: who of them may answer
    APPROVERS: ClassVar[tuple[str, ...]] = ()
    #: the name a card credits each approver with
    NAMES: ClassVar[Mapping[str, str]] = {}
    #: the agents' sessions
    SESSIONS: ClassVar[tuple[str, ...]] = ("s0", "s1")
    #: how many questions a run asks at most
    MAX_ASKED: ClassVar[int] = 8

    def __init__(self) -> None:
        super().__init__()
        self.sessions = [
            ModelSession(self._new_agent(name, self._decide)) for name in self.SESSIONS
        ]
        self.asked: list[Asked] = []
        self.notes = {who: 0 for who in self.PEOPLE}  # private answers each person should have
        self.restarts = 0
        self.start_a_session()

    # -- the bridge's hooks --------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run `coroutine` to its end in the machine's event loop."""
        raise NotImplementedError

    def _settle(self) -> None:
        """Wait until the bridge has handled everything and sent what it queued."""
        raise NotImplementedError

    def _restart(self, agents: list[ScriptedAgent], *, flush_timeout: float = 5.0) -> None:
        """Stop the bridge, flushing for up to `flush_timeout` (0: a kill), and start it on
        the same state with `agents` still connected."""
        raise NotImplementedError

    def _new_agent(self, session: str, decide: Callable[[Event], str | None]) -> ScriptedAgent:
        """An agent on the bridge for `session`, deciding its commands with `decide`."""
        raise NotImplementedError

    def _thread_of(self, k: int) -> str | None:
        """The platform's id of session `k`'s place (thread), as the bridge recorded it."""
        raise NotImplementedError

    async def _idle(self) -> None:
        """`_settle` inside the loop: the bridge handled everything and sent what it queued."""
        raise NotImplementedError

    # -- the platform's hooks ------------------------------------------------------------

    def _press(self, asked: Asked, index: int, who: str) -> Pressed:
        """`who` presses the card's button `index`, under way."""
        raise NotImplementedError

    async def _until(self, what: str, check: Callable[[], Any]) -> Any:
        """Wait until `check()` holds (and return it), failing with `what` at a timeout."""
        raise NotImplementedError

    async def _answered(self, pressed: Pressed) -> Any:
        """Wait until the platform's envelope was answered and the bridge decided it: a
        command at an agent, or a private note to the person."""
        raise NotImplementedError

    def _notes(self, who: str) -> int:
        """How many private notes `who` has been sent."""
        raise NotImplementedError

    def _note(self, who: str) -> str:
        """The last private note `who` read."""
        raise NotImplementedError

    def _bot_messages(self, k: int) -> list[Any]:
        """The bridge's messages in session `k`'s place, oldest first."""
        raise NotImplementedError

    def _is_card(self, message: Any, prompt: str) -> bool:
        """Whether `message` is the card asking `prompt`."""
        return prompt in self._shown(message)

    def _message(self, key: Any) -> Any:
        """The message whose `_message_key` is `key`, as it is now."""
        raise NotImplementedError

    def _message_key(self, message: Any) -> Any:
        """What finds `message` again (its id, its ts)."""
        raise NotImplementedError

    def _shown(self, message: Any) -> str:
        """What a person reads in `message`."""
        raise NotImplementedError

    def _buttons(self, message: Any) -> int:
        """How many buttons `message` shows."""
        raise NotImplementedError

    def _look(self, message: Any) -> Any:
        """All a person sees of `message` (text and buttons), to compare before and after."""
        raise NotImplementedError

    def _heads_ups(self, asked: Asked) -> list[str]:
        """The notifications (heads-ups) that link to `asked`'s card, as shown."""
        raise NotImplementedError

    def _faults(self) -> list[Any]:
        """What the fake saw go wrong: a broken limit, an envelope left unanswered."""
        raise NotImplementedError

    def _fill_in(self, asked: Asked, who: str, restart: bool) -> None:
        """`who` presses the form's Fill in and submits it (after a restart, if `restart`);
        a stranger gets no form and a refusal."""
        raise NotImplementedError

    def _check_places(self) -> None:
        """The platform's rule for the sessions' places: one each, never a second, showing
        whether the session ended."""
        raise NotImplementedError

    # -- the model's plumbing ------------------------------------------------------------

    def _decide(self, command: Event) -> str | None:
        """A real agent takes one answer per question and refuses any after it."""
        asked = next((a for a in self.asked if a.event.id == command.subject), None)
        if asked is not None and asked.state not in ("open", "answered"):
            return "invalid"
        return None

    def _agents(self) -> list[ScriptedAgent]:
        return [s.agent for s in self.sessions]

    def _restart_all(self, flush_timeout: float = 5.0) -> None:
        """Restart the bridge with every agent connected, counting restarts."""
        self.restarts += 1
        self._restart(self._agents(), flush_timeout=flush_timeout)

    def _commands(self, asked: Asked) -> list[Event]:
        agent = self.sessions[asked.session].agent
        return [c for c in agent.commands if c.subject == asked.event.id]

    def _all_commands(self) -> int:
        return sum(len(s.agent.commands) for s in self.sessions)

    def _card(self, asked: Asked) -> Any:
        assert asked.message is not None
        return self._message(asked.message)

    async def _decided(self, pressed: Pressed, what: str = "the press decided") -> None:
        """Wait until the bridge decided `pressed`: a command at an agent, or a private note
        to the person; then for what else the handler does after deciding (nothing, or a
        note), and for the bridge."""
        await self._until(
            what,
            lambda: (
                self._notes(pressed.who) > pressed.notes_before
                or self._all_commands() > pressed.commands_before
            ),
        )
        await asyncio.sleep(0.02)
        await self._idle()

    def _tell(self, who: str, asked: Asked) -> None:
        """`who` is told privately about `asked` (a refusal, what became of it): one note
        more. A platform that says it once per person and card overrides this."""
        self.notes[who] += 1

    def _begun(self, what: Any, who: str) -> Pressed:
        """`what` `who` did, with the notes and commands counted before it."""
        return Pressed(what, who, self._notes(who), self._all_commands())

    @staticmethod
    def _event(what: str) -> None:
        """What happened, for `--hypothesis-show-statistics` (outside a run: nothing)."""
        if currently_in_test_context():
            event(what)

    def _live(self) -> list[int]:
        return [k for k, s in enumerate(self.sessions) if s.started and not s.ended]

    def _pressable(self) -> list[Asked]:
        return [a for a in self.asked if a.buttons and not a.form]

    def _forms(self) -> list[Asked]:
        return [a for a in self.asked if a.buttons and a.form]

    # -- what the rules do, also for regression tests ------------------------------------

    def _ask(
        self, k: int, kind: str, options: int = 2, turns: int = 0, restart: bool | None = None
    ) -> Asked:
        """Session `k`'s agent asks: `options` buttons, an informational card, a form, or
        words. `restart`: the bridge is stopped `turns` turns of the loop later, flushing
        nothing (True) or what it can (False), and started again."""
        session = self.sessions[k]
        prompt = f"question {len(self.asked)}?"
        if kind == "form":
            ids: tuple[str, ...] = ()
            event = session.agent.ask(prompt, options=(), kind="form", fields=FORM)
        elif kind == "words":
            ids = ()
            event = session.agent.ask(prompt, options=(), kind="input")
        else:
            ids = tuple(f"opt{n}" for n in range(options))
            how = {"respond_via": ["oob"]} if kind == "informational" else {}
            event = session.agent.ask(prompt, options=ids, **how)
        asked = Asked(k, event, ids, form=kind == "form", informational=kind == "informational")
        asked.words = kind == "words"
        asked.restarts = self.restarts
        self.asked.append(asked)
        for _ in range(turns):
            self._run(asyncio.sleep(0))
        if restart is not None:  # before the card is out, perhaps
            self._restart_all(0.0 if restart else 5.0)
            asked.killed = restart
        self._settle()
        self._find_card(asked)
        return asked

    def _find_card(self, asked: Asked) -> None:
        prompt = f"question {self.asked.index(asked)}?"
        found = self._bot_messages(asked.session)
        cards = [m for m in found if self._is_card(m, prompt)]
        # a kill while the card was on its way may show it twice (at least once): the last
        # one is the card, the other keeps its buttons, which answer the same question
        assert len(cards) == 1 or (asked.killed and len(cards) == 2), [
            self._shown(m) for m in found
        ]
        asked.message = self._message_key(cards[-1])

    def _press_once(self, asked: Asked, index: int, who: str) -> None:
        before = self._look(self._card(asked))
        pressed = self._press(asked, index, who)
        self._run(self._answered(pressed))
        self._event(f"press by {who} on a card {asked.state}")
        self._event(f"press on a card from before a restart: {self.restarts > asked.restarts}")
        if who not in self.APPROVERS:
            self._refused(who, asked, before)
            return
        self._taken(asked, who, index)

    def _press_twice(self, asked: Asked, picks: list[int], first: str, second: str) -> None:
        presses = [self._press(asked, picks[0], first), self._press(asked, picks[1], second)]
        if first == second:  # one person: their notes count from before both
            presses[1].notes_before = presses[0].notes_before
        for pressed in presses:
            self._run(self._answered(pressed))
        approvers = [p for p in (first, second) if p in self.APPROVERS]
        self._event(f"two presses at once by {len(approvers)} approver(s)")
        for who in (first, second):
            if who not in self.APPROVERS:
                self._tell(who, asked)
        for who in {first, second} - set(self.APPROVERS):
            assert self._note(who) == REFUSED
        if not approvers:
            return
        [command] = self._commands(asked)  # one command, whoever won
        assert command.data is not None
        option = command.data["answer"]["option"]
        text = self._shown(self._card(asked))
        winner = next(w for w in self.APPROVERS if f"Answered by {self.NAMES[w]}" in text)
        assert winner in approvers, (winner, approvers)
        self._taken(asked, winner, asked.options.index(option))
        losers = approvers.copy()
        losers.remove(winner)
        for who in losers:
            self._tell(who, asked)
            note = self._note(who)
            assert note.startswith(f"{CLOSED}Answered by"), note

    def _refused(self, who: str, asked: Asked, before: Any) -> None:
        """`who` was refused privately and the card is as it was (`before`: its `_look`)."""
        self._tell(who, asked)
        assert self._note(who) == REFUSED
        assert self._look(self._card(asked)) == before

    def _taken(self, asked: Asked, who: str, index: int | None) -> None:
        """An approver's press (option `index`, or the form's submission: None) was decided."""
        if asked.state == "open":
            asked.state, asked.by = "answered", self.NAMES[who]
            if index is None:
                asked.answer, asked.shown = FORM_ANSWER, None
            else:
                option = asked.options[index]
                asked.answer, asked.shown = {"option": option}, option.capitalize()
        else:  # closed before the press was decided: the presser is told
            self._tell(who, asked)

    def check(self) -> None:
        """Every shared invariant, for the regression tests."""
        self.one_place_per_session()
        self.each_card_shows_what_became_of_its_question()
        self.each_answer_reached_its_agent_once()
        self.each_refusal_is_private_and_the_platform_saw_nothing_wrong()
        self.a_question_rings_once_at_most()

    # -- agents --------------------------------------------------------------------------

    @precondition(lambda self: not all(s.started for s in self.sessions))
    @rule()
    def start_a_session(self) -> None:
        k = next(k for k, s in enumerate(self.sessions) if not s.started)
        self.sessions[k].agent.start(label=f"session {k}")
        self.sessions[k].started = True
        self._settle()

    @precondition(lambda self: self._live() and len(self.asked) < self.MAX_ASKED)
    @rule(data=st.data(), options=st.integers(1, 3), kind=st.sampled_from(KINDS))
    def ask(self, data: st.DataObject, options: int, kind: str) -> None:
        self._ask(data.draw(st.sampled_from(self._live())), kind, options)

    @precondition(lambda self: self._live() and len(self.asked) < self.MAX_ASKED)
    @rule(
        data=st.data(),
        kind=st.sampled_from(KINDS),
        turns=st.integers(0, 12),
        killed=st.booleans(),
    )
    def ask_and_restart_at_once(
        self, data: st.DataObject, kind: str, turns: int, killed: bool
    ) -> None:
        """The bridge stops while the card may be on its way: after the restart the card is
        there once, and works."""
        self._ask(data.draw(st.sampled_from(self._live())), kind, 2, turns, killed)

    @precondition(lambda self: not all(s.started for s in self.sessions))
    @rule(turns=st.integers(0, 12))
    def start_and_restart_at_once(self, turns: int) -> None:
        """The bridge stops cleanly while the session's place may be being made: one place
        (a clean stop waits for it; a kill may make it twice, as at-least-once delivery
        does, so this rule does not kill)."""
        k = next(k for k, s in enumerate(self.sessions) if not s.started)
        self.sessions[k].agent.start(label=f"session {k}")
        self.sessions[k].started = True
        for _ in range(turns):
            self._run(asyncio.sleep(0))
        self._restart_all()
        self._settle()

    @precondition(lambda self: any(a.state == "open" for a in self.asked))
    @rule(data=st.data())
    def answer_in_the_terminal(self, data: st.DataObject) -> None:
        """The agent takes an answer in its terminal; `pressed_by` presses the card at the
        same moment, before the bridge has shown that: the card closes either way, and the
        press is refused (privately) or reaches the agent, which refuses it."""
        pressed_by: str | None = data.draw(st.sampled_from((None, *sorted(self.PEOPLE))))
        asked = data.draw(st.sampled_from([a for a in self.asked if a.state == "open"]))
        if not (asked.buttons and not asked.form):
            pressed_by = None
        agent = self.sessions[asked.session].agent
        if asked.form:
            answer: dict[str, Any] = {"values": {"env": "stg", "note": "from the terminal"}}
        elif asked.words:
            answer = {"text": "from the terminal"}
        else:
            answer = {"option": data.draw(st.sampled_from(asked.options))}
        agent.emit("attention.answered", {"answer": answer}, subject=asked.event.id)
        agent.emit("attention.resolved", {"resolution": "answered"}, subject=asked.event.id)
        asked.state = "elsewhere"
        asked.shown = answer["option"].capitalize() if "option" in answer else answer.get("text")
        if pressed_by is None:
            self._settle()
            return
        pressed = self._press(asked, data.draw(st.integers(0, len(asked.options) - 1)), pressed_by)
        self._run(self._answered(pressed))
        sent = self._all_commands() > pressed.commands_before
        self._event(f"a press as the terminal answers: {'sent' if sent else 'told'}")
        if sent:  # taken before the bridge saw the terminal's answer: the agent refused it
            assert pressed_by in self.APPROVERS
            asked.refused += 1
        else:
            self._tell(pressed_by, asked)
            if pressed_by not in self.APPROVERS:
                assert self._note(pressed_by) == REFUSED

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def end_a_session(self, data: st.DataObject) -> None:
        k = data.draw(st.sampled_from(self._live()))
        self.sessions[k].agent.emit("session.ended", {"reason": "normal"})
        self.sessions[k].ended = True
        for asked in self.asked:
            if asked.session == k and asked.state == "open":
                asked.state = "dismissed"
        self._settle()

    # -- people on the platform ----------------------------------------------------------

    @precondition(lambda self: self._pressable())
    @rule(data=st.data())
    def press(self, data: st.DataObject) -> None:
        asked = data.draw(st.sampled_from(self._pressable()))
        who = data.draw(st.sampled_from(sorted(self.PEOPLE)))
        self._press_once(asked, data.draw(st.integers(0, len(asked.options) - 1)), who)

    @precondition(lambda self: self._pressable())
    @rule(data=st.data())
    def press_twice_at_once(self, data: st.DataObject) -> None:
        """Two presses (the same person's double click, or two people) before the card
        changes: the first approver's to be decided wins, the other is told privately."""
        first = data.draw(st.sampled_from(sorted(self.PEOPLE)))
        second = data.draw(st.sampled_from(sorted(self.PEOPLE)))
        asked = data.draw(st.sampled_from(self._pressable()))
        picks = [data.draw(st.integers(0, len(asked.options) - 1)) for _ in range(2)]
        self._press_twice(asked, picks, first, second)

    @precondition(lambda self: self._forms())
    @rule(data=st.data(), restart=st.booleans())
    def fill_in_a_form(self, data: st.DataObject, restart: bool) -> None:
        """Fill in opens the form for an approver (nothing for a stranger); what they
        submit, after a restart of the bridge too, is the agent's answer."""
        who = data.draw(st.sampled_from(sorted(self.PEOPLE)))
        self._fill_in(data.draw(st.sampled_from(self._forms())), who, restart)

    # -- the bridge ----------------------------------------------------------------------

    @rule(killed=st.booleans())
    def restart(self, killed: bool) -> None:
        self._restart_all(0.0 if killed else 5.0)
        self._settle()

    # -- what everyone sees --------------------------------------------------------------

    @invariant()
    def one_place_per_session(self) -> None:
        self._check_places()

    @invariant()
    def each_card_shows_what_became_of_its_question(self) -> None:
        for n, asked in enumerate(self.asked):
            card = self._card(asked)
            text = self._shown(card)
            where = (n, asked, text, self._look(card))
            assert f"question {n}?" in text, where
            assert self._buttons(card) == asked.buttons, where
            if asked.state == "answered":
                assert f"Answered by {asked.by}" in text, where
                if asked.shown:
                    assert asked.shown in text, where
            elif asked.state == "elsewhere":
                assert "Answered in the terminal" in text, where
                if asked.shown:
                    assert asked.shown in text, where
            elif asked.state == "dismissed":
                assert "Dismissed" in text, where
            else:
                assert "Answered" not in text, where

    @invariant()
    def each_answer_reached_its_agent_once(self) -> None:
        for asked in self.asked:
            every = self._commands(asked)
            assert all(c.type == "control.attention.respond" for c in every)
            agent = self.sessions[asked.session].agent
            commands = [c for c in every if agent.acks[c.id].type == "control.accepted"]
            assert len(every) - len(commands) == asked.refused, (asked, every)
            if asked.answer is None:
                assert commands == [], asked
            else:
                answers = [(c.data or {}).get("answer") for c in commands]
                assert answers == [asked.answer], (asked, commands)

    @invariant()
    def a_question_rings_once_at_most(self) -> None:
        """Its heads-up, linking to its card, is one message (two after a kill, as cards)."""
        for asked in self.asked:
            linked = self._heads_ups(asked)
            assert len(linked) <= (2 if asked.killed else 1), (asked, linked)

    @invariant()
    def each_refusal_is_private_and_the_platform_saw_nothing_wrong(self) -> None:
        for who, count in self.notes.items():
            assert self._notes(who) == count, (who, count)
        assert self._faults() == []
