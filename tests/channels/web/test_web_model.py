"""The web channel's page API inside the real bridge, against a model, in random orders.

Hypothesis drives the real bridge (`BridgeFixture`: hub, store, core, the web channel served
over HTTP) where two scripted agents start sessions, say things (some of it HTML meant to
run), ask questions (buttons, a form, words) and end their sessions, while a signed-in person
answers through `POST /api/answer` from one of two pages: valid presses, presses with another
card's or a forged token, words, form values valid or not, answers to closed cards. A second
reader follows `/api/stream` the whole time.

After every step, read through the API only: the queue is every open question exactly once,
oldest first, and nothing closed; a card answered from the page shows its outcome and who
answered; the agent got exactly one command per accepted answer and none for a refused one;
each session's pending count is its open cards; no `html` field carries agent markup
unescaped; what the stream reader accumulated (by key and `rev`) equals `/api/state`.

The channel cannot tell two people apart (`identifies_users=False`): a second identity is
not possible, so the non-approver case is `test_web_http.py`'s (a channel whose approvers
leave the signed-in user out).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from aep_bridge.aep import Event
from aep_bridge.testing.fixture import BridgeFixture, RunningBridge, ScriptedAgent
from aep_bridge.testing.model import FORM, FORM_ANSWER
from tests.core.rig import machine_settings

SESSIONS = ("sess-0", "sess-1")
#: what agents say: plain, markdown, and markup that must never reach the page as markup
SAYINGS = (
    "All tests pass.",
    "**bold** and `code`",
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "a <b>tag</b> & an ampersand",
)
DANGER = ("<script", "<img", "<b>")
#: what the page sends (the card's field and choice ids) and what the agent then gets
GOOD_VALUES = {"f1": "c2", "f2": "ships it"}
#: a choice it does not have, a required field left out, a number for words, the agent's ids
BAD_VALUES = (
    {"f1": "c9", "f2": "x"},
    {"f1": "c1"},
    {"f1": "c1", "f2": 3},
    {"env": "prod", "note": "x"},
)
#: how a press's token is made: the button's own, another card's, another option's, made up
TOKENS = ("own", "own", "other card", "other option", "forged", "none")


@dataclass
class Asked:
    """One question an agent asked, and what the page should show of it."""

    session: str
    kind: str  # "options", "form" or "words"
    event: Event
    card_id: str = ""
    open: bool = True
    #: the summary/answer expected in the agent's command, when answered from the page
    answered: dict[str, Any] | None = None


@dataclass
class Reader:
    """A second page following `/api/stream`: sessions, items and cards by id, newest rev."""

    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    cards: dict[str, dict[str, Any]] = field(default_factory=dict)
    rev: int = 0
    #: away mode as the stream last said it (`event: away`: no revision, not a session's)
    away: dict[str, Any] | None = None

    def apply(self, event: str, data: dict[str, Any]) -> None:
        if event == "away":
            self.away = data
            return
        self.rev = max(self.rev, int(data["rev"]))
        kinds: dict[str, dict[Any, dict[str, Any]]] = {
            "session": self.sessions,
            "card": self.cards,
            "item": self.items,
        }
        known = kinds[event]
        key = (data["session_id"], data["key"]) if event == "item" else data["id"]
        old = known.get(key)
        if old is None or int(old["rev"]) < int(data["rev"]):
            known[key] = data


class WebPage(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = tempfile.TemporaryDirectory(prefix="aep-web-model-")
        self.fixture = BridgeFixture(Path(self.tmp.name) / "state")
        self.asked: list[Asked] = []
        self.agents: dict[str, ScriptedAgent] = {}
        self.ended: set[str] = set()
        self.accepted = 0
        self.reader = Reader()
        self.reading: asyncio.Task[None] | None = None
        self.running: RunningBridge[Any] = self._run(self._start())

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    async def _start(self) -> RunningBridge[Any]:
        running = await self.fixture.start("web", {"approvers": ["local"]})
        self.pages: list[tuple[httpx.AsyncClient, str]] = []
        for _ in range(2):
            client = httpx.AsyncClient(timeout=10)
            reply = await client.post(
                f"{running.channel_url}/signin", data={"token": self.fixture.token}
            )
            assert reply.status_code == 303
            key = reply.headers["location"].partition("#key=")[2]
            client.headers["X-Page-Key"] = key  # every request of the tab carries it
            self.pages.append((client, key))
        opened = asyncio.Event()
        self.reading = asyncio.create_task(self._read(running, opened))
        await asyncio.wait_for(opened.wait(), 5)
        return running

    async def _read(self, running: RunningBridge[Any], opened: asyncio.Event) -> None:
        client = self.pages[1][0]
        async with client.stream("GET", f"{running.channel_url}/api/stream") as stream:
            name = ""
            async for line in stream.aiter_lines():
                opened.set()
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    self.reader.apply(name, json.loads(line[6:]))

    def teardown(self) -> None:
        try:
            if self.reading is not None:
                self.reading.cancel()
                self._run(asyncio.gather(self.reading, return_exceptions=True))
            for client, _ in self.pages:
                self._run(client.aclose())
            self._run(self.fixture.close())
        finally:
            self.loop.close()
            self.tmp.cleanup()

    # -- helpers ----------------------------------------------------------------------------

    async def _get(self, path: str) -> Any:
        reply = await self.pages[0][0].get(f"{self.running.channel_url}/{path}")
        assert reply.status_code == 200, (path, reply.text)
        return reply.json()

    def _state(self) -> dict[str, Any]:
        return dict(self._run(self._get("api/state")))

    def _settle(self) -> None:
        self._run(self.running.settle())

    def _answer(self, page: int, body: dict[str, Any]) -> dict[str, Any]:
        client, _ = self.pages[page]
        reply = self._run(
            client.post(
                f"{self.running.channel_url}/api/answer",
                content=json.dumps(body),
                headers={
                    "Content-Type": "application/json",
                    "Origin": self.running.url,
                },
            )
        )
        assert reply.status_code == 200, reply.text
        self._settle()
        return dict(reply.json())

    def _card(self, asked: Asked) -> dict[str, Any]:
        timeline = self._run(self._get(f"api/sessions/{asked.session}"))
        [card] = [c for c in timeline["cards"] if c["id"] == asked.card_id]
        return dict(card)

    def _took(self, asked: Asked, reply: dict[str, Any], answer: dict[str, Any]) -> None:
        """The answer was the first to an open card: accepted, and the card closes."""
        assert reply["status"] == "accepted", (asked, reply)
        self.accepted += 1
        asked.open = False
        asked.answered = answer

    def _refused(self, reply: dict[str, Any]) -> None:
        assert reply["status"] != "accepted", reply

    def _active(self) -> list[str]:
        return [s for s in self.agents if s not in self.ended]

    # -- rules: the agents ------------------------------------------------------------------

    @precondition(lambda self: len(self.agents) < len(SESSIONS))
    @rule()
    def start_a_session(self) -> None:
        session = SESSIONS[len(self.agents)]
        known = {s["id"] for s in self._state()["sessions"]}
        agent = self.running.agent(session, agent="claude-code")
        agent.start(f"Work on {session} <script>x()</script>")
        self._settle()
        [shown] = [s["id"] for s in self._state()["sessions"] if s["id"] not in known]
        self.agents[shown] = agent  # by the page's id of the session

    @precondition(lambda self: self._active())
    @rule(data=st.data(), text=st.sampled_from(SAYINGS))
    def say_something(self, data: st.DataObject, text: str) -> None:
        session = data.draw(st.sampled_from(self._active()))
        self.agents[session].say(text)
        self._settle()

    @precondition(lambda self: self._active())
    @rule(data=st.data(), kind=st.sampled_from(("options", "options", "form", "words")))
    def ask_a_question(self, data: st.DataObject, kind: str) -> None:
        session = data.draw(st.sampled_from(self._active()))
        agent = self.agents[session]
        prompt = f"question {len(self.asked)} <img src=x onerror=alert(1)>?"
        known = {c["id"] for c in self._state()["queue"]}
        if kind == "form":
            event = agent.ask(prompt, options=(), kind="form", fields=FORM)
        elif kind == "words":
            event = agent.ask(prompt, options=(), kind="input", accepts_text=True)
        else:
            event = agent.ask(prompt, options=[("allow", "Allow"), ("deny", "Deny")])
        self._settle()
        [new] = [c for c in self._state()["queue"] if c["id"] not in known]
        self.asked.append(Asked(session, kind, event, card_id=new["id"]))

    @precondition(lambda self: self._active())
    @rule(data=st.data())
    def end_a_session(self, data: st.DataObject) -> None:
        session = data.draw(st.sampled_from(self._active()))
        self.agents[session].end()
        self.ended.add(session)
        self._settle()
        for asked in self.asked:  # its questions can no longer be answered
            if asked.session == session:
                asked.open = False

    # -- rules: the person on the page ------------------------------------------------------

    @rule()
    def reload_the_page(self) -> None:
        """A look at the page changes nothing (and keeps a rule available at every step)."""
        assert self._state()["rev"] >= self.reader.rev

    @precondition(lambda self: any(a.kind == "options" for a in self.asked))
    @rule(data=st.data(), page=st.sampled_from((0, 1)), how=st.sampled_from(TOKENS))
    def press_a_button(self, data: st.DataObject, page: int, how: str) -> None:
        asked = data.draw(st.sampled_from([a for a in self.asked if a.kind == "options"]))
        card = self._card(asked)
        index = data.draw(st.sampled_from((0, 1)))
        token = card["options"][index]["token"]
        others = [a for a in self.asked if a.kind == "options" and a is not asked]
        if how == "other card" and others:
            token = self._card(others[0])["options"][index]["token"]
        elif how == "other option":
            token = card["options"][1 - index]["token"]
        elif how == "forged":
            token = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        elif how == "none":
            token = ""
        genuine = how == "own" or (how == "other card" and not others)
        reply = self._answer(page, {"card_id": asked.card_id, "option": index, "token": token})
        if genuine and asked.open:
            self._took(asked, reply, {"option": ("allow", "deny")[index]})
        else:
            self._refused(reply)
            if not genuine:
                assert reply["status"] == "rejected", reply

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), page=st.sampled_from((0, 1)))
    def answer_in_words(self, data: st.DataObject, page: int) -> None:
        asked = data.draw(st.sampled_from(self.asked))
        text = data.draw(st.sampled_from(("main", "<script>alert(2)</script>")))
        reply = self._answer(page, {"card_id": asked.card_id, "text": text})
        if asked.open:  # the core takes words on every kind of card, as in every channel
            self._took(asked, reply, {"text": text})
        else:
            self._refused(reply)

    @precondition(lambda self: self.asked)
    @rule(data=st.data(), page=st.sampled_from((0, 1)), valid=st.booleans())
    def fill_in_a_form(self, data: st.DataObject, page: int, valid: bool) -> None:
        asked = data.draw(st.sampled_from(self.asked))
        values = GOOD_VALUES if valid else data.draw(st.sampled_from(BAD_VALUES))
        reply = self._answer(page, {"card_id": asked.card_id, "values": values})
        if asked.open and asked.kind == "form" and valid:
            self._took(asked, reply, FORM_ANSWER)
        else:
            self._refused(reply)

    # -- invariants, through the API only ---------------------------------------------------

    @invariant()
    def the_agents_got_one_command_per_accepted_answer(self) -> None:
        answers = [a for agent in self.agents.values() for a in agent.answers]
        assert len(answers) == self.accepted, (answers, self.accepted)
        expected = [a.answered for a in self.asked if a.answered is not None]
        assert sorted(map(json.dumps, answers)) == sorted(map(json.dumps, expected))

    @invariant()
    def the_queue_is_every_open_question_once_oldest_first(self) -> None:
        state = self._state()
        queue = [c["id"] for c in state["queue"]]
        assert queue == [a.card_id for a in self.asked if a.open], (queue, self.asked)
        for card in state["queue"]:
            assert card["outcome"] is None or not card["outcome"]["closed"], card
        pending = {s["id"]: s["pending"] for s in state["sessions"]}
        assert set(pending) == set(self.agents)
        titles = {s["id"]: s["title"] for s in state["sessions"]}
        for session in self.agents:
            assert titles[session].startswith("Work on sess-"), titles
        for session in self.agents:
            opened = sum(1 for a in self.asked if a.open and a.session == session)
            assert pending[session] == opened, (session, pending, self.asked)

    @invariant()
    def an_answered_card_shows_its_outcome_and_who(self) -> None:
        for asked in self.asked:
            card = self._card(asked)
            if asked.open:
                assert card["outcome"] is None or not card["outcome"]["closed"], card
                continue
            assert card["outcome"] is not None, card
            assert card["outcome"]["closed"], card
            if asked.answered is not None:
                assert card["outcome"]["by"] == "you", card
                option = asked.answered.get("option")
                if option is not None:
                    assert option.capitalize() in card["outcome"]["summary"], card

    @invariant()
    def no_html_field_carries_agent_markup(self) -> None:
        state = self._state()
        shown: list[str] = []
        for session in self.agents:
            timeline = self._run(self._get(f"api/sessions/{session}"))
            shown += [i["html"] for i in timeline["items"]]
            shown += [c["description_html"] for c in timeline["cards"]]
        shown += [c["description_html"] for c in state["queue"]]
        for text in shown:
            for bad in DANGER:
                assert bad not in text.lower(), text

    @invariant()
    def the_stream_reader_sees_what_the_state_says(self) -> None:
        state = self._state()

        async def caught_up() -> None:
            while self.reader.rev < int(state["rev"]):
                await asyncio.sleep(0.01)

        self._run(asyncio.wait_for(caught_up(), 5))
        assert self.reader.sessions == {s["id"]: s for s in state["sessions"]}
        opened = [
            c
            for c in sorted(self.reader.cards.values(), key=lambda c: int(c["seq"]))
            if not c["informational"] and (c["outcome"] is None or not c["outcome"]["closed"])
        ]
        assert opened == state["queue"]
        for session in self.agents:
            timeline = self._run(self._get(f"api/sessions/{session}"))
            items = {i["key"]: i for i in timeline["items"]}
            seen = {k: i for (s, k), i in self.reader.items.items() if s == session}
            assert seen == items, session
            cards = {c["id"]: c for c in timeline["cards"]}
            assert {k: c for k, c in self.reader.cards.items() if c["session_id"] == session} == (
                cards
            )


WebPage.TestCase.settings = machine_settings(20, 20)
TestWebPage = WebPage.TestCase
