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

Memory: with a store, a session's replay buffer lives in the store (`relay_buffer`, written by
`flush`) and the hub keeps only the session's newest position, reading the buffer back when
a replay asks for it; a session whose events came out of order, or with a position SQLite
cannot hold, keeps its buffer in memory, where the replay semantics are defined (the store
keeps the newest positions, memory the latest arrivals: the two agree only on ordered
streams). Without a store every buffer is in memory. Admission dedupe remembers a 60-bit
digest of each `(source, id)`, not the strings.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from array import array
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
from ..store import Floors, Position, floor_of

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger("aep_bridge.intake")

#: `notice` and above may never be dropped toward a slow consumer (AEP-0003 §8.4).
_DROPPABLE_BELOW: Final = SEVERITY_RANK["notice"]

SessionKey = tuple[str, str]

#: SQLite integers are signed 64-bit: the store does not keep a position beyond this.
_MAX_STORED: Final = (1 << 63) - 1
#: the dedupe digest's width (see `_Window`)
_DIGEST_MASK: Final = (1 << 60) - 1


def _rank(position: Position) -> int:
    """`position` as one int, ordered as positions are, while its seq is below 2**63.

    A store-backed session keeps only this of its newest position, and a subscription this
    of what it delivered last: an int (a small one is shared) costs less than a tuple of two.
    """
    return (position[0] << 63) | position[1]


def _storable(position: Position) -> bool:
    return position[0] <= _MAX_STORED and position[1] <= _MAX_STORED


@dataclass(frozen=True, slots=True)
class HubLimits:
    """How much the hub holds; the defaults suit one machine's agents."""

    #: events kept per session for replay (advertised as `replay.buffer`)
    replay_buffer: int = 1000
    #: `(source, id)` keys remembered for admission dedupe
    dedupe_window: int = 100_000
    #: items queued toward one subscriber before it counts as slow
    queue_limit: int = 10_000
    #: bytes of events queued toward one WebSocket or SSE connection (all its subscriptions)
    #: before it is dropped: a client that never reads costs this much, not `queue_limit`
    #: events of up to a megabyte each
    queue_bytes: int = 4 * 1024 * 1024
    #: bytes of events queued toward the bridge's own (in-process) consumer before an ingest
    #: waits for it (`Hub.room`): its count limit alone would let 10,000 events of a megabyte
    #: each pile up while a channel is slow
    local_queue_bytes: int = 64 * 1024 * 1024
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
    #: bytes of events queued toward this participant's subscriptions, and the most it may
    #: have (None: no byte budget, for the in-process consumer)
    queued_bytes: int = 0
    byte_budget: int | None = None
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
    """One subscription's queue toward its consumer, with the §8.4 backpressure rule.

    Two bounds make a consumer slow: `limit` items (then `debug` and `info` are dropped and
    anything higher overflows it), and its owner's `byte_budget`, shared by the owner's
    subscriptions (then whatever comes overflows it: the budget is what a client that never
    reads may cost). An overflowed subscription with a budget takes nothing more, and
    `on_overflow` is called once: its connection is closed with its positions (§8.4), to
    resume from them.
    """

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
        #: live items; the replay goes first and is not queued (see `replay`)
        self.queue: deque[Outbound] = deque()
        self.ready = asyncio.Event()
        #: last position delivered per session, for a `closing` frame (see `delivered`)
        self._delivered: dict[str, int | Position] = {}
        #: the replay still to send, read and parsed as the consumer takes it: a restarted
        #: bridge may hold a million events, which parsed at once would take gigabytes. The
        #: live limit does not count it, or a consumer resuming a large backlog would lose
        #: live events with nothing to tell it.
        self.replay: Iterator[Outbound] | None = None
        self.dropped = 0
        self.overflowed = False
        self.closed = False
        #: called once, when the subscription overflows (the endpoint drops the connection)
        self.on_overflow: Callable[[], None] | None = None
        #: set (and forgotten) once the queue is down to half its limit: an ingest waiting
        #: for this in-process consumer to make room (`Hub.room`), set once its queue is down
        #: to half its count limit and to `room_bytes` queued bytes
        self.room: asyncio.Event | None = None
        self.room_bytes = 0

    def offer(self, item: Outbound) -> None:
        if self.closed:
            return
        if isinstance(item, Delivery):
            owner = self.owner
            budget = owner.byte_budget
            if self.overflowed and budget is not None:
                return  # it is being disconnected: the consumer resumes from its position
            size = len(item.raw)
            if budget is not None and self.queue and owner.queued_bytes + size > budget:
                self._overflow()
                return
            if len(self.queue) >= self.limit:
                if SEVERITY_RANK[item.event.severity] < _DROPPABLE_BELOW:
                    self.dropped += 1
                    return
                self._overflow()  # deliver or disconnect: the consumer resumes exactly
                return
            owner.queued_bytes += size
        self.queue.append(item)
        self.ready.set()

    def _overflow(self) -> None:
        self.overflowed = True
        self.ready.set()
        if self.on_overflow is not None:
            on_overflow, self.on_overflow = self.on_overflow, None
            on_overflow()

    def _taken(self, item: Outbound) -> None:
        """`item` left the live queue: its bytes no longer count against the budget."""
        if isinstance(item, Delivery):
            self.owner.queued_bytes -= len(item.raw)

    @property
    def pending(self) -> bool:
        """Whether anything waits for the consumer (replay or live)."""
        return self.replay is not None or bool(self.queue)

    async def next(self) -> Outbound | None:
        """The next item, or None once the subscription is closed or overflowed."""
        if self.replay is not None and not self.closed:
            item = next(self.replay, None)
            if item is not None:
                if isinstance(item, Delivery):
                    self._note(item.event)
                return item
            self.replay = None
        while not self.queue:
            if self.closed or self.overflowed:
                return None
            self.ready.clear()
            await self.ready.wait()
        item = self.queue.popleft()
        self._taken(item)
        if (
            self.room is not None
            and len(self.queue) <= self.limit // 2
            and self.owner.queued_bytes <= self.room_bytes
        ):
            self.room.set()
            self.room = None
        if isinstance(item, Delivery):
            self._note(item.event)
        return item

    def has_room(self, count: int, size: int = 0, max_bytes: int | None = None) -> bool:
        """Whether `count` more items of `size` bytes in all fit under the limit and under
        `max_bytes` queued bytes (or the queue is empty)."""
        return (
            self.closed
            or self.overflowed
            or not self.queue
            or (
                len(self.queue) + count <= self.limit
                and (max_bytes is None or self.owner.queued_bytes + size <= max_bytes)
            )
        )

    def drain(self) -> list[Outbound]:
        """Everything waiting now (the rest of the replay, then the queue), without waiting."""
        for queued in self.queue:
            self._taken(queued)
        items = [*(self.replay or ()), *self.queue]
        self.replay = None
        self.queue.clear()
        if self.room is not None:
            self.room.set()
            self.room = None
        for item in items:
            if isinstance(item, Delivery):
                self._note(item.event)
        return items

    def _note(self, event: Event) -> None:
        position = event.position
        if position is not None:
            assert event.session is not None
            # one int (small ones are shared) rather than a tuple a session
            self._delivered[event.session] = (
                _rank(position) if position[1] <= _MAX_STORED else position
            )

    @property
    def delivered(self) -> dict[str, Position]:
        """The last position delivered per session: what a `closing` frame reports."""
        return {
            session: (at >> 63, at & _MAX_STORED) if isinstance(at, int) else at
            for session, at in self._delivered.items()
        }

    def close(self) -> None:
        self.closed = True
        self.on_overflow = None
        self.ready.set()
        if self.room is not None:
            self.room.set()


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
        events = []
        for position, raw in self.positions():
            if after is None or position > after:
                try:
                    events.append(parse_event(raw))
                except InvalidEvent:
                    continue  # read back from a damaged store file: skipped, as on a restart
        return events


class _Window:
    """The admission dedupe window: the newest `size` `(source, id)` keys, oldest out first.

    A key is remembered as a 60-bit digest, its hash (SipHash of the strings, keyed per
    process), kept as 8 bytes in one of a few thousand small `bytearray`s (picked by the
    digest's low bits) and in a ring of arrival order: about 20 bytes a key, where a set of
    ints costs 75 and the tuples of strings it replaces some 230. Two keys with one digest
    would make the later event count as a duplicate, which only keeps it out of the replay
    buffer (duplicates are fanned out all the same); at 2**-60 a pair, over a window of
    100,000 keys, that is below one in a billion.
    """

    __slots__ = ("_buckets", "_head", "_mask", "_order", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        count = 1 << max(4, (size // 64).bit_length())  # about 64 digests a bucket when full
        self._mask = count - 1
        self._buckets: list[bytearray | None] = [None] * count
        #: digests in arrival order; the live ones start at `_head`
        self._order = array("Q")
        self._head = 0

    def __len__(self) -> int:
        return len(self._order) - self._head

    def __contains__(self, key: tuple[str, str]) -> bool:
        digest = hash(key) & _DIGEST_MASK
        bucket = self._buckets[digest & self._mask]
        return bucket is not None and _find(bucket, digest.to_bytes(8, "little")) >= 0

    def add(self, key: tuple[str, str], *, trim: bool = True) -> bool:
        """Remember `key`: True when it is new. Past `size`, the oldest key is forgotten
        (one a call: `trim=False` lets a restart take up more, as many as the store held)."""
        digest = hash(key) & _DIGEST_MASK
        needle = digest.to_bytes(8, "little")
        buckets = self._buckets
        index = digest & self._mask
        bucket = buckets[index]
        if bucket is None:
            bucket = buckets[index] = bytearray()
        elif _find(bucket, needle) >= 0:
            return False
        bucket += needle
        order = self._order
        order.append(digest)
        if trim and len(order) - self._head > self.size:
            self._forget_oldest()
        return True

    def _forget_oldest(self) -> None:
        order = self._order
        digest = order[self._head]
        self._head += 1
        if self._head >= 1024 and 2 * self._head >= len(order):
            del order[: self._head]
            self._head = 0
        bucket = self._buckets[digest & self._mask]
        assert bucket is not None
        at = _find(bucket, digest.to_bytes(8, "little"))
        assert at >= 0
        del bucket[at : at + 8]


def _find(bucket: bytearray, needle: bytes) -> int:
    """Where the 8-byte `needle` is in `bucket` as one whole digest, or -1."""
    at = bucket.find(needle)
    while at > 0 and at % 8:  # a match across two digests: look on
        at = bucket.find(needle, at + 1)
    return at


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


class _Replay:
    """One subscription's replay, read (and parsed) as its consumer takes it.

    The plan is fixed at subscribe time: each buffer up to its newest position then. A buffer
    that changes before the replay reaches it (a live event evicting its oldest, the session
    forgotten) is copied first (`freeze`), so what was held at subscribe time is what is sent.
    """

    def __init__(self, hub: Hub, subscription: Subscription) -> None:
        self.hub = hub
        self.subscription = subscription
        #: buffers still to send, in order: (after, up to, say what eviction lost)
        self.plan: dict[SessionKey, tuple[Position | None, Position, bool]] = {}
        self.frozen: dict[SessionKey, tuple[list[tuple[Position, bytes]], Position | None]] = {}

    def freeze(self, key: SessionKey) -> None:
        if key in self.plan and key not in self.frozen and key in self.hub._buffers:
            buffer = self.hub._view(key)
            self.frozen[key] = (buffer.positions(), buffer.evicted)

    def close(self) -> None:
        self.plan.clear()
        self.frozen.clear()
        if self in self.hub._replays:
            self.hub._replays.remove(self)

    def __iter__(self) -> Iterator[Outbound]:
        try:
            yield from self._items()
        finally:
            self.close()

    def _items(self) -> Iterator[Outbound]:
        subscription, hub = self.subscription, self.hub
        ceiling = subscription.capture
        while self.plan:
            key = next(iter(self.plan))
            after, upto, exhausted = self.plan.pop(key)
            if key in self.frozen:
                entries, evicted = self.frozen.pop(key)
            elif key in hub._buffers:
                buffer = hub._view(key)
                entries, evicted = buffer.positions(), buffer.evicted
            else:
                continue
            lost = exhausted and after is not None and evicted is not None and evicted > after
            if lost and entries:
                earliest = entries[0][0]
                yield Frame(
                    {
                        "type": "replay-exhausted",
                        "sub": subscription.id,
                        "session": key[1],
                        "earliest": {"epoch": earliest[0], "seq": earliest[1]},
                    }
                )
            for position, raw in entries:
                if (after is not None and position <= after) or position > upto:
                    continue
                try:
                    event = parse_event(raw)
                except InvalidEvent:
                    continue  # read back from a damaged store file: skipped, as on a restart
                if subscription.filter.matches_event(event):
                    yield Delivery(event if ceiling is None else downlevel(event, ceiling))


class Hub:
    """The relay: admission, replay buffers, subscriptions, claims and command routing."""

    def __init__(self, limits: HubLimits | None = None, store: Store | None = None) -> None:
        self.limits = limits or HubLimits()
        self.store = store
        self._unpersisted: list[Event] = []
        #: every session with a replay buffer, least recently active first: its buffer in
        #: memory, or (an int, see `_rank`) its newest position, its buffer in the store
        self._buffers: OrderedDict[SessionKey, _Buffer | int] = OrderedDict()
        #: session -> its key, or its keys when several sources use the name
        self._by_session: dict[str, SessionKey | list[SessionKey]] = {}
        self._admitted = _Window(self.limits.dedupe_window)
        self._subscriptions: list[Subscription] = []
        #: replays not yet finished (see `_Replay.freeze`)
        self._replays: list[_Replay] = []
        self._participants: dict[int, Participant] = {}
        self._pending: dict[tuple[str, str], _Pending] = {}
        self.stats = {"admitted": 0, "duplicates": 0}
        if store is not None:
            self._restore(store)

    # -- persistence ------------------------------------------------------------------

    def _restore(self, store: Store) -> None:
        """Take up the persisted replay buffers: a restarted bridge replays what it held.

        They stay in the store; the hub learns each session, its newest position, and the
        dedupe keys of what it holds.
        """
        for source, session, epoch, seq, event_id in store.buffered_keys():
            self._admitted.add((source, event_id), trim=False)
            key, position = (source, session), (epoch, seq)
            held = self._buffers.get(key)
            if held is None:
                self._open(key, _rank(position))
            else:
                assert isinstance(held, int)
                self._buffers[key] = max(held, _rank(position))
                self._buffers.move_to_end(key)

    def flush(self) -> None:
        """Write newly buffered events to the store (before an HTTP 202, and soon after WS)."""
        if self.store is not None and self._unpersisted:
            pending, self._unpersisted = self._unpersisted, []
            try:
                self.store.buffer_events(pending, self.limits.replay_buffer)
            except BaseException:
                # kept for the next flush: a session's buffer may be read back from the store
                self._unpersisted[:0] = pending
                raise

    def _load(self, key: SessionKey) -> _Buffer:
        """The buffer the store holds for `key`, as memory would hold it (flushed first)."""
        store = self.store
        assert store is not None
        self.flush()
        size = self.limits.replay_buffer
        buffer = _Buffer(size)
        rows = store.execute(
            "SELECT epoch, seq, raw FROM relay_buffer WHERE source = ? AND session = ? "
            "ORDER BY epoch DESC, seq DESC LIMIT ?",
            (key[0], key[1], size),
        )
        for epoch, seq, raw in reversed(rows):
            assert isinstance(epoch, int)
            assert isinstance(seq, int)
            assert isinstance(raw, bytes)
            buffer.entries.append(((epoch, seq), raw))
        for epoch, seq in store.execute(
            "SELECT epoch, seq FROM relay_evicted WHERE source = ? AND session = ?", key
        ):
            assert isinstance(epoch, int)
            assert isinstance(seq, int)
            buffer.evicted = (epoch, seq)
        return buffer

    def _view(self, key: SessionKey) -> _Buffer:
        """`key`'s buffer: the one in memory, or a copy of the one in the store."""
        held = self._buffers[key]
        return held if isinstance(held, _Buffer) else self._load(key)

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
            fresh = self._admitted.add(event.dedupe_key)
            if fresh:
                self.stats["admitted"] += 1
            else:
                self.stats["duplicates"] += 1
            position = event.position
            if origin is not None and origin.emits and position is not None:
                # only the owner's sequenced stream claims: commands and attention.routed
                # carry no seq, and a router must never become a session's claimant
                assert event.session is not None
                origin.claims.add(event.session)
            if fresh and position is not None:
                self._keep(event, position)
            self._settle(event)
            self._fan_out(event)

    def _keep(self, event: Event, position: Position) -> None:
        """Buffer a fresh positioned event, and make its session the most recently active."""
        key = event.session_key
        assert key is not None
        if self._replays:
            self._keeping(key)
        buffers = self._buffers
        held = buffers.get(key)
        if held is None:
            if self.store is not None and _storable(position):
                self._open(key, _rank(position))
            else:
                buffer = _Buffer(self.limits.replay_buffer)
                buffer.add(position, event.raw)
                self._open(key, buffer)
        else:
            buffers.move_to_end(key)
            if isinstance(held, _Buffer):
                held.add(position, event.raw)
            elif _storable(position) and _rank(position) > held:
                buffers[key] = _rank(position)  # in order: the store's buffer is memory's
            else:
                # out of order, or beyond what the store holds: from here on memory decides
                buffer = buffers[key] = self._load(key)
                buffer.add(position, event.raw)
        if self.store is not None:
            self._unpersisted.append(event)

    def _open(self, key: SessionKey, held: _Buffer | int) -> None:
        """A new session's buffer; the least recently active beyond the limit is forgotten."""
        self._buffers[key] = held
        known = self._by_session.get(key[1])
        if known is None:
            self._by_session[key[1]] = key
        elif isinstance(known, list):
            known.append(key)
        else:
            self._by_session[key[1]] = [known, key]
        if len(self._buffers) > self.limits.max_buffered_sessions:
            self._forget(next(iter(self._buffers)))

    def _forget(self, key: SessionKey) -> None:
        """Drop the least recently active session's buffer: memory stays bounded."""
        if self._replays:
            self._keeping(key)
        self._buffers.pop(key, None)
        known = self._by_session.get(key[1])
        if isinstance(known, list):
            if key in known:
                known.remove(key)
            if len(known) == 1:
                self._by_session[key[1]] = known[0]
            elif not known:
                del self._by_session[key[1]]
        elif known is not None and known == key:
            del self._by_session[key[1]]
        if self.store is not None:
            if self._unpersisted:  # not to come back in the store as the next flush's
                self._unpersisted = [e for e in self._unpersisted if e.session_key != key]
            self.store.drop_buffer(*key)

    def _keys(self, session: str) -> list[SessionKey]:
        known = self._by_session.get(session)
        if known is None:
            return []
        return list(known) if isinstance(known, list) else [known]

    def _fan_out(self, event: Event) -> None:
        shaped: dict[Capture | None, Event] = {}
        for subscription in list(self._subscriptions):
            if not subscription.filter.matches_event(event):
                continue
            ceiling = subscription.capture
            if ceiling not in shaped:
                shaped[ceiling] = event if ceiling is None else downlevel(event, ceiling)
            subscription.offer(Delivery(shaped[ceiling]))

    async def room(self, count: int, timeout: float, size: int = 0) -> bool:
        """Wait until every in-process subscription (the bridge's own) can take `count` more
        events of `size` bytes in all (`HubLimits.local_queue_bytes`); False if that did not
        happen within `timeout` seconds.

        The bridge stops reading while its slowest channel catches up (backpressure): an
        ingest that waits here, instead of admitting, keeps the events with their emitter
        rather than shedding `info` toward the bridge (AEP-0003 §8.4 would allow that).
        Remote consumers are not waited for: they are shed or disconnected as §8.4 says.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for subscription in list(self._subscriptions):
            cap = self.limits.local_queue_bytes
            while subscription.owner.kind == "local" and not subscription.has_room(
                count, size, cap
            ):
                if subscription.room is None:
                    subscription.room = asyncio.Event()
                    subscription.room_bytes = cap // 2
                waiting = subscription.room
                try:
                    await asyncio.wait_for(waiting.wait(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    return False
        return True

    # -- subscriptions ----------------------------------------------------------------

    def subscribe(
        self,
        owner: Participant,
        sub_id: str,
        filter_spec: object = None,
        *,
        from_: object = None,
        capture: object = None,
        handled: Floors | None = None,
    ) -> Subscription:
        """Replay what `from_` asks for, then deliver live; raises `SubscribeError`.

        The replay is what the hub holds now (what arrives later is live), read as the
        consumer takes it. `handled` (in-process consumers, with `from_="all"`): the
        positions the consumer has already handled (`Store.floors`); what is at or below
        them is skipped without being read.
        """
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
        if owner.kind in ("ws", "sse"):  # a remote client: what it leaves unread is bounded
            owner.byte_budget = self.limits.queue_bytes
        subscription = Subscription(owner, sub_id, filter_, ceiling, self.limits.queue_limit)
        if positions is not None:
            subscription.replay = iter(self._replay(subscription, positions, handled))
            subscription.ready.set()
        self._subscriptions.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        subscription.close()
        for replay in [r for r in self._replays if r.subscription is subscription]:
            replay.close()
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    def _newest(self, key: SessionKey) -> Position | None:
        """The newest position `key`'s buffer holds."""
        held = self._buffers[key]
        if isinstance(held, int):
            return (held >> 63, held & _MAX_STORED)
        return held.entries[-1][0] if held.entries else None

    def _replay(
        self,
        subscription: Subscription,
        positions: list[tuple[str, Position]] | Literal["all"],
        handled: Floors | None,
    ) -> _Replay:
        """What a replay will send, fixed now: for each buffer, the positions after which
        and up to which it is sent, and whether to say what eviction already lost."""
        replay = _Replay(self, subscription)
        if positions == "all":
            floors = handled or {}
            for key in self._buffers:
                newest = self._newest(key)
                if newest is not None:
                    replay.plan[key] = (floor_of(floors, *key), newest, False)
        else:
            for session, after in positions:
                for key in self._keys(session):
                    newest = self._newest(key)
                    if newest is not None:
                        replay.plan[key] = (after, newest, True)
        if replay.plan:
            self._replays.append(replay)
        return replay

    def _keeping(self, key: SessionKey) -> None:
        """`key`'s buffer is about to change: replays yet to reach it take a copy first."""
        for replay in self._replays:
            replay.freeze(key)

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
        return [e for key in self._keys(session) for e in self._view(key).held()]
