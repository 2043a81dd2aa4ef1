"""The replay side of the hub: each session's buffer of recent events, and one subscription's
replay read from those buffers as its consumer takes it.

The hub (`hub.Hub`) owns the buffers, keyed by `(source, session)`: a `Buffer` in memory,
or an int (`positions.rank`) standing for one the store holds. A `Replay` reads them through
the hub's `view`, so it never needs to know which.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container, Iterator
from typing import Literal

from ..aep.capture import downlevel
from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.validation import parse_event
from ..store import Position
from .subscription import Delivery, Frame, Outbound, SubscribeError, Subscription

SessionKey = tuple[str, str]


class Buffer:
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


class Replay:
    """One subscription's replay, read (and parsed) as its consumer takes it.

    The plan is fixed at subscribe time: each buffer up to its newest position then. A buffer
    that changes before the replay reaches it (a live event evicting its oldest, the session
    forgotten) is copied first (`freeze`), so what was held at subscribe time is what is sent.
    """

    def __init__(
        self,
        subscription: Subscription,
        buffers: Container[SessionKey],
        view: Callable[[SessionKey], Buffer],
        active: list[Replay],
    ) -> None:
        self.subscription = subscription
        #: the hub's buffers (which sessions it holds), how to read one, and its list of
        #: replays not yet finished, which this one leaves when it is done
        self._buffers = buffers
        self._view = view
        self._active = active
        #: buffers still to send, in order: (after, up to, say what eviction lost)
        self.plan: dict[SessionKey, tuple[Position | None, Position, bool]] = {}
        self.frozen: dict[SessionKey, tuple[list[tuple[Position, bytes]], Position | None]] = {}

    def freeze(self, key: SessionKey) -> None:
        if key in self.plan and key not in self.frozen and key in self._buffers:
            buffer = self._view(key)
            self.frozen[key] = (buffer.positions(), buffer.evicted)

    def close(self) -> None:
        self.plan.clear()
        self.frozen.clear()
        if self in self._active:
            self._active.remove(self)

    def __iter__(self) -> Iterator[Outbound]:
        try:
            yield from self._items()
        finally:
            self.close()

    def _items(self) -> Iterator[Outbound]:
        subscription = self.subscription
        ceiling = subscription.capture
        while self.plan:
            key = next(iter(self.plan))
            after, upto, exhausted = self.plan.pop(key)
            if key in self.frozen:
                entries, evicted = self.frozen.pop(key)
            elif key in self._buffers:
                buffer = self._view(key)
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


__all__ = ["Buffer", "Replay", "SessionKey", "parse_positions"]
