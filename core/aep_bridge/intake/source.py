"""One interface for wherever events come from: the embedded hub, an external relay, logs.

The bridge's core consumes through `EventSource` and never knows which one it has: it
subscribes (a filter, a capture ceiling, positions to resume from) and gets events in order;
it sends a command and gets back what became of it. `LocalSource` is the embedded endpoint's
in-process consumer, with exactly the semantics a WebSocket consumer of the same hub has.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..aep.envelope import Event
from ..aep.registry import Capture
from .hub import Delivery, Frame, Hub, Participant, Refusal
from .principals import LOCAL

ResumeFrom = Sequence[tuple[str, int, int]] | Literal["all"] | None


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What became of a command (AEP-0004 §3, §4).

    `accepted` / `rejected`: the target's ack (`ack` is the event). `refused`: the relay
    refused it on the target's behalf (`code` is `no-route`, `ambiguous`, `unsupported` or
    `unauthorized`). `timeout`: silence past the ack window, which a sender treats as a nack.
    """

    status: Literal["accepted", "rejected", "refused", "timeout"]
    ack: Event | None = None
    code: str | None = None
    detail: str | None = None

    @classmethod
    def of(cls, outcome: Event | Refusal | None) -> CommandResult:
        if outcome is None:
            return cls("timeout", detail="no acknowledgement within the ack window")
        if isinstance(outcome, Refusal):
            return cls("refused", code=outcome.code, detail=outcome.detail)
        if outcome.type == "control.accepted":
            return cls("accepted", ack=outcome)
        data = outcome.data or {}
        return cls(
            "rejected",
            ack=outcome,
            code=str(data.get("reason", "")) or None,
            detail=data.get("detail"),
        )


class EventSource(Protocol):
    """Where the core gets its events and sends its commands."""

    #: a stable name for this source, under which resume positions are stored
    name: str

    @property
    def closed(self) -> bool:
        """Whether `close()` was called: `events()` ending before that means subscribe again."""
        ...

    def events(
        self,
        filter_spec: dict[str, Any] | None = None,
        *,
        capture: Capture | None = None,
        from_: ResumeFrom = None,
    ) -> AsyncIterator[Event]:
        """Events in arrival order (replay first), until the source is closed."""
        ...

    async def send_command(self, command: Event, *, timeout: float = 10.0) -> CommandResult: ...

    async def roster(self) -> list[dict[str, Any]]: ...

    def principal_of(self, session_id: str) -> str | None:
        """The name of the principal whose connection emitted the session (its owner), or
        None when this source does not know (a relay, a log)."""
        ...

    async def close(self) -> None: ...


class LocalSource:
    """The embedded hub, consumed in-process: the bridge's own view of its endpoint.

    With `from_="all"`, it replays what the hub holds except, per `(source, session)`, what
    is at or below the position recorded under its `name` (the consumer handled it): a
    restarted bridge does not read back everything it already showed.
    """

    def __init__(self, hub: Hub, name: str = "embedded") -> None:
        self.hub = hub
        self.name = name
        self._participant = hub.join(
            Participant("local", authenticated=True, role="consumer", principal=LOCAL)
        )
        self._closed = asyncio.Event()
        self._watchers: list[Callable[[list[tuple[str, str]]], None]] = []

    async def events(
        self,
        filter_spec: dict[str, Any] | None = None,
        *,
        capture: Capture | None = None,
        from_: ResumeFrom = None,
    ) -> AsyncIterator[Event]:
        positions: object = None
        handled = None
        if from_ == "all":
            positions = "all"
            if self.hub.store is not None:  # what this stream's consumer recorded as handled
                handled = self.hub.store.floors(self.name)
        elif from_ is not None:
            positions = [{"session": s, "epoch": e, "seq": q} for s, e, q in from_]
        subscription = self.hub.subscribe(
            self._participant,
            f"local-{id(self)}-{len(self.hub.subscriptions)}",
            filter_spec,
            from_=positions,
            capture=capture,
            handled=handled,
        )
        try:
            while not self._closed.is_set():
                # no await while items wait: the endpoint's handlers run on this loop, so an
                # in-process consumer that keeps up is never outrun (backpressure for free)
                item = await subscription.next()
                if item is None:
                    return
                if isinstance(item, Delivery):
                    yield item.event
                elif isinstance(item, Frame):
                    continue  # replay-exhausted: the gap is for a history store to fill
        finally:
            self.hub.unsubscribe(subscription)

    async def send_command(self, command: Event, *, timeout: float = 10.0) -> CommandResult:
        return CommandResult.of(await self.hub.send_command(command, self._participant, timeout))

    async def roster(self) -> list[dict[str, Any]]:
        return self.hub.roster()

    def principal_of(self, session_id: str) -> str | None:
        return self.hub.owners.of(session_id)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def watch_claims(self, seen: Callable[[str, str], None]) -> None:
        """Call `seen(source, session)` for each session an agent's connection claims again
        by its `hello` alone (`Hub.said_hello`): what waits for that agent can go now."""

        def given(keys: list[tuple[str, str]]) -> None:
            for source, session in keys:
                seen(source, session)

        self.hub.claim_watchers.append(given)
        self._watchers.append(given)

    def publish(self, event: Event) -> None:
        """Put an event of the bridge's own (`attention.routed`) in front of every consumer."""
        self.hub.admit([event], origin=self._participant)

    async def close(self) -> None:
        self._closed.set()
        self.hub.leave(self._participant)
        for watcher in self._watchers:
            if watcher in self.hub.claim_watchers:
                self.hub.claim_watchers.remove(watcher)
        self._watchers.clear()
