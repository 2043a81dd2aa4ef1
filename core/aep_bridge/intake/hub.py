"""The relay at the heart of the embedded endpoint, independent of any transport.

Emitters' events come in (`admit`), are deduplicated on `(source, id)` for the replay buffer,
kept in a bounded buffer per session, and fanned out to every subscription whose attr-match
filter they pass, down-levelled to its capture ceiling. Commands are routed to the one live
connection that claims the addressed session, or refused to the sender with the error frame
the control profile names (AEP-0004 §4). The HTTP, SSE and WebSocket bindings in `endpoint`
and the in-process consumer in `source` are thin layers over this one object, so all of them
have the same semantics.

Everything here runs on one event loop thread and never awaits while changing state, so a
subscription's replay and its switch to live delivery are atomic: no event falls between.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from ..aep.capture import downlevel
from ..aep.envelope import Event
from ..aep.errors import InvalidEvent, InvalidFilter
from ..aep.filters import Filter
from ..aep.registry import AEP_VERSION, CAPTURE_ORDER, SEVERITY_RANK, Capture
from ..aep.validation import parse_event

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger("aep_bridge.intake")

#: `notice` and above may never be dropped toward a slow consumer (AEP-0003 §8.4).
_DROPPABLE_BELOW: Final = SEVERITY_RANK["notice"]

Position = tuple[int, int]


@dataclass(frozen=True, slots=True)
class HubLimits:
    """How much the hub holds; the defaults suit one machine's agents."""

    #: events kept per session for replay (advertised as `replay.buffer`)
    replay_buffer: int = 1000
    #: `(source, id)` keys remembered for admission dedupe
    dedupe_window: int = 100_000
    #: items queued toward one subscriber before it counts as slow
    queue_limit: int = 10_000
    #: `from` positions one subscribe may name
    max_from_positions: int = 256
    #: subscriptions one connection may hold
    max_subscriptions: int = 64
    #: sessions with a replay buffer; the least recently active beyond this are forgotten
    max_buffered_sessions: int = 10_000


@dataclass(frozen=True, slots=True)
class Frame:
    """A connection-scoped WebSocket frame (no dot in its `type`), never an event."""

    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delivery:
    """An event on its way to one subscriber, as that subscriber may see it."""

    event: Event

    @property
    def raw(self) -> bytes:
        return self.event.raw


Outbound = Frame | Delivery


@dataclass(eq=False)
class Participant:
    """One party connected to the hub: a WebSocket, an SSE stream, an HTTP client, in-process."""

    kind: Literal["ws", "sse", "http", "local"]
    authenticated: bool
    role: str = "consumer"
    agent: str | None = None
    instance: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    #: sessions this connection emits on: commands for them are delivered here
    claims: set[str] = field(default_factory=set)
    #: how the hub pushes commands and error frames to this participant (WebSocket, local)
    push: Callable[[Outbound], None] | None = None
    id: int = field(default_factory=itertools.count(1).__next__)

    @property
    def accepts(self) -> list[str] | None:
        """The declared `control.accepts`, or None when no control block was declared."""
        control = self.capabilities.get("control")
        if not isinstance(control, dict) or not isinstance(control.get("accepts"), list):
            return None
        return [a for a in control["accepts"] if isinstance(a, str)]

    @property
    def emits(self) -> bool:
        return self.role in ("emitter", "both")


class SubscribeError(Exception):
    """A refused subscribe, with its closed-set code (AEP-0003 §6.5)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class Subscription:
    """One subscription's queue toward its consumer, with the §8.4 backpressure rule."""

    def __init__(
        self,
        owner: Participant,
        sub_id: str,
        filter_: Filter,
        capture: Capture | None,
        limit: int,
    ) -> None:
        self.owner = owner
        self.id = sub_id
        self.filter = filter_
        self.capture = capture
        self.limit = limit
        self.queue: deque[Outbound] = deque()
        self.ready = asyncio.Event()
        #: last position delivered per session, for a `closing` frame
        self.delivered: dict[str, Position] = {}
        #: replayed items still queued: the live limit does not count them, or a consumer
        #: resuming a large backlog would lose live events with nothing to tell it
        self.replay_left = 0
        self.dropped = 0
        self.overflowed = False
        self.closed = False

    def offer(self, item: Outbound) -> None:
        if self.closed:
            return
        if len(self.queue) - self.replay_left >= self.limit and isinstance(item, Delivery):
            if SEVERITY_RANK[item.event.severity] < _DROPPABLE_BELOW:
                self.dropped += 1
                return
            self.overflowed = True  # deliver or disconnect: the consumer resumes exactly
            self.ready.set()
            return
        self.queue.append(item)
        self.ready.set()

    async def next(self) -> Outbound | None:
        """The next item, or None once the subscription is closed or overflowed."""
        while not self.queue:
            if self.closed or self.overflowed:
                return None
            self.ready.clear()
            await self.ready.wait()
        item = self.queue.popleft()
        self.replay_left = max(0, self.replay_left - 1)
        if isinstance(item, Delivery) and item.event.position is not None:
            assert item.event.session is not None
            self.delivered[item.event.session] = item.event.position
        return item

    def drain(self) -> list[Outbound]:
        """Everything queued now, without waiting."""
        items = list(self.queue)
        self.queue.clear()
        self.replay_left = 0
        for item in items:
            if isinstance(item, Delivery) and item.event.position is not None:
                assert item.event.session is not None
                self.delivered[item.event.session] = item.event.position
        return items

    def close(self) -> None:
        self.closed = True
        self.ready.set()


class _Buffer:
    """One session's replay buffer: the newest events' positions and bytes, and what eviction
    has cost.

    Only `(position, bytes)` is kept, not the parsed event: bytes and tuples of ints are
    invisible to Python's cycle collector, so a hub holding a hundred thousand events costs
    no collection pauses. A replay parses what it sends, which is rare next to ingest.
    """

    __slots__ = ("entries", "evicted")

    def __init__(self, size: int) -> None:
        self.entries: deque[tuple[Position, bytes]] = deque(maxlen=size)
        self.evicted: Position | None = None

    def add(self, position: Position, raw: bytes) -> None:
        if len(self.entries) == self.entries.maxlen:
            oldest = self.entries[0][0]
            if self.evicted is None or oldest > self.evicted:
                self.evicted = oldest
        self.entries.append((position, raw))

    def positions(self) -> list[tuple[Position, bytes]]:
        """The held entries in position order."""
        return sorted(self.entries, key=lambda entry: entry[0])

    def held(self, after: Position | None = None) -> list[Event]:
        """The held events after `after` (all when None), parsed, in position order."""
        return [
            parse_event(raw)
            for position, raw in self.positions()
            if after is None or position > after
        ]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A command the hub refused on the target's behalf (AEP-0004 §4.2)."""

    code: Literal["no-route", "ambiguous", "unsupported", "unauthorized"]
    detail: str

    def frame(self, command_id: str) -> Frame:
        return Frame(
            {"type": "error", "cause": command_id, "code": self.code, "detail": self.detail}
        )


@dataclass(slots=True)
class _Pending:
    """An in-process sender waiting for the ack of a command."""

    command: Event
    future: asyncio.Future[Event]


def parse_positions(value: object, limit: int) -> list[tuple[str, Position]] | Literal["all"]:
    """A subscribe's `from`: the literal `all`, or `{session, epoch, seq}` objects."""
    if value == "all":
        return "all"
    if not isinstance(value, list):
        raise SubscribeError("invalid-filter", '`from` must be an array of positions or "all"')
    if len(value) > limit:
        raise SubscribeError(
            "limit-exceeded", f"`from` names {len(value)} positions; this endpoint replays {limit}"
        )
    positions = []
    for item in value:
        if not isinstance(item, dict):
            raise SubscribeError("invalid-filter", "each `from` position is an object")
        session, epoch, seq = item.get("session"), item.get("epoch", 0), item.get("seq")
        ok = (
            isinstance(session, str)
            and session
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (epoch, seq))
        )
        if not ok:
            raise SubscribeError(
                "invalid-filter",
                "a `from` position is {session: string, epoch: int >= 0, seq: int >= 0}",
            )
        positions.append((str(session), (int(epoch), int(seq))))  # type: ignore[arg-type]
    return positions


class Hub:
    """The relay: admission, replay buffers, subscriptions, claims and command routing."""

    def __init__(self, limits: HubLimits | None = None, store: Store | None = None) -> None:
        self.limits = limits or HubLimits()
        self.store = store
        self._unpersisted: list[Event] = []
        self._buffers: OrderedDict[tuple[str, str], _Buffer] = OrderedDict()
        self._by_session: dict[str, list[tuple[str, str]]] = {}
        self._admitted: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._subscriptions: list[Subscription] = []
        self._participants: dict[int, Participant] = {}
        self._pending: dict[tuple[str, str], _Pending] = {}
        self.stats = {"admitted": 0, "duplicates": 0}
        if store is not None:
            self._restore(store)

    # -- persistence ------------------------------------------------------------------

    def _restore(self, store: Store) -> None:
        """Reload the persisted replay buffers: a restarted bridge replays what it held."""
        evicted = store.evicted_positions()
        for raw in store.buffered_events():
            try:
                event = parse_event(raw)
            except InvalidEvent:
                continue  # written by this code, so only a damaged file gets here
            self._admitted[event.dedupe_key] = None
            assert event.position is not None
            self._buffer(event).entries.append((event.position, event.raw))
        for key, position in evicted.items():
            if key in self._buffers:
                self._buffers[key].evicted = position

    def flush(self) -> None:
        """Write newly buffered events to the store (before an HTTP 202, and soon after WS)."""
        if self.store is not None and self._unpersisted:
            pending, self._unpersisted = self._unpersisted, []
            self.store.buffer_events(pending, self.limits.replay_buffer)

    # -- capabilities ------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """The capability block of the discovery document and the `hello` reply."""
        return {
            "filters": ["attr-match"],
            "replay": {"buffer": self.limits.replay_buffer, "all": True},
            "capture": list(CAPTURE_ORDER),
            "control": {"accepts": []},
            "roster": {},
            "experimental": {},
        }

    def discovery(self) -> dict[str, Any]:
        return {
            "aep": [AEP_VERSION],
            "role": "relay",
            "endpoints": {"events": "/events", "stream": "/stream", "socket": "/socket"},
            "capabilities": self.capabilities(),
        }

    # -- participants -----------------------------------------------------------------

    def join(self, participant: Participant) -> Participant:
        self._participants[participant.id] = participant
        return participant

    def leave(self, participant: Participant) -> None:
        self._participants.pop(participant.id, None)
        participant.claims.clear()
        for subscription in [s for s in self._subscriptions if s.owner is participant]:
            self.unsubscribe(subscription)

    # -- ingest -----------------------------------------------------------------------

    def admit(self, events: Iterable[Event], origin: Participant | None = None) -> None:
        """Take valid events from an emitter: claim, buffer (once), fan out (every time).

        A command admitted here is history (a replayed session log), shown to observers and
        never delivered to an agent: delivery is `route_command`'s, on a duplex connection.
        """
        for event in events:
            key = event.dedupe_key
            fresh = key not in self._admitted
            if fresh:
                self._admitted[key] = None
                if len(self._admitted) > self.limits.dedupe_window:
                    self._admitted.popitem(last=False)
                self.stats["admitted"] += 1
            else:
                self.stats["duplicates"] += 1
            if origin is not None and origin.emits and event.position is not None:
                # only the owner's sequenced stream claims: commands and attention.routed
                # carry no seq, and a router must never become a session's claimant
                assert event.session is not None
                origin.claims.add(event.session)
            if fresh and event.position is not None:
                self._buffer(event).add(event.position, event.raw)
                if self.store is not None:
                    self._unpersisted.append(event)
            self._settle(event)
            self._fan_out(event)

    def _buffer(self, event: Event) -> _Buffer:
        key = event.session_key
        assert key is not None
        buffer = self._buffers.get(key)
        if buffer is None:
            buffer = self._buffers[key] = _Buffer(self.limits.replay_buffer)
            self._by_session.setdefault(key[1], []).append(key)
            if len(self._buffers) > self.limits.max_buffered_sessions:
                self._forget(next(iter(self._buffers)))
        else:
            self._buffers.move_to_end(key)
        return buffer

    def _forget(self, key: tuple[str, str]) -> None:
        """Drop the least recently active session's buffer: memory stays bounded."""
        self._buffers.pop(key, None)
        keys = self._by_session.get(key[1], [])
        if key in keys:
            keys.remove(key)
        if not keys:
            self._by_session.pop(key[1], None)
        if self.store is not None:
            self.store.drop_buffer(*key)

    def _fan_out(self, event: Event) -> None:
        shaped: dict[Capture | None, Event] = {}
        for subscription in list(self._subscriptions):
            if not subscription.filter.matches_event(event):
                continue
            ceiling = subscription.capture
            if ceiling not in shaped:
                shaped[ceiling] = event if ceiling is None else downlevel(event, ceiling)
            subscription.offer(Delivery(shaped[ceiling]))

    # -- subscriptions ----------------------------------------------------------------

    def subscribe(
        self,
        owner: Participant,
        sub_id: str,
        filter_spec: object = None,
        *,
        from_: object = None,
        capture: object = None,
    ) -> Subscription:
        """Replay what `from_` asks for, then deliver live; raises `SubscribeError`."""
        try:
            filter_ = Filter.parse({} if filter_spec is None else filter_spec)
        except InvalidFilter as exc:
            raise SubscribeError("invalid-filter", str(exc)) from None
        if capture is not None and capture not in CAPTURE_ORDER:
            raise SubscribeError("invalid-filter", f"capture {capture!r} is not a capture level")
        positions = (
            None if from_ is None else parse_positions(from_, self.limits.max_from_positions)
        )
        held = sum(1 for s in self._subscriptions if s.owner is owner)
        if held >= self.limits.max_subscriptions:
            raise SubscribeError(
                "limit-exceeded",
                f"this connection already holds {held} subscriptions "
                f"(limit {self.limits.max_subscriptions})",
            )
        ceiling: Capture | None = capture  # checked above
        subscription = Subscription(owner, sub_id, filter_, ceiling, self.limits.queue_limit)
        if positions is not None:
            for item in self._replay(subscription, positions):
                subscription.queue.append(item)
            subscription.replay_left = len(subscription.queue)
        self._subscriptions.append(subscription)
        if subscription.queue:
            subscription.ready.set()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        subscription.close()
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def _replay(
        self, subscription: Subscription, positions: list[tuple[str, Position]] | Literal["all"]
    ) -> Iterator[Outbound]:
        def deliver(events: Iterable[Event]) -> Iterator[Outbound]:
            for event in events:
                if subscription.filter.matches_event(event):
                    ceiling = subscription.capture
                    yield Delivery(event if ceiling is None else downlevel(event, ceiling))

        if positions == "all":
            for key in list(self._buffers):
                yield from deliver(self._buffers[key].held())
            return
        for session, after in positions:
            for key in self._by_session.get(session, []):
                buffer = self._buffers[key]
                entries = buffer.positions()
                if buffer.evicted is not None and buffer.evicted > after and entries:
                    earliest = entries[0][0]
                    yield Frame(
                        {
                            "type": "replay-exhausted",
                            "sub": subscription.id,
                            "session": session,
                            "earliest": {"epoch": earliest[0], "seq": earliest[1]},
                        }
                    )
                yield from deliver(buffer.held(after))

    # -- roster -----------------------------------------------------------------------

    def roster(self) -> list[dict[str, Any]]:
        """One entry per live claim, declarations relayed verbatim (AEP-0003 §4.1)."""
        entries = []
        for participant in self._participants.values():
            for session in sorted(participant.claims):
                entry: dict[str, Any] = {"session": session}
                if participant.agent is not None:
                    entry["agent"] = participant.agent
                if participant.instance is not None:
                    entry["instance"] = participant.instance
                if "control" in participant.capabilities:
                    entry["control"] = participant.capabilities["control"]
                if "emits" in participant.capabilities:
                    entry["emits"] = participant.capabilities["emits"]
                entries.append(entry)
        return entries

    # -- commands ---------------------------------------------------------------------

    def claimants(self, session: str) -> list[Participant]:
        return [p for p in self._participants.values() if session in p.claims]

    def route_command(self, command: Event, sender: Participant) -> Refusal | None:
        """Deliver a command to its one claimant, or say why not (AEP-0004 §4)."""
        if not sender.authenticated:
            return Refusal("unauthorized", "control requires an authenticated connection")
        session = command.session
        assert session is not None
        targets = self.claimants(session)
        if not targets:
            return Refusal("no-route", f"no connected emitter claims session {session!r}")
        if len(targets) > 1:
            return Refusal(
                "ambiguous",
                f"{len(targets)} connections claim session {session!r}; none was chosen",
            )
        target = targets[0]
        accepts = target.accepts
        if accepts is None or command.type not in accepts:
            return Refusal(
                "unsupported", f"the target does not declare {command.type} in control.accepts"
            )
        if target.push is None:
            return Refusal("no-route", f"the claimant of {session!r} cannot receive commands")
        target.push(Delivery(command))
        self._fan_out(command)  # the audit trail: observers see who commanded what
        return None

    async def send_command(
        self, command: Event, sender: Participant, timeout: float
    ) -> Event | Refusal | None:
        """Route `command` and wait for its ack; None when the window passed in silence."""
        refusal = self.route_command(command, sender)
        if refusal is not None:
            return refusal
        key = (command.session or "", command.id)
        pending = self._pending.get(key)
        if pending is None:
            pending = _Pending(command, asyncio.get_running_loop().create_future())
            self._pending[key] = pending
        try:
            return await asyncio.wait_for(asyncio.shield(pending.future), timeout)
        except TimeoutError:
            return None
        finally:
            if pending.future.done():
                self._pending.pop(key, None)

    def _settle(self, event: Event) -> None:
        if event.type in ("control.accepted", "control.rejected") and event.cause is not None:
            pending = self._pending.get((event.session or "", event.cause))
            if pending is not None and not pending.future.done():
                pending.future.set_result(event)

    # -- introspection ----------------------------------------------------------------

    @property
    def subscriptions(self) -> Sequence[Subscription]:
        return tuple(self._subscriptions)

    def held(self, session: str) -> list[Event]:
        """Every buffered event of sessions named `session`, in position order."""
        return [e for key in self._by_session.get(session, []) for e in self._buffers[key].held()]
