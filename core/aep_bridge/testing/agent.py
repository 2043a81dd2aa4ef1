"""An agent on the hub, in-process: the agent a test scripts against the real core (the
`bridge` fixture's, and the core's own tests')."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..aep.build import make_event
from ..aep.envelope import Event
from ..aep.ids import source_uri
from ..intake.hub import Delivery, Hub, Participant
from ..intake.principals import Principal


class ScriptedAgent:
    """An agent on a `Hub`, in-process: you script its events, it acknowledges the commands
    it is sent, like `TinyAgent` over a WebSocket but without the socket. The `bridge`
    fixture's agent (`RunningBridge.agent()`); the core's own tests run it on their hub too.

    With an `instance` its `hello` names one process (AEP-0003 §4), so a bridge that restarts
    routes commands to it again as soon as it `reconnect`s, before it emits anything.

    Every command it receives is in `commands`; it accepts each one (or rejects it, if
    `decide(command)` returns a reason), and answers to its requests are followed by
    `attention.answered` and `attention.resolved`, as a real agent's are. `answers` is the
    `answer` of each `control.attention.respond` it got: `[{"option": "deny"}]`.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        agent: str = "test-agent",
        session: str = "sess-1",
        accepts: tuple[str, ...] = (
            "control.attention.respond",
            "control.cancel",
            "control.pause",
            "control.resume",
        ),
        decide: Any = None,
        host: str = "test-host",
        instance: str | None = None,
        principal: Principal | None = None,
        os_user: str | None = None,
    ) -> None:
        self.hub = hub
        self.agent = agent
        self.session = session
        self.source = source_uri(host, agent, session)
        self.decide = decide
        #: whose token it emits with (a named one: `aep-bridge token create`), and the OS
        #: user its events name (the daemon's `osuser`), for the owner of its session
        self.principal = principal
        self.os_user = os_user
        self.commands: list[Event] = []
        self.acks: dict[str, Event] = {}
        self._seq = 0
        self.participant = hub.join(
            Participant(
                "local",
                authenticated=True,
                role="emitter",
                agent=agent,
                instance=instance,
                capabilities={"control": {"accepts": list(accepts)}},
                push=self._push,
            )
        )
        hub.said_hello(self.participant)

    def reconnect(self, hub: Hub) -> None:
        """The agent's connection is back on `hub` (a restarted bridge's): it joins and says
        `hello`, and sends nothing. With an `instance`, that is enough for the commands
        waiting for its sessions to reach it (`Hub.said_hello`); without one, its next
        event claims its session."""
        self.hub = hub
        hub.join(self.participant)
        hub.said_hello(self.participant)

    def emit(self, type_: str, data: dict[str, Any] | None = None, **envelope: Any) -> Event:
        """Emit the session's next event (its `seq` follows on)."""
        self._seq += 1
        if self.os_user:
            envelope.setdefault("extensions", {"osuser": self.os_user})
        event = make_event(
            type_,
            source=self.source,
            agent=self.agent,
            session=self.session,
            seq=self._seq,
            data=data if data is not None else {},
            **envelope,
        )
        self.hub.admit([event], origin=self.participant, by=self.principal)
        return event

    def start(self, label: str = "fix the tests", cwd: str = "/work/app") -> Event:
        """`session.started`: the session's thread is named after `label`."""
        return self.emit("session.started", {"label": label, "cwd": cwd}, capture="redacted")

    def ask(
        self,
        prompt: str = "Run `make test`?",
        options: Sequence[str | tuple[str, str]] = ("allow", "deny"),
        **data: Any,
    ) -> Event:
        """`attention.requested` with one option per entry: an id (its label is the id,
        capitalised) or an `(id, label)` pair. Returns the request; a command answering it has
        the request's `id` as its `subject`."""
        pairs = [o if isinstance(o, tuple) else (o, o.capitalize()) for o in options]
        return self.emit(
            "attention.requested",
            {
                "kind": "permission",
                "prompt": prompt,
                "options": [{"id": i, "label": label} for i, label in pairs],
                **data,
            },
            capture="full",
        )

    def say(self, text: str) -> Event:
        """`message.agent.replied`: what the agent tells the person."""
        return self.emit("message.agent.replied", {"text": text}, capture="full")

    def end(self, reason: str = "normal") -> Event:
        """`session.ended`."""
        return self.emit("session.ended", {"reason": reason})

    def _push(self, item: object) -> None:
        # A real agent answers over a socket, so its ack comes after the hub is waiting for it.
        if isinstance(item, Delivery):
            asyncio.get_running_loop().call_soon(self._react, item.event)

    def _react(self, command: Event) -> None:
        self.commands.append(command)
        known = self.acks.get(command.id)
        if known is not None:  # a retried command gets the same decision, not a second one
            self.hub.admit([known], origin=self.participant)
            return
        reason = self.decide(command) if self.decide is not None else None
        if reason is None:
            ack = self.emit("control.accepted", {}, cause=command.id)
        else:
            ack = self.emit("control.rejected", {"reason": reason}, cause=command.id)
        self.acks[command.id] = ack
        if reason is None and command.type == "control.attention.respond":
            answer = dict((command.data or {}).get("answer") or {})
            self.emit(
                "attention.answered",
                {"answer": answer},
                subject=command.subject,
                cause=command.id,
                capture="full",
            )
            self.emit(
                "attention.resolved",
                {"resolution": "answered"},
                subject=command.subject,
                cause=ack.id,
            )

    @property
    def answers(self) -> list[dict[str, Any]]:
        return [
            dict((c.data or {}).get("answer") or {})
            for c in self.commands
            if c.type == "control.attention.respond"
        ]


__all__ = ["ScriptedAgent"]
