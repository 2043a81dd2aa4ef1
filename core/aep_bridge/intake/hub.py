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
digest of each `(source, id)`, not the strings (`dedupe.KeyWindow`).

Claims: a connection claims a session by emitting on it, and the identity of the last
claimant of each session is remembered in the store (`claimants`): after a restart of the
bridge, the `hello` of that identity gives it its sessions back (`said_hello`), so commands
waiting for them need not wait for its next event.

Disk: the store holds the buffers within a byte budget (`HubLimits.replay_bytes`) and drops
an ended session's buffer `replay_retention` seconds after its `session.ended`
(`store/replay.py` says what goes first, and what a consumer resuming from a trimmed
position gets); the hub forgets each buffer the store emptied, as it forgets the least
recently active beyond `max_buffered_sessions`.

The hub's parts live beside it: `subscription` (participants and the queue toward each
consumer), `replay_buffer` (a session's buffer, and a replay read from the buffers),
`dedupe` (the admission window), `positions` (a position packed into one int) and
`claimants` (who claimed each session last).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..aep.capture import downlevel
from ..aep.envelope import Event
from ..aep.errors import InvalidFilter
from ..aep.filters import Filter
from ..aep.registry import AEP_VERSION, CAPTURE_ORDER, Capture
from ..store import Floors, Position, floor_of
from .claimants import Claimants, identity_of
from .dedupe import KeyWindow
from .owners import Owners
from .positions import rank, storable, unrank
from .principals import RESERVED, Principal
from .replay_buffer import Buffer, Replay, SessionKey, parse_positions
from .subscription import (
    Delivery,
    Frame,
    Outbound,
    Participant,
    SubscribeError,
    Subscription,
)

if TYPE_CHECKING:
    from ..store import Store

log = logging.getLogger("aep_bridge.intake")


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
    #: bytes of events the store's replay buffers hold in all; past it the oldest go, ended
    #: sessions' first (`store/replay.py`)
    replay_bytes: int = 128 * 1024 * 1024
    #: seconds an ended session's buffer is kept after its `session.ended`
    replay_retention: float = 3600.0


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


class Hub:
    """The relay: admission, replay buffers, subscriptions, claims and command routing."""

    def __init__(
        self,
        limits: HubLimits | None = None,
        store: Store | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits or HubLimits()
        self.store = store
        #: the wall clock an ended session's retention is counted on (a test's own)
        self._clock = clock
        self._unpersisted: list[Event] = []
        #: every session with a replay buffer, least recently active first: its buffer in
        #: memory, or (an int, see `positions.rank`) its newest position, its buffer in the store
        self._buffers: OrderedDict[SessionKey, Buffer | int] = OrderedDict()
        #: session -> its key, or its keys when several sources use the name
        self._by_session: dict[str, SessionKey | list[SessionKey]] = {}
        #: admission dedupe; a digest collision (see `dedupe`) would only keep the later
        #: event out of the replay buffer: duplicates are fanned out all the same
        self._admitted = KeyWindow(self.limits.dedupe_window)
        self._subscriptions: list[Subscription] = []
        #: replays not yet finished (see `Replay.freeze`)
        self._replays: list[Replay] = []
        self._participants: dict[int, Participant] = {}
        self._pending: dict[tuple[str, str], _Pending] = {}
        self.stats = {"admitted": 0, "duplicates": 0}
        #: who claimed each session last, across restarts (see `said_hello`)
        self._claimants = Claimants(store, self.limits.max_buffered_sessions)
        #: session -> the connection its claim was given back to by a `hello`, until an
        #: event of the session says who emits on it
        self._resumed: dict[str, Participant] = {}
        #: which principal each session belongs to (no one else's events are taken on it)
        self.owners = Owners(store, self.limits.max_buffered_sessions)
        #: called with the sessions a `hello` gave back to their claimant (the bridge's
        #: answers waiting for those sessions go at once: `LocalSource.watch_claims`)
        self.claim_watchers: list[Callable[[list[SessionKey]], None]] = []
        if store is not None:
            self._restore(store)

    # -- persistence ------------------------------------------------------------------

    def _restore(self, store: Store) -> None:
        """Take up the persisted replay buffers: a restarted bridge replays what it held.

        They stay in the store; the hub learns each session, its newest position, and the
        dedupe keys of what it holds. Buffers past their retention go first, and the rest
        are trimmed to the budget (it may have been lowered since).
        """
        store.expire_buffers(self._clock() - self.limits.replay_retention)
        store.trim_buffers(self.limits.replay_bytes)
        for source, session, epoch, seq, event_id in store.buffered_keys():
            self._admitted.add((source, event_id), trim=False)
            key, position = (source, session), (epoch, seq)
            held = self._buffers.get(key)
            if held is None:
                self._open(key, rank(position))
            else:
                assert isinstance(held, int)
                self._buffers[key] = max(held, rank(position))
                self._buffers.move_to_end(key)

    def flush(self) -> None:
        """Write newly buffered events to the store (before an HTTP 202, and soon after WS),
        within the budget, and who claimed their sessions; and drop ended sessions' buffers
        past their retention (`maintain` does it once a minute too, for a bridge that no event
        wakes)."""
        self._claimants.flush()
        self.owners.flush()
        store = self.store
        if store is None:
            return
        limits = self.limits
        now = self._clock()
        emptied: list[SessionKey] = []
        if self._unpersisted:
            pending, self._unpersisted = self._unpersisted, []
            try:
                emptied = store.buffer_events(
                    pending, limits.replay_buffer, budget=limits.replay_bytes, now=now
                )
            except BaseException:
                # kept for the next flush: a session's buffer may be read back from the store
                self._unpersisted[:0] = pending
                raise
        emptied += store.expire_buffers(now - limits.replay_retention)
        for key in emptied:
            self._forget(key, stored=False)

    def maintain(self) -> None:
        """`flush`, and write when each buffer last took events (the order the budget trims
        them in after a restart): the server's once a minute, and at the stop."""
        self.flush()
        if self.store is not None:
            self.store.save_activity()
            self.sweep_revoked()

    def _load(self, key: SessionKey) -> Buffer:
        """The buffer the store holds for `key`, as memory would hold it (flushed first)."""
        store = self.store
        assert store is not None
        self.flush()
        size = self.limits.replay_buffer
        buffer = Buffer(size)
        for epoch, seq, raw in store.buffered(key[0], key[1], size):
            buffer.entries.append(((epoch, seq), raw))
        buffer.evicted = store.evicted(*key)
        return buffer

    def _view(self, key: SessionKey) -> Buffer:
        """`key`'s buffer: the one in memory, or a copy of the one in the store."""
        held = self._buffers[key]
        return held if isinstance(held, Buffer) else self._load(key)

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
        if self._resumed:
            for session in participant.claims:
                if self._resumed.get(session) is participant:
                    del self._resumed[session]
        participant.claims.clear()
        for subscription in [s for s in self._subscriptions if s.owner is participant]:
            self.unsubscribe(subscription)

    # -- ingest -----------------------------------------------------------------------

    def admit(
        self,
        events: Iterable[Event],
        origin: Participant | None = None,
        *,
        by: Principal | None = None,
    ) -> None:
        """Take valid events from an emitter: claim, buffer (once), fan out (every time).
        `by` (else `origin`'s principal) becomes the owner of the sessions it is the first
        to emit on; the bindings refused what another's session would not take
        (`owners.refusal`).

        A command admitted here is history (a replayed session log), shown to observers and
        never delivered to an agent: delivery is `route_command`'s, on a duplex connection.
        """
        who = by
        if who is None and origin is not None and origin.kind != "local":
            who = origin.principal  # the bridge's own events (`publish`) own nothing
        for event in events:
            if who is not None and event.session is not None:
                self.owners.note(event.session, who)
            fresh = self._admitted.add(event.dedupe_key)
            if fresh:
                self.stats["admitted"] += 1
            else:
                self.stats["duplicates"] += 1
            position = event.position
            if origin is not None and origin.emits and position is not None:
                # only the owner's sequenced stream claims: commands and attention.routed
                # carry no seq, and a router must never become a session's claimant
                self._claim(event, origin)
            if fresh and position is not None:
                self._keep(event, position)
            self._settle(event)
            self._fan_out(event)

    def _claim(self, event: Event, origin: Participant) -> None:
        """`origin` emitted on `event`'s session: it claims it (and is remembered as its
        claimant, when it can be, see `claimants`). An event is evidence: a claim a `hello`
        gave back to another connection yields to it."""
        session = event.session
        assert session is not None
        origin.claims.add(session)
        if self._resumed:
            holder = self._resumed.pop(session, None)
            if holder is not None and holder is not origin:
                holder.claims.discard(session)
        key = event.session_key
        assert key is not None
        if event.type == "session.ended":
            self._claimants.forget(key)  # nothing to command there any more
        elif origin.identity is not None:
            self._claimants.note(key, origin.identity)

    def said_hello(self, participant: Participant) -> list[SessionKey]:
        """`participant` (joined) finished its `hello`: when its identity names one process
        that takes commands (`claimants.identity_of`), remember its claims under it from now
        on, and give it back the sessions that identity claimed last (before a restart of
        the bridge, or on a connection now gone), so commands for them reach it before it
        sends anything. A session another live connection claims is not given: that one
        keeps it (a spoofed `hello` takes nothing from the agent it names, AEP-0004 §8).
        Returns the sessions given back, and tells the `claim_watchers`."""
        identity = participant.identity = identity_of(participant)
        if identity is None:
            return []
        claimed = {
            session
            for other in self._participants.values()
            if other is not participant
            for session in other.claims
        }
        principal = participant.principal
        given = [
            key
            for key in self._claimants.of(identity)
            if key[1] not in claimed
            and (principal is None or self.owners.refusal(key[1], principal) is None)
        ]
        for _, session in given:
            participant.claims.add(session)
            self._resumed[session] = participant
        if given:
            log.info(
                "agent %r (instance %r) is back: its claim on %d session(s) is restored",
                identity[0],
                identity[1],
                len(given),
            )
            for watcher in list(self.claim_watchers):
                try:
                    watcher(given)
                except Exception:
                    log.exception("a claim watcher failed")
        return given

    def _keep(self, event: Event, position: Position) -> None:
        """Buffer a fresh positioned event, and make its session the most recently active."""
        key = event.session_key
        assert key is not None
        if self._replays:
            self._keeping(key)
        buffers = self._buffers
        held = buffers.get(key)
        if held is None:
            if self.store is not None and storable(position):
                self._open(key, rank(position))
            else:
                buffer = Buffer(self.limits.replay_buffer)
                buffer.add(position, event.raw)
                self._open(key, buffer)
        else:
            buffers.move_to_end(key)
            if isinstance(held, Buffer):
                held.add(position, event.raw)
            elif storable(position) and rank(position) > held:
                buffers[key] = rank(position)  # in order: the store's buffer is memory's
            else:
                # out of order, or beyond what the store holds: from here on memory decides
                buffer = buffers[key] = self._load(key)
                buffer.add(position, event.raw)
        if self.store is not None:
            self._unpersisted.append(event)

    def _open(self, key: SessionKey, held: Buffer | int) -> None:
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

    def _forget(self, key: SessionKey, *, stored: bool = True) -> None:
        """Drop a session's buffer: the least recently active one (memory stays bounded), or
        one the store has emptied (`stored=False`: a replay yet to reach it finds it gone)."""
        if self._replays and stored:
            self._keeping(key)
        if key not in self._buffers and not stored:
            return
        self._buffers.pop(key, None)
        if stored:  # (a buffer the budget emptied may be a live session's: its claim stays)
            self._claimants.forget(key)
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
        if self.store is not None and stored:
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
            return unrank(held)
        return held.entries[-1][0] if held.entries else None

    def _replay(
        self,
        subscription: Subscription,
        positions: list[tuple[str, Position]] | Literal["all"],
        handled: Floors | None,
    ) -> Replay:
        """What a replay will send, fixed now: for each buffer, the positions after which
        and up to which it is sent, and whether to say what eviction already lost."""
        replay = Replay(subscription, self._buffers, self._view, self._replays)
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
        if sender.principal is not None and not sender.principal.commands:
            return Refusal(
                "unauthorized", f"control requires an admin token; {sender.principal} is not"
            )
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

    def revoked(self, name: str) -> int:
        """`name`'s token was revoked: end now the connections (WebSocket, SSE) that came
        in with a token of that name the store no longer takes (a token made again under
        the same name keeps its own); how many."""
        gone = [
            p
            for p in self._participants.values()
            if p.principal is not None
            and p.principal.name == name
            and p.kind != "local"
            and not self._token_live(p.principal.token_digest)
        ]
        for participant in gone:
            if participant.cut is not None:
                participant.cut("the token was revoked")
            self.leave(participant)
        return len(gone)

    def _token_live(self, token_digest: str | None) -> bool:
        """Whether the named token a connection presented is still taken (no store, or no
        named token: nothing to revoke)."""
        if token_digest is None or self.store is None:
            return True
        return self.store.token_named(token_digest) is not None

    def sweep_revoked(self) -> None:
        """End the connections of named tokens the store no longer takes (revoked while
        the bridge could not be told: `maintain` runs it once a minute)."""
        named = {
            p.principal.name
            for p in self._participants.values()
            if p.principal is not None and not self._token_live(p.principal.token_digest)
        }
        for name in sorted(named - RESERVED):
            log.info("token %s revoked: %d connection(s) closed", name, self.revoked(name))

    # -- introspection ----------------------------------------------------------------

    @property
    def subscriptions(self) -> Sequence[Subscription]:
        return tuple(self._subscriptions)

    def held(self, session: str) -> list[Event]:
        """Every buffered event of sessions named `session`, in position order."""
        return [e for key in self._keys(session) for e in self._view(key).held()]


__all__ = [
    "Delivery",
    "Frame",
    "Hub",
    "HubLimits",
    "Outbound",
    "Participant",
    "Refusal",
    "SubscribeError",
    "Subscription",
    "parse_positions",
]
