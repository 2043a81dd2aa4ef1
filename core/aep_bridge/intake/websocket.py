"""The WebSocket binding (`WS /socket`, AEP-0003 §3.5): one connection, from its `hello` to
its close, carrying events, commands, subscriptions and liveness frames."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent, Violation
from ..aep.registry import AEP_VERSION
from ..aep.validation import parse_event
from . import bounds
from .hub import Frame, Hub, Outbound, Participant, SubscribeError, Subscription
from .ingest import EventSink, IngestLimits
from .liveness import Deadline, Owner
from .principals import ANONYMOUS, Principal

log = logging.getLogger("aep_bridge.intake")

#: refused events and commands one connection logs; the rest are refused as quietly as they are sent
MAX_LOGGED_REFUSALS = 5


class Host(Owner, Protocol):
    """What a connection uses of the endpoint that accepted it (`Endpoint`)."""

    @property
    def hub(self) -> Hub: ...

    @property
    def limits(self) -> IngestLimits: ...

    @property
    def sink(self) -> EventSink | None: ...

    def schedule_flush(self, delay: float = 0.005) -> None: ...

    def capabilities(self) -> dict[str, Any]: ...


class Connection:
    """One WebSocket: the hello, then events, commands and frames until it closes."""

    def __init__(self, endpoint: Host, websocket: WebSocket, principal: Principal) -> None:
        self.endpoint = endpoint
        self.hub = endpoint.hub
        self.websocket = websocket
        self.principal = principal
        self.participant = Participant("ws", principal != ANONYMOUS, principal=principal)
        self.outbox: asyncio.Queue[Outbound | None] = asyncio.Queue()
        self.participant.push = self.outbox.put_nowait
        self.participant.cut = self._cut
        self.subscriptions: dict[str, Subscription] = {}
        self.pumps: dict[str, asyncio.Task[None]] = {}
        self.last_pong = time.monotonic()
        self.closing = False
        self._send_lock = asyncio.Lock()
        self.deadline = Deadline(endpoint, websocket.scope)
        #: dropped as a slow consumer (`_overflowed`), or its token revoked (`_cut`)
        self.dropped = False
        #: events and commands refused on this connection
        self.refusals = 0

    async def run(self) -> None:
        writer = asyncio.create_task(self._write(), name="ws-writer")
        pinger = asyncio.create_task(self._ping(), name="ws-ping")
        try:
            if await self._hello():
                self.hub.join(self.participant)
                self.hub.said_hello(self.participant)  # its sessions' commands may come now
                await self._read()
        except WebSocketDisconnect:
            pass
        finally:
            if not self.dropped:  # a dropped peer may never answer the close: cut it anyway
                self.deadline.cancel()
            self.hub.leave(self.participant)
            for pump in self.pumps.values():
                pump.cancel()
            self.outbox.put_nowait(None)
            pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer
            if self.websocket.application_state == WebSocketState.CONNECTED:
                with contextlib.suppress(Exception):
                    await self.websocket.close()

    def send(self, body: dict[str, Any]) -> None:
        self.outbox.put_nowait(Frame(body))

    async def _write(self) -> None:
        while (item := await self.outbox.get()) is not None:
            if not await self._send(item):
                return

    async def _send(self, item: Outbound) -> bool:
        """Send one item; a slow socket makes this wait, which is the backpressure."""
        async with self._send_lock:
            if self.websocket.application_state != WebSocketState.CONNECTED:
                return False
            if isinstance(item, Frame):
                await self.websocket.send_text(json.dumps(item.body, separators=(",", ":")))
                if item.body.get("type") == "closing":
                    await self.websocket.close(code=1000, reason=str(item.body.get("reason", "")))
                    return False
            else:
                await self.websocket.send_text(item.raw.decode())
            return True

    async def _ping(self) -> None:
        timing = self.endpoint.timing
        while True:
            await asyncio.sleep(timing.ws_ping_interval)
            if time.monotonic() - self.last_pong > timing.ws_pong_timeout:
                self._close("no pong within the liveness timeout")
                return
            self.send({"type": "ping", "t": int(time.time() * 1000)})

    def _cut(self, reason: str) -> None:
        """The hub ends this connection (its token was revoked): a `closing` frame, then
        the socket is cut if the peer does not close within `Timing.drop_after`."""
        self.dropped = True
        self._close(reason)
        self.deadline.arm()

    def _close(self, reason: str) -> None:
        if self.closing:
            return
        self.closing = True
        delivered = [
            {"sub": sub_id, "session": session, "epoch": pos[0], "seq": pos[1]}
            for sub_id, subscription in self.subscriptions.items()
            for session, pos in subscription.delivered.items()
        ]
        self.send({"type": "closing", "reason": reason, "delivered": delivered})

    async def _receive(self) -> str | None:
        """The next text frame; binary frames are refused in-band (AEP-0003 §3.5.2)."""
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            if message.get("text") is not None:
                return str(message["text"])
            self.send(
                {
                    "type": "error",
                    "code": "invalid-frame",
                    "detail": "binary frames are reserved in AEP 0.1; send text",
                }
            )

    async def _hello(self) -> bool:
        message = await self.websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        try:  # a binary first frame is not a hello either (AEP-0003 §3.5.1)
            frame = json.loads(message["text"]) if message.get("text") is not None else None
        except (ValueError, RecursionError):
            frame = None
        if not isinstance(frame, dict) or frame.get("type") != "hello":
            self.send(
                {
                    "type": "error",
                    "code": "hello-required",
                    "detail": "the first frame on a connection is hello (AEP-0003 §3.5.1)",
                }
            )
            self.outbox.put_nowait(None)
            return False
        versions = frame.get("versions")
        if not isinstance(versions, list) or AEP_VERSION not in versions:
            self.send(
                {
                    "type": "error",
                    "code": "version-unsupported",
                    "versions": [AEP_VERSION],
                    "detail": f"this endpoint speaks AEP {AEP_VERSION}",
                }
            )
            self.outbox.put_nowait(None)
            return False
        role = frame.get("role")
        identity = frame.get("identity")
        capabilities = frame.get("capabilities")
        if role not in ("emitter", "consumer", "both"):
            role = "consumer"
        if not isinstance(identity, dict):
            identity = {}
        if not isinstance(capabilities, dict):
            capabilities = {}  # unknown keys inside are kept and ignored (AEP-0003 §4 rule 4)
        participant = self.participant
        participant.role = str(role)
        participant.agent = (
            identity.get("agent") if isinstance(identity.get("agent"), str) else None
        )
        participant.instance = (
            identity.get("instance") if isinstance(identity.get("instance"), str) else None
        )
        participant.capabilities = dict(capabilities)
        self.send(
            {
                "type": "hello",
                "versions": [AEP_VERSION],
                "role": "both",
                "identity": {"agent": "aep-bridge", "instance": f"aep-bridge/{id(self.hub):x}"},
                "capabilities": self.endpoint.capabilities(),
            }
        )
        return True

    async def _read(self) -> None:
        limit = self.endpoint.limits.max_event_bytes
        while not self.closing:
            text = await self._receive()
            if text is None:
                continue
            data = text.encode()
            if len(data) > limit:
                self.send(
                    {
                        "type": "error",
                        "code": "invalid-event",
                        "detail": f"frame is {len(data)} bytes, over the {limit}-byte limit",
                    }
                )
                continue
            try:  # most frames are events: parse them once, as events
                event = parse_event(data, max_bytes=limit)
            except InvalidEvent as invalid:
                self._other_frame(data, invalid)
                continue
            overlong = bounds.overlong(event)
            if overlong:  # ids the store would key on, too long to keep: refused, as invalid
                self._refuse_overlong(event, overlong)
                continue
            await self._event(event)

    def _refuse_overlong(self, event: Event, problems: list[Violation]) -> None:
        """An event whose ids are over the bridge's bounds: an error frame, and the
        connection lives on (its `id` is named only when it is not one of the long ones)."""
        frame: dict[str, Any] = {"type": "error", "code": "invalid-event"}
        if len(event.id) <= bounds.ID_CHARS:
            frame["id"] = event.id
        frame["detail"] = str(InvalidEvent(problems))
        frame["violations"] = [v.to_dict() for v in problems]
        self.send(frame)

    def _other_frame(self, data: bytes, invalid: InvalidEvent) -> None:
        """A frame that is not a valid event: a protocol frame (subscribe, roster, ...), or an
        event frame that breaks a rule, answered with what `parse_event` found."""
        try:
            frame = json.loads(data)
        except (ValueError, RecursionError) as exc:  # not JSON, huge ints, deep nesting
            self.send(
                {"type": "error", "code": "invalid-event", "detail": f"not valid JSON: {exc}"}
            )
            return
        if not isinstance(frame, dict):
            self.send(
                {"type": "error", "code": "invalid-event", "detail": "a frame is a JSON object"}
            )
            return
        kind = frame.get("type")
        if isinstance(kind, str) and "." in kind:
            self.send(
                {
                    "type": "error",
                    "code": "invalid-event",
                    "id": frame.get("id"),
                    "detail": str(invalid),
                    "violations": [v.to_dict() for v in invalid.violations],
                }
            )
        else:
            self._frame(frame)

    async def _event(self, event: Event) -> None:
        if event.is_command:
            refusal = self.hub.route_command(event, self.participant)
            if refusal is not None:
                self.refusals += 1
                if self.refusals <= MAX_LOGGED_REFUSALS:  # a peer cannot flood the log
                    log.warning(
                        "command %s for session %r from %s refused: %s",
                        event.type,
                        event.session,
                        self.principal,
                        refusal.code,
                    )
                self.outbox.put_nowait(refusal.frame(event.id))
            else:
                log.info(
                    "command %s for session %r from %s delivered",
                    event.type,
                    event.session,
                    self.principal,
                )
            return
        refused = None
        if not self.principal.emits:
            refused = f"{self.principal} may not send events (a reader token)"
        else:
            refused = self.hub.owners.refusal(event.session, self.principal)
        if refused is not None:
            self.refusals += 1
            if self.refusals <= MAX_LOGGED_REFUSALS:  # a peer cannot flood the log
                log.warning("event from %s refused: %s", self.principal, refused)
            self.send({"type": "error", "code": "unauthorized", "id": event.id, "detail": refused})
            return
        if not self.participant.emits:
            self.send(
                {
                    "type": "error",
                    "code": "unauthorized",
                    "id": event.id,
                    "detail": "a consumer connection sends commands, not events; "
                    "say role emitter or both in hello",
                }
            )
            return
        self.hub.admit([event], self.participant)
        self.endpoint.schedule_flush()
        if self.endpoint.sink is not None:
            await self.endpoint.sink([event])

    def _frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "subscribe":
            self._subscribe(frame)
        elif kind == "unsubscribe":
            sub_id = frame.get("id")
            subscription = self.subscriptions.pop(str(sub_id), None)
            if subscription is not None:
                self.hub.unsubscribe(subscription)
                pump = self.pumps.pop(str(sub_id), None)
                if pump is not None:
                    pump.cancel()
            self.send({"type": "unsubscribed", "id": sub_id})
        elif kind == "roster":
            request_id = frame.get("id")
            if self.participant.role == "emitter":
                self.send(
                    {
                        "type": "error",
                        "id": request_id,
                        "code": "unauthorized",
                        "detail": "roster is for consumer connections (AEP-0003 §4.1)",
                    }
                )
            else:
                self.send({"type": "roster", "id": request_id, "entries": self.hub.roster()})
        elif kind == "ping":
            self.send({"type": "pong", "t": frame.get("t")})
        elif kind == "pong":
            self.last_pong = time.monotonic()
        elif kind == "closing":
            self._close("the peer is closing")
        # unknown frame types are ignored (AEP-0003 §2), and so is a second hello

    def _subscribe(self, frame: dict[str, Any]) -> None:
        sub_id = frame.get("id")
        if not isinstance(sub_id, str) or not sub_id:
            self.send(
                {
                    "type": "error",
                    "id": sub_id,
                    "code": "invalid-filter",
                    "detail": "a subscribe needs a string id",
                }
            )
            return
        if self.participant.role == "emitter":
            self.send(
                {
                    "type": "error",
                    "id": sub_id,
                    "code": "unauthorized",
                    "detail": "subscribing is for consumer connections",
                }
            )
            return
        if sub_id in self.subscriptions:
            self.send(
                {
                    "type": "error",
                    "id": sub_id,
                    "code": "invalid-filter",
                    "detail": f"subscription {sub_id!r} already exists",
                }
            )
            return
        try:
            subscription = self.hub.subscribe(
                self.participant,
                sub_id,
                frame.get("filter"),
                from_=frame.get("from"),
                capture=frame.get("capture"),
            )
        except SubscribeError as exc:
            self.send({"type": "error", "id": sub_id, "code": exc.code, "detail": exc.detail})
            return
        self.subscriptions[sub_id] = subscription
        subscription.on_overflow = lambda: self._overflowed(subscription)
        self.send({"type": "subscribed", "id": sub_id})
        self.pumps[sub_id] = asyncio.create_task(self._pump(subscription), name=f"sub-{sub_id}")

    async def _pump(self, subscription: Subscription) -> None:
        # an overflowed subscription stops after the item in hand (its position is in the
        # `closing` frame's once taken): what is still queued is not sent
        while not subscription.overflowed and (item := await subscription.next()) is not None:
            if not await self._send(item):
                return
        if subscription.overflowed:
            self._overflowed(subscription)

    def _overflowed(self, subscription: Subscription) -> None:
        """A subscription fell behind past what it may hold: disconnect at once (AEP-0003
        §8.4), saying the positions delivered, and cut the connection if the peer does not
        take that within `Timing.drop_after` (it may read nothing at all)."""
        self.dropped = True
        self._close(
            f"subscription {subscription.id} fell behind (slow consumer); "
            "resume from the delivered positions"
        )
        self.deadline.arm()
