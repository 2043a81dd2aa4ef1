"""The agent daemon's held loop against a model of its promises, in random orders.

Hypothesis drives a real `AgentDaemon` (real mappings, emitter, session logs and held loop;
its `BridgeLink` is never started, so what it queues is exactly what the bridge would
receive) through hooks of two Claude Code and two Codex sessions: permission prompts,
`AskUserQuestion` and elicitation forms held open, heads-ups, answers from the bridge
(valid or not, for the right request or another, fresh or retried with the same id), holds
passing, hooks going away, and the agent moving on. After every step the queued events are
checked against what AEP promises a consumer (schemas, positions, one terminal per request
before the session ends, one decision per command, retries re-sent byte for byte) and the
hooks' outputs against the answers the model says were taken.

Time is the event loop's own clock, moved only by the model (`time_passes`, and an answer
read as a hold passes), so a hold passes exactly when the model says; `time.monotonic`
(latencies) is left alone. The link's `connected` flag stands for the bridge's `hello`
(the socket is never opened), and a rule drops and restores it.

While a Claude Code session's person is away (the bridge says so, issue 33), its Stop hook
is held as a question "what next?": a text answer is the agent's next instruction (a Stop
block), Done or the hold passing lets it stop, a prompt typed in the terminal answers it
there; and no question is asked whose answer Claude Code would drop (its cap on Stop blocks
in a row with no tool call between them).

The daemon also restarts: SIGKILLed (a new daemon starts on a copy of its directory as the
kill left it, and the old one's later words are lost) or stopped cleanly (`stopping`, as on
SIGTERM). Either way no request it raised stays open: a clean stop closes them (or, with the
bridge away, leaves them recorded), and the next daemon closes what the last one left.
"""

from __future__ import annotations

import asyncio
import json
import selectors
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.validation import parse_event
from aep_bridge.agents import codex
from aep_bridge.agents.bounds import bounded_id
from aep_bridge.agents.daemon import AgentDaemon
from aep_bridge.agents.mapping import Ceiling, Verdict
from tests.core.rig import machine_settings
from tests.official import assert_valid

PAYLOADS = Path(__file__).parent / "payloads"
CC, CX = "claude-code", "codex"
#: one Claude Code session id is longer than an event carries whole: the daemon names it by a
#: bounded id (bounds.py), the same at every hook, and the bridge answers that one
LONG = "cc-" + "long-" * 60
SESSIONS = ((CC, "cc-a"), (CC, "cc-b"), (CC, LONG), (CX, "cx-a"), (CX, "cx-b"))
#: a session no daemon of this model ever had: the bridge routes an answer there all the same
#: (another daemon's, once said to be this one's), and it is refused, never dropped
STRANGER = (CC, "nobody-s-session")
#: the largest event the bridge takes in this model (its `hello` says so): every event the
#: daemon queues fits, a Bash command of 50,000 characters too
LIMIT = 16_000
HUGE = "echo " + "x" * 50_000
BRIDGE = "aep://bridge/aep-bridge"
#: a hold that passes only when the model moves the clock past it, and one that never does
HOLDS = (0.5, 1000.0)
#: Codex commands the permission prompts ask about (so a session rule fits some, not all)
CODEX_COMMANDS = ("rm -rf build", "make test", HUGE)
TERMINALS = frozenset({"attention.resolved", "attention.timeout"})
ACKS = frozenset({"control.accepted", "control.rejected"})


def payload(agent: str, name: str, **changes: Any) -> dict[str, Any]:
    """A recorded hook payload of `agent` (payloads/AGENT/NAME.json), with `changes`."""
    data: dict[str, Any] = json.loads(
        (PAYLOADS / agent.replace("-", "_") / f"{name}.json").read_text()
    )
    data.update(changes)
    return data


class ClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when told: timers fire when the model says."""

    def __init__(self) -> None:
        super().__init__(selectors.SelectSelector())
        self.now = 1000.0

    def time(self) -> float:
        return self.now


# -- the answers the bridge sends, and what the model expects of them ------------------------


@dataclass(frozen=True)
class Answer:
    """One answer a person may give: its wire form, and the verdict it makes (None: refused)."""

    name: str
    answer: dict[str, Any]
    verdict: Verdict | None
    recorded: dict[str, Any] | None = None  # what attention.answered says was applied


GUIDANCE = "run the unit tests only"
PERMISSION_ANSWERS = (
    Answer("allow", {"option": "allow"}, Verdict(option="allow"), {"option": "allow"}),
    Answer("deny", {"option": "deny"}, Verdict(option="deny"), {"option": "deny"}),
    Answer(
        "deny with words",
        {"option": "deny", "text": "not now"},
        Verdict(option="deny", text="not now"),
        {"option": "deny", "text": "not now"},
    ),
    Answer("the word allow", {"text": " Allow "}, Verdict(option="allow"), {"option": "allow"}),
    Answer(
        "guidance",
        {"text": GUIDANCE},
        Verdict(option="deny", text=GUIDANCE),
        {"option": "deny", "text": GUIDANCE},
    ),
    Answer("an option it does not offer", {"option": "sudo"}, None),
    Answer("blank text", {"text": "   "}, None),
    Answer("form values", {"values": {"1": "1"}}, None),
    Answer("nothing", {}, None),
)
#: every "for this session" option there is; each request offers those its payload allows
SESSION_OPTIONS = ("allow_session", "allow_mode_acceptEdits", "allow_directories")
#: Claude Code's permission prompts: a Bash rule, an Edit of /etc (a mode and a folder, no
#: rule: issue 30), and one with no suggestion at all (no "for this session" option)
CC_PERMISSIONS = ("PermissionRequest", "PermissionRequest-Edit-etc", "bare", "huge")
#: the options each offers, and the ONE entry each "for this session" option returns
OFFERED = {
    "PermissionRequest": ["allow", "allow_session", "deny"],
    "PermissionRequest-Edit-etc": [
        "allow",
        "allow_mode_acceptEdits",
        "allow_directories",
        "deny",
    ],
    "bare": ["allow", "deny"],
    "huge": ["allow", "allow_session", "deny"],  # a Bash command of 50,000 characters
    "codex": ["allow", "allow_session", "deny"],
}
GRANTED = {
    **{
        (variant, "allow_session"): {
            "type": "addRules",
            "rules": [{"toolName": "Bash", "ruleContent": "npm test"}],
            "behavior": "allow",
            "destination": "session",
        }
        for variant in ("PermissionRequest", "huge")
    },
    ("PermissionRequest-Edit-etc", "allow_mode_acceptEdits"): {
        "type": "setMode",
        "mode": "acceptEdits",
        "destination": "session",
    },
    ("PermissionRequest-Edit-etc", "allow_directories"): {
        "type": "addDirectories",
        "directories": ["/etc"],
        "destination": "session",
    },
}


def _permission_answers(asked: Asked) -> list[Answer]:
    """The answers to a permission prompt: the common ones, each session option it offers
    by id and by its label typed in words, and those it does not offer (refused)."""
    out = list(PERMISSION_ANSWERS)
    offered = {o["id"]: o["label"] for o in (asked.event.data or {}).get("options", [])}
    for option in SESSION_OPTIONS:
        if option not in offered:
            out.append(Answer(f"{option}, not offered", {"option": option}, None))
            continue
        taken = Verdict(option=option)
        out.append(Answer(option, {"option": option}, taken, {"option": option}))
        words = {"text": offered[option].lower()}
        out.append(Answer(f"the label of {option}", words, taken, {"option": option}))
    return out


ASK_VALID = {"1": "1", "2": ["1", "2"]}
ASK_OTHER = {"1": "DuckDB", "2": ["2"]}
ASK_ANSWERS = (
    Answer("choices", {"values": ASK_VALID}, Verdict(values=ASK_VALID), {"values": ASK_VALID}),
    Answer("other", {"values": ASK_OTHER}, Verdict(values=ASK_OTHER), {"values": ASK_OTHER}),
    Answer("a required question left out", {"values": {"1": "1"}}, None),
    Answer("one choice for a multi select", {"values": {"1": "1", "2": "1"}}, None),
    Answer("an option", {"option": "allow"}, None),
    Answer("text for two questions", {"text": "SQLite"}, None),
    Answer("a third question", {"values": {**ASK_VALID, "3": "1"}}, None),
)
ELICIT_MIN = {"environment": "staging", "confirm": True}
ELICIT_ALL = {"environment": "production", "confirm": False, "replicas": 3, "reason": "release"}
ELICIT_ANSWERS = (
    Answer("required", {"values": ELICIT_MIN}, Verdict(values=ELICIT_MIN), {"values": ELICIT_MIN}),
    Answer("all", {"values": ELICIT_ALL}, Verdict(values=ELICIT_ALL), {"values": ELICIT_ALL}),
    Answer("not a choice", {"values": {"environment": "dev", "confirm": True}}, None),
    Answer("a required field left out", {"values": {"environment": "staging"}}, None),
    Answer("a word for a boolean", {"values": {"environment": "staging", "confirm": "yes"}}, None),
    Answer("text for a number", {"values": {**ELICIT_MIN, "replicas": "three"}}, None),
    Answer("an option", {"option": "deny"}, None),
    Answer("a field it does not have", {"values": {**ELICIT_MIN, "admin": "yes"}}, None),
)
INSTRUCTION = "now run the linter too"
STEER_ANSWERS = (
    Answer("done", {"option": "done"}, Verdict(option="done"), {"option": "done"}),
    Answer("the word done", {"text": " Done "}, Verdict(option="done"), {"option": "done"}),
    *(
        Answer(f"an instruction: {words}", {"text": words}, Verdict(text=words), {"text": words})
        for words in (INSTRUCTION, "why?", "and update the changelog")
    ),
    Answer("an option it does not offer", {"option": "allow"}, None),
    Answer("blank text", {"text": "   "}, None),
    Answer("form values", {"values": {"1": "1"}}, None),
    Answer("nothing", {}, None),
)
ANSWERS = {"ask": ASK_ANSWERS, "elicit": ELICIT_ANSWERS, "steer": STEER_ANSWERS}
#: Claude Code's cap on Stop blocks in a row, as its hook passes it on (low, to be reached)
BLOCK_CAP = 1
#: hooks of the model after which Claude Code counts Stop blocks from zero again
RESETS_BLOCKS = frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"})


# -- the model -------------------------------------------------------------------------------


@dataclass
class Asked:
    """A request the daemon raised, and what the model expects of it."""

    agent: str
    session: str
    kind: str  # permission, ask, elicit, steer (held); heads-up (informational)
    subject: str | None
    event: Event
    payload: dict[str, Any]
    task: asyncio.Task[dict[str, Any] | None] | None = None
    gone: asyncio.Future[None] | None = None
    hold: float = 0.0
    opened: float = 0.0
    state: str = "open"  # open, answered, timeout, dismissed, elsewhere
    verdict: Verdict | None = None
    left: bool = False  # the hook went away
    variant: str = ""  # which recorded permission prompt (OFFERED, GRANTED)


@dataclass
class Sent:
    """A command the bridge sent, and the ack it got."""

    command: Event
    ack: bytes | None = None


@dataclass
class Stream:
    """What the checker has read of one session's events."""

    position: tuple[int, int] | None = None
    raised: list[str] = field(default_factory=list)


class DaemonModel(RuleBasedStateMachine):
    """A real daemon, one asyncio loop, and the model of what it must do."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = ClockLoop()
        self.tmp = tempfile.TemporaryDirectory(prefix="aep-agentd-model-")
        self.directory = Path(self.tmp.name) / "agentd-0"
        self.directory.mkdir()
        self.daemon = AgentDaemon(self.directory, "ws://127.0.0.1:9/socket", None)
        self.daemon.link.connected = True  # the bridge said hello (the link is never started)
        self.daemon.link.max_event_bytes = LIMIT  # ... and said its limit
        self.daemon.ask_away = self._ask_away  # the bridge's `GET /away`, as the model says
        #: Claude Code sessions whose person is away (by the id the daemon names), and the
        #: hold the bridge names for their Stop
        self.away: dict[str, float] = {}
        #: where in `asked` each session last counted its Stop blocks from zero
        self.counted_from: dict[str, int] = {}
        self.asked: list[Asked] = []
        self.sent: list[Sent] = []
        self.known: set[tuple[str, str]] = set()  # sessions that emitted something
        self.turns: dict[str, int] = {}  # codex session -> its current turn
        self.allowed: dict[str, set[str]] = {}  # codex session -> its "for this session" rules
        # the checker's view of the queue
        self.read = 0
        self.by_id: dict[str, bytes] = {}
        self.streams: dict[str, Stream] = {}
        self.terminals: dict[str, list[str]] = {}  # request id -> terminal event ids
        self.requests: dict[str, str] = {}  # request id -> its source
        self.decisions: dict[str, list[str]] = {}  # command id -> ack ids

    # -- plumbing --------------------------------------------------------------------------

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _spin(self) -> None:
        """Let every task run as far as it can without the clock moving."""

        async def spin() -> None:
            for _ in range(20):
                await asyncio.sleep(0)

        self._run(spin())

    def _queued(self) -> list[bytes]:
        return self.daemon.link.queued()

    def _new(self, since: int) -> list[Event]:
        return [parse_event(raw) for raw in self._queued()[since:]]

    def _payload(self, agent: str, session: str, name: str, **changes: Any) -> dict[str, Any]:
        data = payload(agent, name, session_id=session, **changes)
        if agent == CX and "turn_id" in data:
            data["turn_id"] = f"turn-{session}-{self.turns.get(session, 0)}"
        return data

    def _hook(self, agent: str, session: str, data: dict[str, Any]) -> Any:
        """A hook that does not wait: its output, at once."""
        before = len(self._queued())
        gone: asyncio.Future[None] = self.loop.create_future()
        task = self.loop.create_task(self.daemon.handle(agent, data, HOLDS[-1], gone))
        self._spin()
        if len(self._queued()) > before:
            self.known.add((agent, session))
        if not task.done():  # free it before failing, so the loop can close
            gone.set_result(None)
            self._spin()
            raise AssertionError(f"a {data['hook_event_name']} hook waits")
        return task.result()

    async def _ask_away(self, session: str) -> float | None:
        return self.away.get(session)

    def _blocks(self, session: str) -> int:
        """Instructions the agent took in a row at this session's Stops, no tool call between."""
        return sum(
            1
            for asked in self.asked[self.counted_from.get(session, 0) :]
            if asked.kind == "steer"
            and asked.session == session
            and asked.state == "answered"
            and not asked.left
            and asked.verdict is not None
            and asked.verdict.text is not None
        )

    def _open(self, agent: str | None = None, session: str | None = None) -> list[Asked]:
        return [
            a
            for a in self.asked
            if a.state == "open"
            and a.kind != "heads-up"
            and (agent is None or a.agent == agent)
            and (session is None or a.session == session)
        ]

    def _close(self, agent: str, session: str, subject: str | None = None) -> None:
        """The agent moved on: its open requests (about `subject`) are dismissed."""
        for asked in self._open(agent, session):
            if subject is None or asked.subject == subject:
                asked.state = "dismissed"

    def _back(self, agent: str, session: str) -> None:
        """The person is back at the terminal: the heads-ups are dismissed."""
        for asked in self.asked:
            mine = (asked.agent, asked.session) == (agent, session)
            if mine and asked.kind == "heads-up" and asked.state == "open":
                asked.state = "dismissed"

    # -- the agent: hooks that do not wait -------------------------------------------------

    @rule(
        where=st.sampled_from(SESSIONS),
        hook=st.sampled_from(
            (
                "SessionStart",
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "Stop",
                "SessionEnd",
                "idle",
                "PermissionDenied",
                "PostToolUse AskUserQuestion",
                "PreToolUse AskUserQuestion",
            )
        ),
    )
    def a_hook_fires(self, where: tuple[str, str], hook: str) -> None:
        agent, session = where
        if agent == CX and hook in {
            "SessionEnd",
            "idle",
            "PermissionDenied",
            "PostToolUse AskUserQuestion",
            "PreToolUse AskUserQuestion",
        }:
            hook = "PostToolUse"  # Codex has none of these hooks
        if hook == "UserPromptSubmit" and agent == CX:
            self.turns[session] = self.turns.get(session, 0) + 1
        if hook == "idle":
            data = self._payload(agent, session, "Notification")
        elif hook.endswith("AskUserQuestion"):
            name = hook.split()[0]
            data = self._payload(
                agent, session, name, tool_name="AskUserQuestion", tool_use_id="toolu_ask"
            )
        else:
            data = self._payload(agent, session, hook)
        name, tool = data["hook_event_name"], data.get("tool_name")
        if name in RESETS_BLOCKS:
            self.counted_from[session] = len(self.asked)
        if name == "Stop" and agent == CC and bounded_id(session) in self.away:
            self._stop_while_away(session, data)
            return
        before = len(self._queued())
        assert self._hook(agent, session, data) is None
        if name == "UserPromptSubmit":  # typed in the terminal: a held Stop is answered there
            for asked in self._open(agent, session):
                if asked.kind == "steer":
                    asked.state = "elsewhere"
        if name in {"UserPromptSubmit", "Stop", "SessionEnd"}:
            self._close(agent, session)
        elif name in {"PostToolUse", "PermissionDenied"}:
            self._close(agent, session, tool)
        if name in {"UserPromptSubmit", "PreToolUse", "SessionEnd", "Stop"}:
            self._back(agent, session)
        if hook == "idle":
            (event,) = [e for e in self._new(before) if e.type == "attention.requested"]
            self.asked.append(Asked(agent, session, "heads-up", None, event, data))
        self._spin()

    @rule(
        session=st.sampled_from([s for a, s in SESSIONS if a == CC]),
        hold=st.sampled_from((None, *HOLDS)),
    )
    def the_person_goes_away(self, session: str, hold: float | None) -> None:
        """Away mode switched on for the session (the bridge names the hold), or off."""
        if hold is None:
            self.away.pop(bounded_id(session), None)
        else:
            self.away[bounded_id(session)] = hold

    @rule(
        session=st.sampled_from([s for a, s in SESSIONS if a == CC]),
        hold=st.sampled_from(HOLDS),
        active=st.booleans(),
    )
    def the_agent_stops_while_away(self, session: str, hold: float, active: bool) -> None:
        """The person is away (the bridge names the hold) and the agent finishes its turn
        (`stop_hook_active`: it was going on from a Stop block)."""
        self.away[bounded_id(session)] = hold
        data = self._payload(CC, session, "Stop", stop_hook_active=active)
        self._stop_while_away(session, data)

    def _instructed(self) -> list[str]:
        return [s for a, s in SESSIONS if a == CC and self._blocks(s)]

    @precondition(lambda self: self._instructed())
    @rule(data=st.data())
    def the_agent_stops_again_after_an_instruction(self, data: st.DataObject) -> None:
        """It did what it was told, with no tool call, and stops again: one more block in a
        row would pass Claude Code's cap, so it is not asked."""
        session = data.draw(st.sampled_from(self._instructed()))
        self.away.setdefault(bounded_id(session), HOLDS[-1])
        self._stop_while_away(session, self._payload(CC, session, "Stop", stop_hook_active=True))

    def _stop_while_away(self, session: str, data: dict[str, Any]) -> None:
        """The agent stops while its person is away: "what next?" is held open in the chat,
        unless Claude Code would drop the answer (its cap on Stop blocks in a row)."""
        self._close(CC, session)  # the Stop moves the session on, as any Stop does
        self._back(CC, session)
        before = len(self._queued())
        gone: asyncio.Future[None] = self.loop.create_future()
        task = self.loop.create_task(
            self.daemon.handle(CC, data, HOLDS[-1], gone, block_cap=BLOCK_CAP)
        )
        self._spin()
        self.known.add((CC, session))
        raised = [e for e in self._new(before) if e.type == "attention.requested"]
        if self._blocks(session) >= BLOCK_CAP:
            hypothesis.event("a Stop past the cap on blocks in a row is not held")
            assert raised == []
            assert task.done()
            assert task.result() is None
            return
        (event,) = raised
        # the held Stop's mark (a session's first event also says its OS user: `osuser`)
        assert event.extensions.get("aepbridgesteer") == "stop"
        assert set(event.extensions) <= {"aepbridgesteer", "osuser"}
        assert event.data is not None
        assert event.data["options"] == [{"id": "done", "label": "Done"}]
        assert "expires_at" in event.data
        if not self.daemon.link.connected:  # nobody could answer: the agent stops, now
            assert task.done()
            assert task.result() is None
            self.asked.append(Asked(CC, session, "steer", None, event, data, state="dismissed"))
            return
        assert event.id in self.daemon.loop.pending, "the hook holds its question open"
        hold = self.away[bounded_id(session)]
        self.asked.append(
            Asked(CC, session, "steer", None, event, data, task, gone, hold, self.loop.now)
        )

    @rule(
        session=st.sampled_from([s for a, s in SESSIONS if a == CC]),
        action=st.sampled_from(("accept", "decline")),
    )
    def the_elicitation_is_answered_in_the_terminal(self, session: str, action: str) -> None:
        """The person answered (or declined) the MCP server's form in Claude Code's dialog."""
        self._hook(CC, session, self._payload(CC, session, "ElicitationResult", action=action))
        elicits = [a for a in self._open(CC, session) if a.kind == "elicit"]
        if action == "decline":
            for asked in elicits:
                asked.state = "dismissed"
        elif elicits:
            elicits[0].state = "elsewhere"
        self._spin()

    @rule(up=st.booleans())
    def the_bridge_connection(self, up: bool) -> None:
        """The bridge goes away or comes back; what is held stays held."""
        self.daemon.link.connected = up

    # -- the agent: hooks that wait ----------------------------------------------------------

    @rule(
        where=st.sampled_from(SESSIONS),
        kind=st.sampled_from(("permission", "permission", "ask", "elicit", "url")),
        hold=st.sampled_from(HOLDS),
        command=st.sampled_from(CODEX_COMMANDS),
        variant=st.sampled_from(CC_PERMISSIONS),
    )
    def a_question_is_raised(
        self, where: tuple[str, str], kind: str, hold: float, command: str, variant: str
    ) -> None:
        agent, session = where
        if agent == CX:
            variant = "codex"
            kind = "permission"
            tool_input = {"command": command, "description": "housekeeping"}
            data = self._payload(agent, session, "PermissionRequest", tool_input=tool_input)
            if codex.session_rule_key(data) in self.allowed.get(session, set()):
                # allowed for this session already: decided at once, nothing raised
                before = len(self._queued())
                output = self._hook(agent, session, data)
                assert output == _decision("allow")
                assert len(self._queued()) == before
                hypothesis.event("codex allowed for this session already")
                return
        elif kind == "ask":
            data = self._payload(agent, session, "PermissionRequest-AskUserQuestion")
        elif kind in ("elicit", "url"):
            data = self._payload(
                agent, session, "Elicitation" if kind == "elicit" else "Elicitation-url"
            )
        elif variant == "bare":
            data = self._payload(agent, session, "PermissionRequest", permission_suggestions=None)
        elif variant == "huge":
            data = self._payload(agent, session, "PermissionRequest", tool_input={"command": HUGE})
        else:
            data = self._payload(agent, session, variant)
        before = len(self._queued())
        gone: asyncio.Future[None] = self.loop.create_future()
        task = self.loop.create_task(self.daemon.handle(agent, data, hold, gone))
        self._spin()
        self.known.add((agent, session))
        (event,) = [e for e in self._new(before) if e.type == "attention.requested"]
        assert event.data is not None
        # a held request says when its hold ends, so the bridge closes it then at the latest
        assert ("expires_at" in event.data) is (kind != "url"), event.data
        if kind == "url":  # a sign-in in the browser: a heads-up, the hook does not wait
            assert task.done()
            assert task.result() is None
            self.asked.append(
                Asked(agent, session, "heads-up", data.get("mcp_server_name"), event, data)
            )
            return
        subject = {"ask": "AskUserQuestion", "elicit": data.get("mcp_server_name")}.get(
            kind, data.get("tool_name")
        )
        if kind == "permission":  # a button for each grant it allows, none wider
            assert event.data is not None
            assert [o["id"] for o in event.data["options"]] == OFFERED[variant], event.data
            if len(json.dumps(data)) > LIMIT:  # cut to fit, and saying so
                assert "more characters)" in event.data["prompt"]
        else:
            variant = ""
        if not self.daemon.link.connected:  # nobody could answer: the agent asks itself, now
            assert task.done()
            assert task.result() is None
            self.asked.append(
                Asked(
                    agent, session, kind, subject, event, data, state="dismissed", variant=variant
                )
            )
            return
        assert event.id in self.daemon.loop.pending, "the hook holds its request open"
        self.asked.append(
            Asked(
                agent,
                session,
                kind,
                subject,
                event,
                data,
                task,
                gone,
                hold,
                self.loop.now,
                variant=variant,
            )
        )

    @precondition(lambda self: self._open())
    @rule(data=st.data())
    def the_hook_goes_away(self, data: st.DataObject) -> None:
        asked = data.draw(st.sampled_from(self._open()))
        assert asked.gone is not None
        asked.gone.set_result(None)
        asked.state, asked.left = "dismissed", True
        self._spin()

    @precondition(lambda self: any(a.task is not None and not a.task.done() for a in self.asked))
    @rule(seconds=st.sampled_from((0.25, 0.5, 2.0)))
    def time_passes(self, seconds: float) -> None:
        self.loop.now += seconds
        self._spin()
        self._expire()

    def _expire(self) -> None:
        for asked in self._open():
            if self.loop.now >= asked.opened + asked.hold:
                asked.state = "timeout"

    # -- the daemon itself ---------------------------------------------------------------------

    @rule(clean=st.booleans())
    def the_daemon_restarts(self, clean: bool) -> None:
        """The daemon stops, cleanly (SIGTERM) or SIGKILLed, and the next hook's starts."""
        old, directory = self.daemon, self.directory
        open_ = [a for a in self.asked if a.state == "open"]
        if clean:
            old.stopping()  # the held hooks go free, with no decision
            self._spin()
            self._every_event_keeps_the_protocol()  # what it said before it went
        else:  # what the kill left on disk is all the next daemon finds
            self.directory = directory.with_name(f"agentd-{int(directory.name[7:]) + 1}")
            shutil.copytree(directory, self.directory)
        for asked in open_:
            asked.state = "dismissed"
            asked.left = asked.task is not None and not clean  # its connection dropped
        hypothesis.event(f"the daemon restarts ({'clean' if clean else 'killed'})")
        self.daemon = AgentDaemon(self.directory, "ws://127.0.0.1:9/socket", None)
        self.daemon.link.connected = True  # the new link says hello
        self.daemon.link.max_event_bytes = LIMIT
        self.daemon.ask_away = self._ask_away
        self.counted_from = {session: len(self.asked) for _, session in SESSIONS}  # forgotten
        self.read = 0
        # what the new daemon knows: nothing of the old one's memory but its positions
        named = {(agent, bounded_id(session)): (agent, session) for agent, session in SESSIONS}
        self.known = {named[key] for key in self.daemon.emitter.sessions if key in named}
        self.allowed.clear()  # Codex's "for this session" rules were the old daemon's
        self.sent.clear()  # a retry reaches a daemon that never decided it
        for asked in open_:  # a killed daemon's hooks: their connections are gone
            if asked.gone is not None and not asked.gone.done():
                asked.gone.set_result(None)
        self._spin()  # (what the dead daemon does meanwhile goes nowhere)

    # -- the bridge --------------------------------------------------------------------------

    @precondition(lambda self: self.asked and self.known)
    @rule(data=st.data(), right_session=st.booleans())
    def the_bridge_answers(self, data: st.DataObject, right_session: bool) -> None:
        open_ = self._open()
        pick_open: bool = data.draw(st.booleans())
        some = open_ if open_ and pick_open else self.asked
        self._answer(data, data.draw(st.sampled_from(some)), right_session)

    @precondition(lambda self: self._passing())
    @rule(data=st.data(), right_session=st.booleans())
    def the_answer_comes_as_the_hold_passes(self, data: st.DataObject, right_session: bool) -> None:
        """The hold's timer fires and the answer is read before the hook sees its timeout:
        the answer, taken, is what the hook returns (or, refused, the hold passes)."""
        asked = data.draw(st.sampled_from(self._passing()))
        self.loop.now = asked.opened + asked.hold
        self._answer(data, asked, right_session, late=True)
        self._expire()

    @precondition(lambda self: self._open())
    @rule(data=st.data())
    def the_hook_goes_away_as_the_answer_comes(self, data: st.DataObject) -> None:
        """The agent gives up on the hook in the moment the answer is read: one end only."""
        asked = data.draw(st.sampled_from(self._open()))
        self._answer(data, asked, True, leaving=True)
        asked.left = True
        if asked.state == "open":
            asked.state = "dismissed"

    def _passing(self) -> list[Asked]:
        """Open requests whose hold has not passed yet but can."""
        return [a for a in self._open() if a.hold < HOLDS[-1] and self.loop.now < a.opened + a.hold]

    def _answer(
        self,
        data: st.DataObject,
        asked: Asked,
        right_session: bool,
        *,
        late: bool = False,
        leaving: bool = False,
    ) -> None:
        answers = ANSWERS.get(asked.kind) or _permission_answers(asked)
        answer = data.draw(st.sampled_from(answers))
        session = (asked.agent, asked.session)
        if not right_session or session not in self.known:
            # any session: one this daemon knows, one it had before it restarted, or one it
            # never had; whatever it cannot take, it refuses in words the card shows
            session = data.draw(st.sampled_from(sorted(self.known | {*SESSIONS, STRANGER})))
            if session not in self.known:
                hypothesis.event("an answer for a session the daemon does not hold")
        command = make_event(
            "control.attention.respond",
            source=BRIDGE,
            agent="aep-bridge",
            session=bounded_id(session[1]),
            subject=asked.event.id,
            cause=asked.event.id,
            data={"answer": answer.answer},
            capture="full" if "text" in answer.answer or "values" in answer.answer else "metadata",
        )
        takes = (
            asked.state == "open"
            and asked.kind != "heads-up"
            and session[1] == asked.session
            and answer.verdict is not None
        )
        hypothesis.event(
            f"the answer is {'taken' if takes else 'refused'}{' late' if late else ''}"
        )
        if takes and answer.verdict is not None and answer.verdict.option in SESSION_OPTIONS:
            hypothesis.event(f"{asked.variant}: {answer.verdict.option} is taken")
        before = len(self._queued())

        async def deliver() -> None:
            if late:  # the timer has fired; the command is read in the next iteration
                await asyncio.sleep(0)
            if leaving and asked.gone is not None:  # the hook is not woken before it is read
                asked.gone.set_result(None)
            await self.daemon.loop.on_command(command)

        self._run(deliver())
        new = self._new(before)
        at = next(i for i, e in enumerate(new) if e.cause == command.id)
        if late or leaving:  # the hook's own end may follow, but never come between
            new = new[at : at + (3 if takes else 1)]
        else:
            assert at == 0, new
        if takes:
            assert [e.type for e in new] == [
                "control.accepted",
                "attention.answered",
                "attention.resolved",
            ], (answer, new)
            _accepted, answered, resolved = new
            assert answered.data is not None
            assert resolved.data is not None
            assert answered.data["answer"] == answer.recorded
            assert answered.data["via"] == "control"
            assert answered.cause == command.id
            assert resolved.cause == answered.id
            assert resolved.data["resolution"] == "answered"
            asked.state, asked.verdict = "answered", answer.verdict
            # the rule is kept once the hook returns it (not when the hook left meanwhile)
            if asked.agent == CX and answer.recorded == {"option": "allow_session"} and not leaving:
                rule_key = codex.session_rule_key(asked.payload)
                assert rule_key is not None
                self.allowed.setdefault(asked.session, set()).add(rule_key)
        else:
            assert [e.type for e in new] == ["control.rejected"], (answer, asked.state, new)
            assert new[0].data is not None
            assert new[0].data["reason"] == "invalid"
            assert new[0].session == bounded_id(session[1])
        self.sent.append(Sent(command, new[0].raw))
        self._spin()

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def the_bridge_retries(self, data: st.DataObject) -> None:
        """The bridge did not see the ack: it sends the same command again."""
        sent = data.draw(st.sampled_from(self.sent))
        before = len(self._queued())
        self._run(self.daemon.loop.on_command(sent.command))
        assert self._queued()[before:] == [sent.ack], "the recorded ack again, nothing else"
        self._spin()

    # -- what must always hold ----------------------------------------------------------------

    @invariant()
    def the_daemon_keeps_its_promises(self) -> None:
        """Checked in this order: the events read first, then what they must say."""
        self._every_event_keeps_the_protocol()
        self._every_command_has_one_decision()
        self._every_request_ends_as_the_model_says()

    def _every_event_keeps_the_protocol(self) -> None:
        queued = self._queued()
        for raw in queued[self.read :]:
            assert len(raw) <= LIMIT, "the bridge would refuse it"
            event = parse_event(raw)
            assert_valid(json.loads(raw))
            if event.id in self.by_id:  # a re-sent ack: the very same bytes
                assert self.by_id[event.id] == raw
                assert event.type in ACKS
                continue
            self.by_id[event.id] = raw
            stream = self.streams.setdefault(event.source, Stream())
            position = event.position
            assert position is not None, event
            assert stream.position is None or position > stream.position, (stream, event)
            stream.position = position
            if event.type == "attention.requested":
                stream.raised.append(event.id)
                self.requests[event.id] = event.source
                self.terminals[event.id] = []
            elif event.type.startswith("attention."):
                assert event.subject in self.requests, event  # subject = the request id
                assert self.requests[event.subject] == event.source
                if event.type in TERMINALS:
                    self.terminals[event.subject].append(event.id)
                    assert len(self.terminals[event.subject]) == 1, event
                else:
                    assert not self.terminals[event.subject], ("answered after its end", event)
            elif event.type == "session.ended":
                open_ = [r for r in stream.raised if not self.terminals[r]]
                assert not open_, ("the session ended with requests open (AEP-0002 §7.2)", open_)
            elif event.type in ACKS:
                assert event.cause is not None
                self.decisions.setdefault(event.cause, []).append(event.id)
        self.read = len(queued)

    def _every_command_has_one_decision(self) -> None:
        for sent in self.sent:
            assert len(self.decisions.get(sent.command.id, [])) == 1, sent.command

    def _every_request_ends_as_the_model_says(self) -> None:
        for asked in self.asked:
            ends = self.terminals.get(asked.event.id, [])
            if asked.state == "open":
                assert not ends, asked
                assert asked.task is None or not asked.task.done(), ("a hook freed early", asked)
                continue
            assert len(ends) == 1, ("no terminal", asked)
            end = parse_event(self.by_id[ends[0]])
            expected = "attention.timeout" if asked.state == "timeout" else "attention.resolved"
            assert end.type == expected, (asked.state, end)
            if end.type == "attention.resolved":
                resolution = {"answered": "answered", "elsewhere": "answered"}.get(
                    asked.state, "dismissed"
                )
                assert end.data is not None
                assert end.data["resolution"] == resolution, end
            if asked.task is None:
                continue
            assert asked.task.done(), ("a hook still waits after its request ended", asked)
            output = None if asked.left else asked.task.result()
            done = asked.kind == "steer" and asked.verdict == Verdict(option="done")
            if asked.state == "answered" and not asked.left and not done:
                assert output is not None, asked
                _check_output(asked, output)
            else:
                assert output is None, (asked.state, output)

    def teardown(self) -> None:
        for asked in self.asked:
            hypothesis.event(f"a {asked.kind} request ends {asked.state}")
        try:
            for asked in self.asked:  # the agent quits: every hook still waiting goes away
                if asked.gone is not None and not asked.gone.done():
                    asked.gone.set_result(None)
            self._spin()
        finally:
            self.loop.close()
            self.tmp.cleanup()


def _decision(behavior: str, **more: Any) -> dict[str, Any]:
    decision = {"behavior": behavior, **more}
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


def _check_output(asked: Asked, output: dict[str, Any]) -> None:
    """The hook's stdout JSON says what the person answered, in the agent's words."""
    verdict = asked.verdict
    assert verdict is not None
    if asked.kind == "steer":  # the person's words are the agent's next instruction
        assert output == {"decision": "block", "reason": verdict.text}
        return
    specific = output["hookSpecificOutput"]
    if asked.kind == "elicit":
        assert specific == {
            "hookEventName": "Elicitation",
            "action": "accept",
            "content": verdict.values,
        }
        return
    decision = specific["decision"]
    assert specific["hookEventName"] == "PermissionRequest"
    if asked.kind == "ask":
        assert decision["behavior"] == "allow"
        questions = asked.payload["tool_input"]["questions"]
        values = verdict.values or {}
        labels = {"1": ["PostgreSQL", "SQLite"], "2": ["us-east", "eu-west"]}
        expected = {}
        for n, question in enumerate(questions, 1):
            chosen = values[str(n)]
            chosen = chosen if isinstance(chosen, list) else [chosen]
            words = [labels[str(n)][int(c) - 1] if c.isdigit() else c for c in chosen]
            expected[question["question"]] = ", ".join(words)
        assert decision["updatedInput"]["answers"] == expected
        return
    if verdict.option == "deny":
        assert decision["behavior"] == "deny"
        if verdict.text:
            assert decision["message"] == verdict.text
        return
    assert decision["behavior"] == "allow"
    if verdict.option in SESSION_OPTIONS and asked.agent == CC:
        # exactly the one suggestion the pressed option named, at session scope
        assert decision["updatedPermissions"] == [GRANTED[(asked.variant, verdict.option)]]
    else:
        assert "updatedPermissions" not in decision


DaemonModel.TestCase.settings = machine_settings(120, 30)
test_the_daemons_held_loop = DaemonModel.TestCase


# -- what the machine found, as plain cases ---------------------------------------------------

URL = "ws://127.0.0.1:9/socket"


def _respond(request: Event, answer: dict[str, Any]) -> Event:
    return make_event(
        "control.attention.respond",
        source=BRIDGE,
        agent="aep-bridge",
        session=request.session,
        subject=request.id,
        cause=request.id,
        data={"answer": answer},
        capture="full",
    )


def _raise(
    loop: ClockLoop, daemon: AgentDaemon, data: dict[str, Any], hold: float
) -> tuple[asyncio.Task[dict[str, Any] | None], Event]:
    """A held hook and the request it raised."""
    gone: asyncio.Future[None] = loop.create_future()
    task = loop.create_task(daemon.handle(CC, data, hold, gone))
    task.add_done_callback(lambda _: None if gone.done() else gone.set_result(None))
    for _ in range(5):
        loop.run_until_complete(asyncio.sleep(0))
    (request,) = [
        e for e in map(parse_event, daemon.link.queued()) if e.type == "attention.requested"
    ]
    return task, request


def _sent(daemon: AgentDaemon) -> list[Event]:
    return [parse_event(raw) for raw in daemon.link.queued()]


def test_an_answer_read_as_the_hold_passes_is_the_hooks_decision(tmp_path: Path) -> None:
    """The hold's timer fired, and the person's answer was read before the hook woke to it:
    the daemon accepted it and said so to the bridge, so the agent must get it too."""
    loop = ClockLoop()
    try:
        daemon = AgentDaemon(tmp_path, URL, None)
        daemon.link.connected = True  # the bridge said hello
        hook, request = _raise(loop, daemon, payload(CC, "PermissionRequest"), 0.5)
        loop.now += 0.5  # the hold passes ...

        async def answer_in_the_same_moment() -> None:
            await asyncio.sleep(0)  # ... the timer has fired, the hook has not woken yet
            await daemon.loop.on_command(_respond(request, {"option": "allow"}))

        loop.run_until_complete(answer_in_the_same_moment())
        output = loop.run_until_complete(hook)
        types = [e.type for e in _sent(daemon)]
        assert types[-3:] == ["control.accepted", "attention.answered", "attention.resolved"]
        assert "attention.timeout" not in types
        assert output == _decision("allow")
    finally:
        loop.close()


def test_form_values_for_a_field_the_form_does_not_have_are_refused(tmp_path: Path) -> None:
    """`attention.answered` states what was applied (AEP-0008): a key the form never asked
    for would be recorded and then silently dropped, so the answer is refused instead."""
    loop = ClockLoop()
    try:
        daemon = AgentDaemon(tmp_path, URL, None)
        daemon.link.connected = True  # the bridge said hello
        hook, request = _raise(loop, daemon, payload(CC, "Elicitation"), 1000.0)
        values = {**ELICIT_MIN, "admin": "yes please"}
        loop.run_until_complete(daemon.loop.on_command(_respond(request, {"values": values})))
        last = _sent(daemon)[-1]
        assert last.type == "control.rejected"
        assert last.data is not None
        assert last.data["reason"] == "invalid"
        assert not hook.done()  # still open for a better answer
        loop.run_until_complete(daemon.loop.on_command(_respond(request, {"values": ELICIT_MIN})))
        assert loop.run_until_complete(hook) is not None
    finally:
        loop.close()


def test_typed_form_answers_stay_out_of_a_metadata_ceiling(tmp_path: Path) -> None:
    """At an attention ceiling of `metadata` the recorded answer keeps the structure (the
    choice, the number, the yes/no) and never what the person typed (AEP-0002 §5.3)."""
    loop = ClockLoop()
    try:
        ceiling = Ceiling(attention="metadata")
        daemon = AgentDaemon(tmp_path, URL, None, ceiling=ceiling)
        daemon.link.connected = True  # the bridge said hello
        hook, request = _raise(loop, daemon, payload(CC, "Elicitation"), 1000.0)
        loop.run_until_complete(daemon.loop.on_command(_respond(request, {"values": ELICIT_ALL})))
        content = loop.run_until_complete(hook)
        assert content is not None  # the agent gets everything the person gave
        assert content["hookSpecificOutput"]["content"]["reason"] == "release"
        (answered,) = [e for e in _sent(daemon) if e.type == "attention.answered"]
        assert answered.capture == "metadata"
        assert b"release" not in answered.raw
        assert answered.data is not None
        assert answered.data["answer"]["values"] == {
            "environment": "production",
            "confirm": False,
            "replicas": 3,
        }
    finally:
        loop.close()
