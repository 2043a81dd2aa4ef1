"""The conformance kit for channel plugins, and the test doubles for core tests.

- `FakeCore`: a `BridgeCore` that records what adapters report, refuses non-approvers as the
  real core does, and answers the rest as told.
- `MemoryChannel`: an in-memory channel, for testing the core without any platform.
- `ScriptedIO`: the person at a setup wizard, answering from a script; `run_setup` runs a
  wizard as `aep-bridge setup NAME ARGS` does.
- `ChannelConformance`: the suite every channel runs against its own adapter and its own fake
  platform. Subclass it in your tests and provide a `harness` fixture:

      class TestMyChannel(ChannelConformance):
          @pytest.fixture
          async def harness(self):
              async with my_fake_platform() as fake:
                  core = FakeCore()
                  adapter = MyChannel(core, MyConfig(name="mine", approvers=["u1"], ...))
                  await adapter.start()
                  yield Harness(adapter, core, MyProbe(fake), approver=ChannelUser(id="u1"))
                  await adapter.stop()

  The probe is the test's eyes and hands on the fake platform: what a person would see
  (threads, messages as displayed, buttons) and what they can do (press, reply). See
  docs/writing-a-channel.md.

It needs pytest and pytest-asyncio, which a plugin's tests have anyway; nothing here runs in
the bridge itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from .. import signing
from ..adapter import DEFAULT_SIGNATURE_TTL, ChannelAdapter, ChannelState
from ..aep.build import make_event
from ..aep.envelope import Event
from ..aep.ids import source_uri
from ..intake.hub import Delivery, Hub, Participant
from ..markup import Code, Details, Diff, Paragraph, Span, parse_markdown, plain
from ..simtime import VirtualTime
from ..text import measure, split_text
from ..types import (
    OUTGOING_KINDS,
    ChannelCapabilities,
    ChannelConfig,
    ChannelUser,
    FormChoice,
    FormField,
    IncomingMessage,
    NotificationMessage,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
    SignedPress,
)
from ..wizard import SetupIO

if TYPE_CHECKING:
    from ..plugins import PluginHost

# -- the fake core ---------------------------------------------------------------------


class MemoryState:
    """An in-memory `ChannelState`."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    async def set(self, key: str, value: str) -> None:
        self.values[key] = value

    async def delete(self, key: str) -> None:
        self.values.pop(key, None)


@dataclass(frozen=True, slots=True)
class Press:
    """One call an adapter made to report a person's answer: the card, and what was chosen
    (an option's index or id, the text, or the form's values)."""

    card_id: str
    answer: int | str | dict[str, Any]
    user: ChannelUser
    via: str  # "button", "text" or "form"

    @property
    def request_id(self) -> str:
        """Deprecated (contract 1.1's name for the card id): use `card_id`."""
        return self.card_id


@dataclass(frozen=True, slots=True)
class Refusal:
    """A press or reply the core refused, its presser no approver (the real core logs it)."""

    card_id: str
    user: ChannelUser


class FakeCore:
    """A `BridgeCore` that records every report and answers with `next_resolution`.

    Like the real core it refuses anyone but an approver (`NOT_ALLOWED`, recorded in
    `refused`), on every press, reply, form and `may_answer`. `approvers` are user ids; a
    `Harness` built on a core without any makes its `approver` the one. A core with none,
    driven outside a harness, lets everyone answer, as the recorder always did.
    It signs and verifies press tokens as the real core does, with a key of its own.
    """

    def __init__(self, *, approvers: Iterable[str] | None = None) -> None:
        self.approvers: set[str] | None = None if approvers is None else set(approvers)
        self.presses: list[Press] = []
        #: presses, replies and `may_answer` calls refused: the presser is no approver
        self.refused: list[Refusal] = []
        self.incoming: list[IncomingMessage] = []
        self.threads: dict[tuple[str, str], str] = {}
        self.states: dict[str, MemoryState] = {}
        self.adapters: dict[str, ChannelAdapter] = {}
        self.next_resolution = Resolution(status=ResolutionStatus.ACCEPTED)
        self.pressed = asyncio.Event()
        self.secret = secrets.token_bytes(32)
        #: the channel `sign` and `verify` act for (the real core gives each channel its own)
        self.channel = ""

    def approves(self, user: ChannelUser) -> bool:
        """Whether `user` may answer here (the approver policy of this fake)."""
        return self.approvers is None or user.id in self.approvers

    def _refuse(self, card_id: str, user: ChannelUser) -> Resolution:
        self.refused.append(Refusal(card_id, user))
        self.pressed.set()
        return Resolution(status=ResolutionStatus.NOT_ALLOWED)

    def _record(self, press: Press) -> Resolution:
        self.presses.append(press)
        self.pressed.set()
        if not self.approves(press.user):
            return self._refuse(press.card_id, press.user)
        return self.next_resolution

    async def may_answer(self, card_id: str, user: ChannelUser) -> Resolution | None:
        return None if self.approves(user) else self._refuse(card_id, user)

    async def handle_incoming_message(self, message: IncomingMessage) -> None:
        self.incoming.append(message)
        self.pressed.set()

    async def resolve_permission(
        self, card_id: str, option: int | str, user: ChannelUser
    ) -> Resolution:
        return self._record(Press(card_id, option, user, "button"))

    async def answer_text(self, card_id: str, text: str, user: ChannelUser) -> Resolution:
        return self._record(Press(card_id, text, user, "text"))

    async def answer_form(
        self, card_id: str, values: Mapping[str, Any], user: ChannelUser
    ) -> Resolution:
        return self._record(Press(card_id, dict(values), user, "form"))

    def sign(self, card_id: str, option: str, *, ttl: float = DEFAULT_SIGNATURE_TTL) -> str:
        return signing.sign(self.secret, self.channel, card_id, option, ttl=ttl)

    def verify(self, token: str) -> SignedPress | None:
        return signing.verify(self.secret, self.channel, token)

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self.threads.get((channel, session_id))

    def state(self, channel: str) -> ChannelState:
        return self.states.setdefault(channel, MemoryState())

    def attach(self, adapter: ChannelAdapter) -> None:
        """Make `adapter` the one `call` runs methods of, and the channel `sign` acts for
        (`create_thread` does it too)."""
        self.adapters[adapter.instance_name] = adapter
        self.channel = adapter.instance_name

    async def call(self, channel: str, op: str, *args: Any, session_id: str | None = None) -> Any:
        """At once, without limits: the kit calls adapters directly too."""
        return await getattr(self.adapters[channel], op)(*args)

    async def create_thread(self, adapter: ChannelAdapter, session_id: str, name: str) -> str:
        """What the real core does: create once and remember the thread id."""
        self.attach(adapter)
        thread = await adapter.create_session_thread(session_id, name)
        self.threads[(adapter.instance_name, session_id)] = thread
        return thread


# -- what a probe shows ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ButtonView:
    """A button as shown: its label, and the bytes the platform carries back when pressed."""

    label: str
    data: bytes


@dataclass(frozen=True, slots=True)
class MessageView:
    """A message as a person sees it now (edits applied, markup rendered to plain text)."""

    id: str
    thread_id: str | None
    text: str
    buttons: tuple[ButtonView, ...] = ()


@dataclass(frozen=True, slots=True)
class ThreadView:
    id: str
    name: str
    closed: bool = False


class PlatformProbe(Protocol):
    """The test's eyes and hands on a fake platform."""

    async def threads(self) -> list[ThreadView]:
        """Every thread the adapter created, with its current name."""
        ...

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        """Messages in a thread (or all of them, notifications included), oldest first."""
        ...

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        """Press a button as `user`; return once the platform delivered the press."""
        ...

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        """Write `text` in a thread as `user`, optionally as a reply to a message."""
        ...


@dataclass(slots=True)
class Harness:
    """One adapter, started against its fake platform, with a fake core and a probe."""

    adapter: ChannelAdapter
    core: FakeCore
    probe: PlatformProbe
    approver: ChannelUser
    #: how long to wait for a press to travel through the platform to the core
    timeout: float = 5.0
    #: stop `adapter` and start a new one of the same config, on the same platform and
    #: core, and return it (the kit stops it): what a bridge restart does to a channel.
    #: Without it, the kit skips the restart tests.
    restart: Callable[[], Awaitable[ChannelAdapter]] | None = None

    def __post_init__(self) -> None:
        if self.core.approvers is None:  # the core refuses anyone else, as the real one does
            self.core.approvers = {self.approver.id}


# -- the memory channel ----------------------------------------------------------------


@dataclass(slots=True)
class _Stored:
    id: str
    thread_id: str | None
    text: str
    buttons: list[tuple[str, str]] = field(default_factory=list)  # (label, data)


def _buttons(request: PermissionRequest) -> list[tuple[str, str]]:
    """A memory card's buttons: one per option, carrying the card id and option index."""
    if request.informational:
        return []
    return [(o.label, f"{request.id}:{i}") for i, o in enumerate(request.options)]


def _question(request: PermissionRequest) -> str:
    """What a memory card says before its outcome: its title and its question."""
    return f"{request.title}\n{request.description}".strip()


class MemoryChannel(ChannelAdapter):
    """A channel that keeps everything in memory: the core's tests drive it and look inside."""

    name = "memory"
    capabilities = ChannelCapabilities(
        threads=True,
        buttons=True,
        edits=True,
        text_answers=True,
        forms=False,
        max_message_length=500,
        max_button_data=64,
        max_buttons=8,
    )

    def __init__(self, core: Any, config: ChannelConfig | None = None) -> None:
        super().__init__(core, config or ChannelConfig(name="memory"))
        self.started = False
        self.stopped = 0
        self.threads: dict[str, ThreadView] = {}
        self.messages: list[_Stored] = []
        self.cards: dict[
            str, tuple[str, PermissionRequest, str]
        ] = {}  # card -> (session, req, msg)
        self._by_key: dict[tuple[str, str], str] = {}
        self._ids = itertools.count(1)

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped += 1
        self.started = False

    def _thread(self, session_id: str) -> str | None:
        return self.core.thread_id(self.instance_name, session_id)

    def _post(
        self, thread: str | None, text: str, buttons: list[tuple[str, str]] | None = None
    ) -> str:
        """Store `text`, split at the limit; buttons go on the last piece. Returns its id."""
        pieces = split_text(text, self.capabilities.max_message_length)
        message_id = ""
        for index, piece in enumerate(pieces):
            message_id = f"m{next(self._ids)}"
            last = index == len(pieces) - 1
            self.messages.append(
                _Stored(message_id, thread, piece, list(buttons or []) if last else [])
            )
        return message_id

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        text = content.text or f"[{content.type}]"
        thread = self._thread(session_id)
        if content.key is not None:
            existing = self._by_key.get((session_id, content.key))
            for stored in self.messages:
                if stored.id == existing:
                    stored.text = text[: self.capabilities.max_message_length]
                    return
        message_id = self._post(thread, text)
        if content.key is not None:
            self._by_key[(session_id, content.key)] = message_id

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        message_id = self._post(self._thread(session_id), _question(request), _buttons(request))
        self.cards[request.id] = (session_id, request, message_id)
        # which message is which card, for edits and replies after a restart
        state = self.core.state(self.instance_name)
        await state.set(f"card:{request.id}", message_id)
        await state.set(f"message:{message_id}", request.id)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        message_id = await self.core.state(self.instance_name).get(f"card:{request.id}")
        for stored in self.messages:
            if stored.id == message_id:
                # an edited card keeps its question, as a platform's edited message does
                stored.text = f"{_question(request)}\n{outcome.summary()}"
                # buttons go when it closes and come back when it opens again (an answer
                # that waited for its agent in vain), as a platform's edited keyboard does
                stored.buttons = [] if outcome.closed else _buttons(request)

    async def send_notification(self, notification: NotificationMessage) -> None:
        self._post(None, notification.summary)

    async def create_session_thread(self, session_id: str, name: str) -> str:
        thread = f"t{next(self._ids)}"
        self.threads[thread] = ThreadView(thread, name)
        return thread

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        thread = self._thread(session_id)
        if thread in self.threads:
            self.threads[thread] = ThreadView(thread, new_name)

    async def archive_session_thread(self, session_id: str) -> None:
        thread = self._thread(session_id)
        if thread in self.threads:
            self.threads[thread] = ThreadView(thread, self.threads[thread].name, closed=True)

    async def press(self, data: str, user: ChannelUser) -> Resolution:
        """What the platform does when a button is pressed: hand the press to the core, by
        the card id and option index the button carries (nothing looked up)."""
        card, _, index = data.rpartition(":")
        return await self.core.resolve_permission(card, int(index), user)

    async def reply(
        self, thread: str | None, text: str, user: ChannelUser, reply_to: str | None
    ) -> None:
        """What the platform does when someone writes: a reply to a card is a text answer."""
        state = self.core.state(self.instance_name)
        card = await state.get(f"message:{reply_to}") if reply_to is not None else None
        if card is not None:
            await self.core.answer_text(card, text, user)
            return
        await self.core.handle_incoming_message(
            IncomingMessage(
                channel=self.instance_name,
                session_id=None,  # the core knows which session a thread belongs to
                thread_id=thread,
                user=user,
                text=text,
            )
        )

    def restarted(self) -> MemoryChannel:
        """A new instance on the same "platform" (threads and messages), as after a bridge
        restart: nothing of this instance's memory carries over, only its `ChannelState`."""
        successor = type(self)(self.core, self.config)
        successor.threads, successor.messages, successor._ids = (
            self.threads,
            self.messages,
            self._ids,
        )
        return successor


class MemoryProbe:
    """The `PlatformProbe` of a `MemoryChannel`."""

    def __init__(self, channel: MemoryChannel) -> None:
        self.channel = channel

    async def threads(self) -> list[ThreadView]:
        return list(self.channel.threads.values())

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        return [
            MessageView(
                m.id,
                m.thread_id,
                m.text,
                tuple(ButtonView(label, data.encode()) for label, data in m.buttons),
            )
            for m in self.channel.messages
            if thread_id is None or m.thread_id == thread_id
        ]

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        await self.channel.press(button.data.decode(), user)

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        await self.channel.reply(thread_id, text, user, reply_to.id if reply_to else None)


# -- an agent on the hub, in-process ----------------------------------------------------


class LocalAgent:
    """An agent joined to a `Hub` in-process: emits a session's events and acknowledges the
    commands it is sent, like `TinyAgent` over a WebSocket but without the socket.

    `decide(command)` returns None to accept, or a `control.rejected` reason. Answers to its
    requests are followed up with `attention.answered` and `attention.resolved`, as a real
    agent does.
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
    ) -> None:
        self.hub = hub
        self.agent = agent
        self.session = session
        self.source = source_uri(host, agent, session)
        self.decide = decide
        self.commands: list[Event] = []
        self.acks: dict[str, Event] = {}
        self._seq = 0
        self.participant = hub.join(
            Participant(
                "local",
                authenticated=True,
                role="emitter",
                agent=agent,
                capabilities={"control": {"accepts": list(accepts)}},
                push=self._push,
            )
        )

    def emit(self, type_: str, data: dict[str, Any] | None = None, **envelope: Any) -> Event:
        """Emit the session's next event (its `seq` follows on)."""
        self._seq += 1
        event = make_event(
            type_,
            source=self.source,
            agent=self.agent,
            session=self.session,
            seq=self._seq,
            data=data if data is not None else {},
            **envelope,
        )
        self.hub.admit([event], origin=self.participant)
        return event

    def start(self, label: str = "fix the tests", cwd: str = "/work/app") -> Event:
        return self.emit("session.started", {"label": label, "cwd": cwd}, capture="redacted")

    def ask(
        self,
        prompt: str = "Run `make test`?",
        options: tuple[str, ...] = ("allow", "deny"),
        **data: Any,
    ) -> Event:
        """An `attention.requested` with one option per id (labels are the ids, capitalised)."""
        return self.emit(
            "attention.requested",
            {
                "kind": "permission",
                "prompt": prompt,
                "options": [{"id": o, "label": o.capitalize()} for o in options],
                **data,
            },
            capture="full",
        )

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


# -- the conformance suite -------------------------------------------------------------

SESSION = "sess-1"
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "and",
    "keeps",
    "running",
]


#: an agent's reply as agents write them (the kit's blocks test parses it), and what of it a
#: person must read on every channel
_MARKDOWN = """## Fixed: invoice rounding

**Root cause:** `round()` rounds half to even; see [decimal docs](https://docs.python.org/3/library/decimal.html).

| file | callers |
|---|---|
| billing/invoice.py | 3 |

- changed `total()`
  - kept the old name as an alias
- added a test

```python
total = quantize(amount, Decimal("0.01"))
```
"""
_MARKDOWN_WORDS = (
    "Fixed: invoice rounding",
    "Root cause:",
    "round()",
    "rounds half to even",
    "decimal docs",
    "file",
    "callers",
    "billing/invoice.py",
    "changed",
    "total()",
    "kept the old name as an alias",
    "added a test",
    'total = quantize(amount, Decimal("0.01"))',
)


def sample_message(kind: str) -> OutgoingMessage:
    """A plausible message of each kind, with the structure the core puts in `metadata`."""
    samples: dict[str, dict[str, Any]] = {
        "text": {"text": "All tests pass."},
        "thought": {"text": "Looking at the failing test first."},
        "tool_call": {
            "text": "Bash: make test",
            "key": "tool-1",
            "metadata": {"tool": "Bash", "call_id": "tool-1", "status": "running"},
        },
        "tool_update": {
            "text": "Bash: make test (done in 1.2 s)",
            "key": "tool-1",
            "metadata": {"tool": "Bash", "call_id": "tool-1", "status": "completed"},
        },
        "plan": {
            "text": "1. reproduce\n2. fix\n3. test",
            "metadata": {"entries": [{"content": "reproduce", "status": "completed"}]},
        },
        "usage": {"text": "1,204 tokens in, 320 out", "metadata": {"input_tokens": 1204}},
        "session_end": {"text": "Session ended normally.", "notify": True},
        "error": {"text": "run failed: budget_exceeded", "notify": True},
        "attachment": {"text": "report.txt"},
        "system_message": {"text": "The agent compacted its context."},
    }
    return OutgoingMessage.model_validate({"type": kind, **samples[kind]})


def _request(card: str, options: list[tuple[str, str]], **extra: Any) -> PermissionRequest:
    return PermissionRequest(
        id=card,
        title="claude-code wants to run Bash",
        description="rm -rf build/",
        options=tuple(
            PermissionOption(id=oid, label=label, is_allow=label == "Allow")
            for oid, label in options
        ),
        **extra,
    )


def _form(card: str) -> PermissionRequest:
    """A form of three fields: a choice, a yes/no and words."""
    return PermissionRequest(
        id=card,
        kind="form",
        title="Deploy settings",
        fields=(
            FormField(
                id="f1",
                type="select",
                label="Environment",
                required=True,
                choices=(FormChoice(id="c1", label="Staging"), FormChoice(id="c2", label="Prod")),
            ),
            FormField(id="f2", type="boolean", label="Tell the team?"),
            FormField(id="f3", type="string", label="Release note", required=True),
        ),
    )


def _chosen(press: Press, request: PermissionRequest) -> int | None:
    """The index of the option a press chose, whether the adapter sent its index or its id."""
    if isinstance(press.answer, int):
        return press.answer
    ids = [o.id for o in request.options]
    return ids.index(press.answer) if press.answer in ids else None


def _visible(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class ChannelConformance:
    """What every channel must do. Subclass and provide a `harness` fixture (async)."""

    @pytest.fixture
    async def harness(self) -> Harness:  # pragma: no cover - plugins override it
        raise NotImplementedError("provide a `harness` fixture that yields a started Harness")

    @staticmethod
    async def _thread(h: Harness, name: str = "Fix the flaky test") -> str:
        return await h.core.create_thread(h.adapter, SESSION, name)

    @staticmethod
    async def _card(h: Harness, request: PermissionRequest) -> MessageView:
        await h.adapter.send_permission_request(SESSION, request)
        for message in reversed(await h.probe.messages()):
            if request.title in message.text or message.buttons:
                return message
        raise AssertionError("the permission card did not appear on the platform")

    async def _wait_for_press(self, h: Harness, count: int) -> None:
        async with asyncio.timeout(h.timeout):
            while len(h.core.presses) < count:
                h.core.pressed.clear()
                await h.core.pressed.wait()

    async def test_capabilities_and_name_are_declared(self, harness: Harness) -> None:
        adapter = type(harness.adapter)
        assert isinstance(adapter.name, str)
        assert adapter.name
        ChannelCapabilities.model_validate(adapter.capabilities)

    async def test_a_thread_is_created_once_and_renamed(self, harness: Harness) -> None:
        h = harness
        before = len(await h.probe.threads())
        thread = await self._thread(h)
        assert thread, "create_session_thread must return the platform thread id"
        if not h.adapter.capabilities.threads:
            return
        threads = await h.probe.threads()
        assert len(threads) == before + 1
        created = next(t for t in threads if t.id == thread)
        assert "Fix the flaky test" in created.name
        await h.adapter.rename_session_thread(SESSION, "Fix the flaky login test")
        renamed = next(t for t in await h.probe.threads() if t.id == thread)
        assert "Fix the flaky login test" in renamed.name
        assert len(await h.probe.threads()) == before + 1

    async def test_every_message_type_is_shown(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        for kind in OUTGOING_KINDS:
            await h.adapter.send_message(SESSION, sample_message(kind))
        shown = " ".join(m.text for m in await h.probe.messages())
        for kind in ("text", "error", "session_end"):
            assert _visible(sample_message(kind).text) in _visible(shown), kind

    async def test_an_unknown_message_type_is_tolerated(self, harness: Harness) -> None:
        await self._thread(harness)
        future = OutgoingMessage.model_construct(type="hologram", text="from a newer core")  # type: ignore[arg-type]
        await harness.adapter.send_message(SESSION, future)

    async def test_a_tool_update_replaces_its_card(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        await h.adapter.send_message(SESSION, sample_message("tool_call"))
        count = len(await h.probe.messages())
        await h.adapter.send_message(SESSION, sample_message("tool_update"))
        messages = await h.probe.messages()
        assert "done in 1.2 s" in messages[-1].text or any(
            "done in 1.2 s" in m.text for m in messages
        )
        if h.adapter.capabilities.edits:
            assert len(messages) == count, "with edits, an update edits the card in place"

    async def test_agent_text_is_shown_verbatim_not_as_markup(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        tricky = "if a < b && c > d: print('<b>bold</b>') *x* _y_ `z` [l](http://x)"
        await h.adapter.send_message(SESSION, OutgoingMessage(type="text", text=tricky))
        shown = (await h.probe.messages())[-1].text
        assert tricky in shown

    async def test_a_message_with_blocks_reads_without_markdown_markers(
        self, harness: Harness
    ) -> None:
        """The agent's markdown arrives parsed (`OutgoingMessage.blocks`): a channel shows
        every word of it in its own dialect, or as the plain `text`, never the raw markers."""
        h = harness
        await self._thread(h)
        blocks = parse_markdown(_MARKDOWN)
        before = len(await h.probe.messages())
        message = OutgoingMessage(type="text", text=plain(blocks), blocks=blocks, notify=True)
        await h.adapter.send_message(SESSION, message)
        shown = _visible(" ".join(m.text for m in (await h.probe.messages())[before:]))
        for words in _MARKDOWN_WORDS:
            assert words in shown, words
        for marker in ("**", "## ", "]("):
            assert marker not in shown, f"raw markdown {marker!r} shown"

    async def test_folded_output_and_a_diff_are_shown_not_lost(self, harness: Harness) -> None:
        """An activity message folds a failure's last lines (`Details`) and an edit's change
        (`Diff`) under their line: a channel may fold them too, but every line of them is
        in what it shows (the failing assertion, the new code), and an update of the message
        replaces it. (Contract 1.2.)"""
        h = harness
        await self._thread(h)
        before = len(await h.probe.messages())
        line = Paragraph(spans=(Span(text="❌ "), Span(text="pytest -q", code=True)))
        failure = Details(
            summary="output",
            blocks=(Code(code="E       assert 10.0 == 10.01\nFAILED test_rounding"),),
        )
        change = Diff(path="totals.py", unified="@@ -1 +1 @@\n-a = 1\n+a = 2\n", added=1, removed=1)
        blocks = (line, failure, Paragraph(spans=(Span(text="✅ Edit totals.py"),)), change)
        first = OutgoingMessage(
            type="tool_update", blocks=blocks[:2], text=plain(blocks[:2]), key="a1"
        )
        await h.adapter.send_message(SESSION, first)
        update = OutgoingMessage(type="tool_update", blocks=blocks, text=plain(blocks), key="a1")
        await h.adapter.send_message(SESSION, update)
        new = (await h.probe.messages())[before:]
        shown = _visible(" ".join(m.text for m in new))
        for words in ("pytest -q", "assert 10.0 == 10.01", "FAILED test_rounding", "a = 2"):
            assert words in shown, words
        if h.adapter.capabilities.edits:
            assert len(new) == 1, "the update was not an edit of the same message"

    async def test_a_card_shows_what_exactly_is_approved(self, harness: Harness) -> None:
        """A card's `details` (the command in a code block, the folder) are shown, in the
        channel's dialect or as the plain `description`. (Contract 1.2.)"""
        h = harness
        await self._thread(h)
        details = (
            Code(code="git push -u origin fix/rounding", language="bash"),
            Paragraph(spans=(Span(text="in "), Span(text="~/src/invoicer", code=True))),
        )
        request = _request("d4Tx", [("o1", "Allow"), ("o2", "Deny")])
        request = request.model_copy(update={"details": details, "description": plain(details)})
        card = await self._card(h, request)
        shown = _visible(card.text)
        assert "git push -u origin fix/rounding" in shown
        assert "~/src/invoicer" in shown

    async def test_a_card_press_reaches_the_core_with_the_right_ids(self, harness: Harness) -> None:
        h = harness
        if not h.adapter.capabilities.buttons:
            pytest.skip("this channel has no buttons")
        await self._thread(h)
        request = _request("c7Qa", [("o1", "Allow"), ("o2", "Deny")])
        card = await self._card(h, request)
        assert [b.label for b in card.buttons] == ["Allow", "Deny"]
        await h.probe.press(card, card.buttons[1], h.approver)
        await self._wait_for_press(h, 1)
        press = h.core.presses[-1]
        assert (press.card_id, _chosen(press, request), press.user.id, press.via) == (
            "c7Qa",
            1,
            h.approver.id,
            "button",
        )

    async def test_a_press_is_resolved_by_card_id_alone(self, harness: Harness) -> None:
        """A button carries the card id and the option; the core knows the rest. After the
        adapter restarts with its state wiped, a press on an old card still reaches the core
        as that card and option: the adapter kept nothing to answer it. (Contract 1.2.)"""
        h = harness
        if not h.adapter.capabilities.buttons:
            pytest.skip("this channel has no buttons")
        if h.restart is None:
            pytest.skip("the harness has no `restart`")
        await self._thread(h)
        request = _request("cDQf", [("o1", "Allow"), ("o2", "Deny"), ("o3", "Always")])
        card = await self._card(h, request)
        h.core.states.clear()
        adapter = await h.restart()
        try:
            await h.probe.press(card, card.buttons[2], h.approver)
            await self._wait_for_press(h, 1)
            press = h.core.presses[-1]
            assert (press.card_id, _chosen(press, request), press.via) == ("cDQf", 2, "button")
        finally:
            await adapter.stop()

    async def test_a_card_from_before_a_restart_still_shows_its_outcome(
        self, harness: Harness
    ) -> None:
        """What an adapter keeps in its `ChannelState` is there after a restart: a card
        posted before it is still edited with its outcome, its buttons gone."""
        h = harness
        if not h.adapter.capabilities.edits:
            pytest.skip("this channel cannot edit a card")
        if h.restart is None:
            pytest.skip("the harness has no `restart`")
        await self._thread(h)
        request = _request("cEQg", [("o1", "Allow"), ("o2", "Deny")])
        await self._card(h, request)
        count = len(await h.probe.messages())
        adapter = await h.restart()
        try:
            outcome = PermissionOutcome(
                status=OutcomeStatus.ANSWERED, option_id="o2", option_label="Deny", by="alice"
            )
            await adapter.update_permission_request(SESSION, request, outcome)
            messages = await h.probe.messages()
            assert len(messages) == count, "the card is edited, not posted again"
            shown = [m for m in messages if outcome.summary() in m.text]
            assert shown, "the outcome is shown on the card"
            assert all(m.buttons == () for m in shown), "a closed card keeps no buttons"
        finally:
            await adapter.stop()

    async def test_an_altered_press_never_reaches_the_core(self, harness: Harness) -> None:
        """Presses that come over HTTP (the channel's own routes, which the bridge does not
        authenticate) carry a token from `core.sign`: altered, they are refused before the
        core hears of them. Channels without routes get presses from their platform."""
        h = harness
        if not h.adapter.capabilities.buttons or not h.adapter.routes():
            pytest.skip("this channel takes no presses over its own HTTP routes")
        await self._thread(h)
        card = await self._card(h, _request("cFQh", [("o1", "Allow"), ("o2", "Deny")]))
        button = card.buttons[0]
        data = button.data
        # one byte changed at a time, at a dozen places spread over the data (and its end)
        for at in sorted({*range(0, len(data), max(1, len(data) // 12)), len(data) - 1}):
            altered = data[:at] + (b"A" if data[at : at + 1] != b"A" else b"B") + data[at + 1 :]
            with contextlib.suppress(Exception):  # the platform may report the refusal
                await h.probe.press(card, ButtonView(button.label, altered), h.approver)
        await asyncio.sleep(0.2)
        assert h.core.presses == [], "a press with altered data reached the core"
        await h.probe.press(card, button, h.approver)
        await self._wait_for_press(h, 1)
        assert h.core.presses[-1].card_id == "cFQh"

    async def test_presses_by_anyone_go_to_the_core_which_decides(self, harness: Harness) -> None:
        """Adapters never decide who may answer: a stranger's press reaches the core too."""
        h = harness
        if not h.adapter.capabilities.buttons:
            pytest.skip("this channel has no buttons")
        if not h.adapter.capabilities.identifies_users:
            pytest.skip("this platform does not say who pressed")
        await self._thread(h)
        h.core.next_resolution = Resolution(status=ResolutionStatus.NOT_ALLOWED)
        card = await self._card(h, _request("c8Qb", [("o1", "Allow")]))
        stranger = ChannelUser(id="stranger-99", name="Mallory")
        await h.probe.press(card, card.buttons[0], stranger)
        await self._wait_for_press(h, 1)
        assert h.core.presses[-1].user.id == "stranger-99"

    async def test_a_strangers_press_on_a_form_changes_nothing(self, harness: Harness) -> None:
        """Someone who is no approver presses a form's buttons: the core refuses each press
        (and logs it), and nothing anyone sees changes, so no approver later fills in a
        field a stranger chose. A channel that keeps a person's progress through a form
        asks `core.may_answer` before it changes anything."""
        h = harness
        caps = h.adapter.capabilities
        if not (caps.forms and caps.buttons):
            pytest.skip("this channel has no forms")
        if not caps.identifies_users:
            pytest.skip("this platform does not say who pressed")
        await self._thread(h)
        card = await self._card(h, _form("cFsn"))
        assert card.buttons, "a form's card offers a way to fill it in"
        before = await h.probe.messages()
        stranger = ChannelUser(id="stranger-99", name="Mallory")
        for button in card.buttons:
            await h.probe.press(card, button, stranger)
        async with asyncio.timeout(h.timeout):  # until the core refused each, or the card moved
            while len(h.core.refused) < len(card.buttons) and await h.probe.messages() == before:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # an edit the adapter started would land meanwhile
        assert await h.probe.messages() == before, "a stranger's press changed the chat"
        assert len(h.core.refused) >= len(card.buttons), "each press was refused by the core"
        assert all(r.user.id != h.approver.id for r in h.core.refused)

    async def test_the_outcome_is_shown_and_the_buttons_go(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        request = _request("c9Qc", [("o1", "Allow"), ("o2", "Deny")])
        await self._card(h, request)
        outcome = PermissionOutcome(
            status=OutcomeStatus.ANSWERED, option_id="o1", option_label="Allow", by="alice"
        )
        await h.adapter.update_permission_request(SESSION, request, outcome)
        messages = await h.probe.messages()
        assert any(outcome.summary() in m.text for m in messages), "the outcome must be shown"
        if h.adapter.capabilities.edits:
            card = next(m for m in messages if outcome.summary() in m.text)
            assert card.buttons == (), "a closed card keeps no buttons"

    async def test_an_informational_request_has_no_buttons(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        request = _request("cAQd", [("o1", "Allow"), ("o2", "Deny")], informational=True)
        await h.adapter.send_permission_request(SESSION, request)
        shown = [m for m in await h.probe.messages() if "rm -rf build/" in m.text]
        assert shown, "an informational request is still shown"
        assert all(m.buttons == () for m in shown)

    async def test_long_text_is_split_under_the_declared_limit(self, harness: Harness) -> None:
        h = harness
        caps = h.adapter.capabilities
        await self._thread(h)
        words = [f"{_WORDS[i % len(_WORDS)]}{i}" for i in range(caps.max_message_length // 2)]
        text = " ".join(words)
        assert measure(text, caps.length_unit) > 2 * caps.max_message_length
        before = len(await h.probe.messages())
        await h.adapter.send_message(SESSION, OutgoingMessage(type="text", text=text))
        pieces = (await h.probe.messages())[before:]
        assert len(pieces) >= 3
        for piece in pieces:
            assert measure(piece.text, caps.length_unit) <= caps.max_message_length
        shown = _visible(" ".join(p.text for p in pieces))
        positions = [shown.find(w) for w in (words[0], words[len(words) // 2], words[-1])]
        assert -1 not in positions, "all the text is shown"
        assert positions == sorted(positions), "in order"

    async def test_button_data_stays_under_the_declared_limit(self, harness: Harness) -> None:
        h = harness
        caps = h.adapter.capabilities
        if not caps.buttons:
            pytest.skip("this channel has no buttons")
        await self._thread(h)
        count = min(caps.max_buttons, 3)
        options = [(f"option-{i}-" + "x" * 60, f"Choice {i}") for i in range(count)]
        request = _request("cBQe" + "z" * 20, options)
        card = await self._card(h, request)
        assert len(card.buttons) == count
        for button in card.buttons:
            assert len(button.data) <= caps.max_button_data
        await h.probe.press(card, card.buttons[-1], h.approver)
        await self._wait_for_press(h, 1)
        assert _chosen(h.core.presses[-1], request) == count - 1

    async def test_a_notification_is_delivered(self, harness: Harness) -> None:
        h = harness
        await self._thread(h)
        await h.adapter.send_notification(
            NotificationMessage(
                session_id=SESSION,
                session_name="Fix the flaky test",
                type="permission",
                summary="claude-code is waiting for you",
            )
        )
        assert any("claude-code is waiting for you" in m.text for m in await h.probe.messages())

    async def test_stop_is_idempotent(self, harness: Harness) -> None:
        await harness.adapter.stop()
        await harness.adapter.stop()


# -- setup wizards ------------------------------------------------------------------


class ScriptedIO(SetupIO):
    """A `SetupIO` for testing a setup wizard: the person's answers come from a script.

    Each answer is a string, or a function of the prompt that returns one (to change the fake
    platform between two questions, as the person would). Everything shown is kept in
    `transcript`, prompts included; `prompts` are the questions asked, `secret_prompts` the
    ones asked without echo, `errors` what went to standard error. A question the script has
    no answer left for fails the test, instead of waiting for a person.
    """

    def __init__(self, *answers: str | Callable[[str], str]) -> None:
        self.answers: deque[str | Callable[[str], str]] = deque(answers)
        self.transcript: list[str] = []
        self.prompts: list[str] = []
        self.secret_prompts: list[str] = []
        self.errors: list[str] = []

    @property
    def text(self) -> str:
        """The transcript as one text."""
        return "\n".join(self.transcript)

    def say(self, text: str = "") -> None:
        self.transcript.append(text)

    def error(self, text: str) -> None:
        self.errors.append(text)
        self.transcript.append(text)

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        self.transcript.append(prompt)
        if not self.answers:
            raise AssertionError(f"the wizard asked {prompt!r}, and the script has no answer left")
        answer = self.answers.popleft()
        return (answer(prompt) if callable(answer) else answer).strip()

    def secret(self, prompt: str) -> str:
        self.secret_prompts.append(prompt)
        return self.ask(prompt)


async def run_setup(
    name: str | None,
    argv: Sequence[str] = (),
    *,
    io: SetupIO | None = None,
    host: PluginHost | None = None,
) -> int:
    """`aep-bridge setup NAME ARGV` in this event loop (a fake platform served in it keeps
    answering), talking to `io`; the plugins of `host`, else the installed ones. Returns the
    exit status."""
    from ..setup_command import run_setup as run

    return await run(name, argv, io=io, host=host)


__all__ = [
    "SESSION",
    "ButtonView",
    "ChannelConformance",
    "FakeCore",
    "Harness",
    "MemoryChannel",
    "MemoryProbe",
    "MemoryState",
    "MessageView",
    "PlatformProbe",
    "Press",
    "Refusal",
    "ScriptedIO",
    "ThreadView",
    "VirtualTime",
    "run_setup",
    "sample_message",
]
