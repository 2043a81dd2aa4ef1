"""The bridge loop's parts, each built on its own with real collaborators (issue 35).

`Mirror` and `QuestionCards` are objects given what they use, not base classes of `Bridge`:
here each is constructed without a `Bridge`, on a real `Store` (SQLite in a temporary
directory), real `Sessions`, `Renderer`, `Outbox` and `Attention`, and a `MemoryChannel`;
assertions are on what the channel shows and what the agent would be sent.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.redaction import RedactionPolicy, Redactor
from aep_bridge.config.people import People
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.contract.types import ChannelConfig, ResolutionStatus
from aep_bridge.intake.hub import Hub
from aep_bridge.intake.source import CommandResult, EventSource, LocalSource
from aep_bridge.loop.approvers import RouteApprovers
from aep_bridge.loop.attention import Attention
from aep_bridge.loop.away import AwayState
from aep_bridge.loop.channel_core import Channel
from aep_bridge.loop.mirror import Mirror
from aep_bridge.loop.questions import QuestionCards
from aep_bridge.loop.routing import Routes
from aep_bridge.loop.sessions import SessionRecord, Sessions
from aep_bridge.outbox import Outbox
from aep_bridge.render import Renderer
from aep_bridge.store import Store
from aep_bridge.testing import MemoryChannel
from aep_bridge.testing.memory import FakeCore

from .rig import ALICE, MALLORY

BRIDGE = "aep://bridge-host/agent/aep-bridge"
AGENT = "aep://dev-host/agent/claude-code/session/s1"
STREAM = "embedded"


@dataclass
class Parts:
    """The collaborators both parts are given, and what the agent was sent."""

    store: Store
    sessions: Sessions
    renderer: Renderer
    channel: Channel
    adapter: MemoryChannel
    core: FakeCore
    channels: dict[str, Channel]
    sources: dict[str, EventSource]
    questions: QuestionCards
    sent: list[Event] = field(default_factory=list)


def _event(type_: str, seq: int, data: dict[str, object], **envelope: object) -> Event:
    return make_event(
        type_,
        source=AGENT,
        agent="claude-code",
        session="s1",
        seq=seq,
        data=data,
        **envelope,  # type: ignore[arg-type]
    )


@asynccontextmanager
async def parts(tmp_path: Path) -> AsyncIterator[Parts]:
    """A store, a channel `alpha` (alice approves) with its outbox, an embedded source, and
    the question part built around its `Attention`; no `Bridge`."""
    store = Store.open(tmp_path)
    sessions = Sessions(store)
    renderer = Renderer(Redactor(RedactionPolicy()))
    core = FakeCore()
    config = ChannelConfig(name="alpha", type="memory", approvers=["alice"])
    adapter = MemoryChannel(core, config)
    core.attach(adapter)
    outbox = Outbox(adapter, store)
    channel = Channel("alpha", adapter, config, outbox)
    channels = {"alpha": channel}
    sources: dict[str, EventSource] = {STREAM: LocalSource(Hub(store=store))}
    sent: list[Event] = []

    async def send(session: SessionRecord, command: Event) -> CommandResult:
        sent.append(command)
        return CommandResult("accepted")

    questions = QuestionCards(
        store=store,
        sessions=sessions,
        approvers=RouteApprovers(None, People({})),
        renderer=renderer,
        host=PluginHost(),
        channels=channels,
        sources=sources,
        identity=BRIDGE,
        shows_content=lambda name: True,
        make_attention=functools.partial(Attention, store, sessions, send=send, source=BRIDGE),
    )
    await adapter.start()
    await outbox.start()
    try:
        yield Parts(
            store, sessions, renderer, channel, adapter, core, channels, sources, questions, sent
        )
    finally:
        await outbox.stop(0.0)
        store.close()


async def test_the_mirror_alone_writes_a_session_s_first_event_into_its_new_thread_once(
    tmp_path: Path,
) -> None:
    async with parts(tmp_path) as p:
        pending: list[tuple[str, str]] = []
        mirror = Mirror(
            store=p.store,
            sessions=p.sessions,
            attention=p.questions.attention,
            away=AwayState(p.store, p.sessions),
            renderer=p.renderer,
            routing=Routes(None),
            channels=p.channels,
            cards=p.questions,
            identity=BRIDGE,
            principal_in=lambda stream, session: None,
            create_threads=pending.extend,
            dedupe_window=1000,
        )
        started = _event("session.started", 1, {"label": "fix the flaky test"})
        replied = _event("message.agent.replied", 2, {"text": "Looking at it."}, capture="full")
        for event in (started, replied, replied):  # the reply delivered twice
            mirror.handle_event(STREAM, event)
        assert pending == [("alpha", mirror.sessions.find_by_session("s1").id)]  # type: ignore[union-attr]
        # what the bridge does with a thread to create: create it, then let its jobs go
        for name, session_id in pending:
            thread = await p.core.create_thread(p.adapter, session_id, "fix the flaky test")
            p.sessions.bind_thread(session_id, name, thread)
            p.channel.outbox.release(session_id)
        await p.channel.outbox.idle()
        [shown] = p.adapter.threads.values()
        assert shown.name == "fix the flaky test"
        texts = [m.text for m in p.adapter.messages if m.thread_id == shown.id]
        assert sum("Looking at it." in text for text in texts) == 1


async def test_the_question_part_alone_refuses_a_stranger_before_anything_changes(
    tmp_path: Path,
) -> None:
    async with parts(tmp_path) as p:
        asked = _event(
            "attention.requested",
            2,
            {
                "kind": "permission",
                "prompt": "Run rm -rf build?",
                "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
                "respond_via": ["control"],
            },
            severity="notice",
            capture="redacted",
            subject="ask-1",
        )
        with p.store.transaction():
            session, _ = p.sessions.get_or_create(asked, STREAM, "s1")
            request_id = p.questions.open_request(session, asked, [p.channel])
        await p.channel.outbox.idle()
        assert request_id in p.adapter.cards
        before = [(m.text, list(m.buttons)) for m in p.adapter.messages]

        stranger = await p.questions.attention.answer("alpha", request_id, MALLORY, option="o1")
        await p.channel.outbox.idle()
        assert stranger.status == ResolutionStatus.NOT_ALLOWED
        assert p.sent == []  # nothing went to the agent
        assert p.questions.attention.get(request_id).status == "open"  # type: ignore[union-attr]
        assert [(m.text, list(m.buttons)) for m in p.adapter.messages] == before

        approver = await p.questions.attention.answer("alpha", request_id, ALICE, option="o1")
        assert approver.status == ResolutionStatus.ACCEPTED
        await p.questions.attention.idle()
        assert [c.type for c in p.sent] == ["control.attention.respond"]
