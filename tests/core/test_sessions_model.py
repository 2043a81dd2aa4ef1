"""Sessions mirrored into threads, against a model, in random orders and across restarts.

Hypothesis drives a whole bridge (`Rig`: the real hub, store, bridge, outboxes and memory
channels) with three agents, two of which give their sessions the same name on different
hosts (AEP session identity is emitter-scoped), through random sequences of replies,
sessions named late or renamed, session ends, and restarts, clean or with nothing flushed.
After every step each channel must show one thread per session, named as the agent last
named it, holding that session's messages and no other's, in the order they were emitted;
an ended session's thread says so and is archived or kept as its channel is configured.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from tests.core.doubles import LocalAgent

from .rig import BridgeMachine, machine_settings

CHANNELS = {
    "alpha": {"type": "memory", "approvers": ["alice"], "on_session_end": "archive"},
    "beta": {"type": "memory", "approvers": ["alice"], "on_session_end": "keep"},
}
#: (agent, host, session): the first two name their sessions alike
AGENTS = (("claude", "laptop", "main"), ("codex", "server", "main"), ("claude", "laptop", "side"))


@dataclass
class Mirrored:
    """What the model expects of one agent's session."""

    agent: LocalAgent
    default_name: str
    name: str | None = None  # the label it last gave in session.started
    said: list[str] = field(default_factory=list)
    started: bool = False  # it has emitted something: it has a thread
    ended: bool = False


class SessionsMirrored(BridgeMachine):
    rig_options: ClassVar[dict[str, Any]] = {"channels": CHANNELS}

    def __init__(self) -> None:
        super().__init__()
        self.killed = False  # a restart flushed nothing: a message may show twice
        self.sessions = [
            Mirrored(self.rig.agent(session, agent=agent, host=host), f"{agent} {session}")
            for agent, host, session in AGENTS
        ]

    # -- agents ------------------------------------------------------------------------------

    @rule(k=st.integers(0, len(AGENTS) - 1), words=st.integers(0, 99))
    def reply(self, k: int, words: int) -> None:
        mirrored = self.sessions[k]
        if mirrored.ended:
            return
        text = f"{mirrored.default_name} says {len(mirrored.said)}-{words}"
        mirrored.agent.emit("message.agent.replied", {"text": text}, capture="full")
        mirrored.said.append(text)
        mirrored.started = True
        self._settle()

    @rule(k=st.integers(0, len(AGENTS) - 1), label=st.sampled_from(["fix tests", "refactor"]))
    def name_the_session(self, k: int, label: str) -> None:
        mirrored = self.sessions[k]
        if mirrored.ended:
            return
        named = f"{label} ({mirrored.default_name})"
        mirrored.agent.start(label=named)
        mirrored.name = named
        mirrored.started = True
        self._settle()

    @rule(k=st.integers(0, len(AGENTS) - 1))
    def end(self, k: int) -> None:
        mirrored = self.sessions[k]
        if mirrored.ended or not mirrored.started:
            return
        mirrored.agent.emit("session.ended", {"reason": "normal"})
        mirrored.ended = True
        self._settle()

    # -- the bridge ------------------------------------------------------------------------

    @rule(flush=st.booleans(), before_settling=st.integers(0, 8))
    def restart(self, flush: bool, before_settling: int) -> None:
        """Emit one more reply, let the loop turn a few times, then stop and start again."""
        live = [m for m in self.sessions if not m.ended]
        if live:
            mirrored = live[before_settling % len(live)]
            text = f"{mirrored.default_name} says {len(mirrored.said)} at the restart"
            mirrored.agent.emit("message.agent.replied", {"text": text}, capture="full")
            mirrored.said.append(text)
            mirrored.started = True
        for _ in range(before_settling):
            self._run(asyncio.sleep(0))
        self._restart([m.agent for m in self.sessions], flush_timeout=5.0 if flush else 0.0)
        self.killed = self.killed or not flush
        self._settle()

    # -- what everyone sees ------------------------------------------------------------------

    def _thread(self, channel: str, mirrored: Mirrored) -> str | None:
        record = self.rig.bridge.sessions.find(mirrored.agent.source, mirrored.agent.session)
        return None if record is None else self.rig.bridge.sessions.thread_id(channel, record.id)

    @invariant()
    def one_thread_per_session_in_each_channel(self) -> None:
        started = [m for m in self.sessions if m.started]
        for name in CHANNELS:
            memory = self.rig.channel(name)
            assert len(memory.threads) == len(started), (name, memory.threads)
            threads = {self._thread(name, m) for m in started}
            assert threads == set(memory.threads), (name, threads, memory.threads)

    @invariant()
    def each_thread_is_named_and_holds_its_session_in_order(self) -> None:
        for name in CHANNELS:
            memory = self.rig.channel(name)
            for mirrored in (m for m in self.sessions if m.started):
                thread = self._thread(name, mirrored)
                assert thread is not None
                view = memory.threads[thread]
                assert view.name == (mirrored.name or mirrored.default_name), (name, view)
                texts = [m.text for m in memory.messages if m.thread_id == thread]
                # a reply's first paragraph: the lines a run or session ends with join it
                said = [t.split("\n\n", 1)[0] for t in texts if " says " in t]
                assert all(t.startswith(mirrored.default_name + " says") for t in said), said
                assert list(dict.fromkeys(said)) == mirrored.said, (name, said, mirrored.said)
                if not self.killed:
                    assert len(said) == len(mirrored.said), (name, said)  # none twice
                ended = any("Session ended" in t for t in texts)
                assert ended == mirrored.ended, (name, texts)
                assert view.closed == (mirrored.ended and name == "alpha"), (name, view)


TestSessionsMirrored = SessionsMirrored.TestCase
TestSessionsMirrored.settings = machine_settings(examples=40, steps=20)
