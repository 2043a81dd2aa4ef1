"""A consumer of an external AEP relay over its WebSocket binding (AEP-0003 §3.5, AEP-0004).

`RelayClient` is the `EventSource` for a bridge that does not terminate its agents itself:
some other endpoint (another aep-bridge, a fleet relay) does, and the bridge watches and
steers them through it. It offers exactly what `LocalSource` offers the embedded hub, so the
core cannot tell the two apart: events in order with replay first, commands with an outcome,
the roster.

What a remote relay adds is failure: the socket drops, the relay restarts, the consumer
process itself is killed. The client is built so that none of these loses or repeats an
event for a consumer that keeps the contract below, and none of them loses a command:

* **Resume.** Every (re)connection subscribes again with a resume point: `from: "all"` when
  the relay advertises `replay.all` (every held session, including sessions that started
  while we were away, which a position list cannot name), otherwise the positions the
  consumer has recorded in the store under `name`. An event the store has already `seen`
  is skipped, so resuming never hands the consumer an event twice. (The store's dedupe
  window is shared by all its streams: one store, one consumer of a given event.)
* **Exactly-once effects: the consumer's contract.** The client never writes to the store.
  The consumer, once it has *processed* an event, calls `store.record_delivery(client.name,
  event)` inside the same `store.transaction()` as its own effects, and only then asks for
  the next event::

      async for event in client.events(filter_spec, capture="metadata"):
          with store.transaction():
              if store.record_delivery(client.name, event):
                  ...  # the effects of handling `event`

  That one transaction is what makes effects exactly-once across crashes (both commit or
  neither does), and it is the only thing that advances the resume positions. An event
  handed out but not recorded when the process dies is delivered again after a restart.
* **Commands** are retried with the same `id` and the same bytes (AEP-0004 §2.3), after each
  reconnect and whenever the ack window passes in silence, until the caller's timeout. The
  target dedupes on `(source, id)` and re-sends its recorded ack, so a retry is always safe
  and always answered.

Connections: each `events()` iteration has a WebSocket of its own (so every event on it
belongs to that one subscription, with that one capture ceiling), and one more, the control
connection, carries commands, their acknowledgements (a subscription of its own, so the
consumer's filter cannot hide them), the relay's refusals and the roster. All of them are
opened, and reopened with backoff, by one `relay_link.Dialer`. The token travels only in the
`Authorization` header, never in a URL (AEP-0003 §8.1, §11).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.registry import Capture
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES
from ..store import Store
from .bounds import parse_bounded
from .dedupe import KeyWindow
from .relay_link import (
    CLOSE_TIMEOUT,
    MAX_FRAME_BYTES,
    OPEN_TIMEOUT,
    Dialer,
    Link,
    RelayError,
    RelayUnavailable,
    Transient,
    check_url,
    dumps,
    is_event,
    loads,
    subscribe_frame,
)
from .source import CommandResult, ResumeFrom

if TYPE_CHECKING:
    from .source import EventSource

log = logging.getLogger("aep_bridge.intake.relay")

#: Acknowledgements: the control connection subscribes to these apart from any consumer.
ACK_TYPES: Final = ("control.accepted", "control.rejected")
#: Lifecycle events after which the roster is asked for again (AEP-0003 §4.1 rule 6).
ROSTER_TRIGGERS: Final = ("session.started", "session.ended")
#: How long `roster()` waits for the relay (reconnecting included).
ROSTER_TIMEOUT: Final = 10.0
#: `(source, id)` keys one `events()` iteration remembers having handed out, as digests
#: (`dedupe.KeyWindow`): a collision, below one in a billion over a full window, would
#: skip the later event on that iteration.
YIELDED_WINDOW: Final = 100_000

#: What a command still waiting gets when the client is closed: silence, as far as we know.
_CLOSED: Final = CommandResult("timeout", detail="the client was closed before an ack came")

_ACKS_SUB: Final = "acks"
_SESSIONS_SUB: Final = "sessions"


@dataclass(eq=False)
class _Pending:
    """A command waiting for its ack, its relay-behalf refusal, or its deadline."""

    command: Event
    future: asyncio.Future[CommandResult]
    #: the control connection generation it was last sent on (0: never sent)
    sent_on: int = 0
    sent_at: float | None = None
    waiters: int = 0


@dataclass(eq=False)
class _Control:
    """The live control connection and what it knows."""

    socket: ClientConnection
    generation: int
    capabilities: dict[str, Any]
    roster_in_flight: str | None = None
    roster_dirty: bool = False
    roster_waiters: dict[str, asyncio.Future[list[dict[str, Any]]]] = field(default_factory=dict)


class RelayClient:
    """An `EventSource` over an external AEP relay's WebSocket (see the module docstring).

    `url` is the relay's `ws(s)://.../socket`; `token` its bearer token (sent as a header
    only). `name` is the stream under which the consumer records positions in `store`
    (default `relay:{url}`). `backoff` is `(base, cap)` in seconds for reconnecting:
    exponential with full jitter, so a fleet of clients does not reconnect in lockstep after
    a relay restart. `ack_window` is how long a command may go unanswered before it is sent
    again (AEP-0004 §3; match it to the targets' declared `ack_window_ms`).
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        store: Store,
        *,
        name: str | None = None,
        agent: str = "aep-bridge",
        backoff: tuple[float, float] = (0.5, 30.0),
        ack_window: float = 10.0,
    ) -> None:
        check_url(url)
        base, cap = backoff
        if not 0 < base <= cap:
            raise ValueError(f"backoff must be (base, cap) with 0 < base <= cap, not {backoff}")
        if ack_window <= 0:
            raise ValueError(f"ack_window must be positive, not {ack_window}")
        self.url = url
        self.name = name or f"relay:{url}"
        self.store = store
        self.agent = agent
        self.backoff = (float(base), float(cap))
        self.ack_window = float(ack_window)
        self._closed = asyncio.Event()
        instance = f"{socket.gethostname()}/{os.getpid()}/{id(self):x}"
        identity = {"agent": agent, "instance": instance}
        self._dialer = Dialer(url, token, identity, self.backoff, self._closed)
        self._fatal: RelayError | None = None
        self._control: _Control | None = None
        self._control_task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._changed = asyncio.Event()
        self._generation = 0
        self._pending: dict[str, _Pending] = {}
        self._roster: list[dict[str, Any]] = []
        self._sockets: set[ClientConnection] = set()
        self._ids = itertools.count(1)

    def __repr__(self) -> str:  # never the token
        return f"RelayClient({self.url!r}, name={self.name!r})"

    async def __aenter__(self) -> RelayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- events -----------------------------------------------------------------------------

    async def events(
        self,
        filter_spec: dict[str, Any] | None = None,
        *,
        capture: Capture | None = None,
        from_: ResumeFrom = None,
    ) -> AsyncIterator[Event]:
        """Events matching `filter_spec`, at most at `capture`, replay first, until `close()`.

        `from_=None` resumes by the client's rules (module docstring). An explicit `from_`
        is sent as given on the first subscription (`"all"`, or positions below which
        nothing is wanted); reconnections resume by the rules again, still skipping what is
        at or below explicit positions. Disconnections are invisible here: the iteration
        reconnects and resumes. A refusal that retrying cannot fix raises `RelayError`.
        """
        self._start_control()
        sub_id = f"events-{next(self._ids)}"
        floor: dict[str, tuple[int, int]] = {}
        if from_ is not None and from_ != "all":
            floor = {session: (epoch, seq) for session, epoch, seq in from_}
        yielded = KeyWindow(YIELDED_WINDOW)
        first = True
        avoid_all = False
        links = self._dialer.connections()
        async with contextlib.aclosing(links):
            async for link in links:
                ws, capabilities = link.socket, link.capabilities
                self._sockets.add(ws)
                try:
                    resume = self._resume(capabilities, from_ if first else None, floor, avoid_all)
                    await ws.send(dumps(subscribe_frame(sub_id, filter_spec, capture, resume)))
                    async for message in ws:
                        frame = loads(message)
                        if frame is None:
                            continue
                        if is_event(frame):
                            event = self._event_of(message)
                            if event is None or not self._fresh(event, yielded, floor):
                                continue
                            yielded.add(event.dedupe_key)
                            yield event
                            continue
                        kind = frame.get("type")
                        if kind == "subscribed" and frame.get("id") == sub_id:
                            first, link.confirmed = False, True
                        elif kind == "error" and frame.get("id") == sub_id:
                            code = str(frame.get("code", "error"))
                            if resume == "all" and code == "invalid-filter" and not avoid_all:
                                # AEP-0003 §5: a consumer MAY try `all` and fall back to positions
                                avoid_all = True
                                resume = self._resume(capabilities, None, floor, avoid_all)
                                again = subscribe_frame(sub_id, filter_spec, capture, resume)
                                await ws.send(dumps(again))
                                continue
                            raise RelayError(
                                code,
                                f"the relay at {self.url} refused the subscription ({code}): "
                                f"{frame.get('detail', '')}",
                            )
                        elif kind == "replay-exhausted":
                            self._log_gap(frame)
                        elif kind == "closing":
                            log.info(
                                "relay %s is closing the stream (%s); resuming",
                                self.url,
                                frame.get("reason", "no reason given"),
                            )
                            break
                        elif kind == "ping":
                            await ws.send(dumps({"type": "pong", "t": frame.get("t")}))
                except (ConnectionClosed, OSError) as exc:
                    if not self._closed.is_set():
                        log.warning("relay %s: stream lost (%s); resuming", self.url, exc)
                finally:
                    self._sockets.discard(ws)

    def _resume(
        self,
        capabilities: dict[str, Any],
        explicit: ResumeFrom,
        floor: dict[str, tuple[int, int]],
        avoid_all: bool,
    ) -> object:
        """The subscribe's `from`: explicit first, then `all` if advertised, else positions."""
        if explicit == "all":
            return "all"
        if explicit is not None:
            return [{"session": s, "epoch": e, "seq": q} for s, e, q in explicit]
        replay = capabilities.get("replay")
        if not avoid_all and isinstance(replay, dict) and replay.get("all") is True:
            return "all"
        positions = dict(self.store.positions(self.name))
        for session, position in floor.items():
            if position > positions.get(session, (-1, -1)):
                positions[session] = position
        if not positions:
            return None  # nothing processed yet, and no replay-all: live delivery only
        return [{"session": s, "epoch": e, "seq": q} for s, (e, q) in sorted(positions.items())]

    def _event_of(self, message: str | bytes) -> Event | None:
        try:
            return parse_bounded(message, max_bytes=DEFAULT_MAX_EVENT_BYTES)
        except InvalidEvent as exc:  # invalid, or ids too long to keep (`bounds`)
            log.warning("relay %s sent an invalid event, skipped: %s", self.url, exc)
            return None

    def _fresh(self, event: Event, yielded: KeyWindow, floor: dict[str, tuple[int, int]]) -> bool:
        """Whether to hand `event` out: not handed out on this iteration, not recorded by the
        consumer, and not at or below an explicit starting position."""
        key = event.dedupe_key
        if key in yielded or self.store.seen(self.name, *key):
            return False
        position, session = event.position, event.session
        return not (position is not None and session in floor and position <= floor[session])

    def _log_gap(self, frame: dict[str, Any]) -> None:
        earliest = frame.get("earliest")
        if not isinstance(earliest, dict):
            earliest = {}
        log.warning(
            "relay %s: session %s resumes at %s:%s, past our resume point; the events "
            "between are gone from the relay's buffer (a history store may have them)",
            self.url,
            frame.get("session"),
            earliest.get("epoch"),
            earliest.get("seq"),
        )

    # -- the control connection --------------------------------------------------------------

    def _start_control(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._closed.is_set():
            return
        if self._control_task is None or self._control_task.done():
            self._control_task = asyncio.get_running_loop().create_task(
                self._control_loop(), name=f"relay-control {self.url}"
            )

    def _signal(self) -> None:
        """Wake everyone waiting on the control connection's state."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _control_loop(self) -> None:
        links = self._dialer.connections(control=True)
        try:
            async with contextlib.aclosing(links):
                async for link in links:
                    await self._control_session(link)
        except RelayError as exc:
            self._fail(exc)

    async def _control_session(self, link: Link) -> None:
        """Serve one control connection until it drops (the dialer opens the next)."""
        ws, capabilities = link.socket, link.capabilities
        self._generation += 1
        control = self._control = _Control(ws, self._generation, capabilities)
        try:
            acks: dict[str, Any] = {
                "type": "subscribe",
                "id": _ACKS_SUB,
                "filter": {"type": list(ACK_TYPES)},
            }
            replay = capabilities.get("replay")
            if isinstance(replay, dict) and replay.get("all") is True:
                acks["from"] = "all"  # an ack emitted while we were away settles too
            await ws.send(dumps(acks))
            if "roster" in capabilities:
                await ws.send(
                    dumps(
                        {
                            "type": "subscribe",
                            "id": _SESSIONS_SUB,
                            "capture": "none",
                            "filter": {"type": list(ROSTER_TRIGGERS)},
                        }
                    )
                )
                await self._ask_roster(control)
            async for message in ws:
                if await self._on_control(control, message):
                    link.confirmed = True
        except (ConnectionClosed, OSError) as exc:
            if not self._closed.is_set():
                log.warning("relay %s: control connection lost (%s); reconnecting", self.url, exc)
        except Exception:  # a bug must not leave commands waiting on a dead task
            log.exception("relay %s: control connection failed; reconnecting", self.url)
        finally:
            self._control = None
            self._ready.clear()
            for waiter in control.roster_waiters.values():
                if not waiter.done():  # roster() asks again on the next connection
                    waiter.set_exception(Transient("the connection dropped"))
            self._signal()

    async def _on_control(self, control: _Control, message: str | bytes) -> bool:
        """Handle one message on the control connection; True once the link is ready."""
        frame = loads(message)
        if frame is None:
            return False
        if is_event(frame):
            event = self._event_of(message)
            if event is None:
                return False
            if event.type in ACK_TYPES:
                self._settle_ack(event)
            elif event.type in ROSTER_TRIGGERS:
                await self._ask_roster(control)
            return False
        kind = frame.get("type")
        if kind == "subscribed" and frame.get("id") == _ACKS_SUB:
            self._ready.set()
            self._signal()
            for pending in list(self._pending.values()):
                if not pending.future.done() and pending.sent_on != control.generation:
                    await self._transmit(pending)  # unsettled: the same bytes again
            return True
        if kind == "roster":
            await self._on_roster(control, frame)
        elif kind == "error":
            self._on_error(control, frame)
        elif kind == "replay-exhausted":
            pass  # the acks replay: an evicted ack is a command the sender will time out on
        elif kind == "closing":
            log.info(
                "relay %s is closing the control connection (%s); reconnecting",
                self.url,
                frame.get("reason", "no reason given"),
            )
            await control.socket.close()
        elif kind == "ping":
            await control.socket.send(dumps({"type": "pong", "t": frame.get("t")}))
        return False

    def _on_error(self, control: _Control, frame: dict[str, Any]) -> None:
        code = str(frame.get("code", "error"))
        detail = frame.get("detail")
        detail = detail if isinstance(detail, str) else None
        # a relay-behalf refusal names the command in `cause` (AEP-0004 §4.2); an invalid
        # command is answered with its `id`
        for key in (frame.get("cause"), frame.get("id")):
            pending = self._pending.get(key) if isinstance(key, str) else None
            if pending is not None and not pending.future.done():
                pending.future.set_result(CommandResult("refused", code=code, detail=detail))
                return
        request = frame.get("id")
        waiter = control.roster_waiters.pop(request, None) if isinstance(request, str) else None
        if waiter is not None:
            if not waiter.done():
                waiter.set_exception(RelayError(code, f"the relay refused the roster: {detail}"))
            return
        if request in (_ACKS_SUB, _SESSIONS_SUB):
            log.error(
                "relay %s refused the %s subscription (%s): %s", self.url, request, code, detail
            )
            return
        log.debug("relay %s: error frame %s", self.url, frame)

    def _fail(self, exc: RelayError) -> None:
        """A refusal no retry can fix: every waiting and later call raises it."""
        log.error("%s", exc)
        self._fatal = exc
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(exc)
                pending.future.exception()  # retrieved by whoever awaits; no stray warning
        self._signal()

    # -- the roster ---------------------------------------------------------------------------

    async def _ask_roster(self, control: _Control, waiter_id: str | None = None) -> str:
        """Send a roster request; while one is in flight, ask again when it is answered."""
        if waiter_id is None and control.roster_in_flight is not None:
            control.roster_dirty = True
            return control.roster_in_flight
        request = waiter_id or f"roster-{next(self._ids)}"
        if waiter_id is None:
            control.roster_in_flight = request
        await control.socket.send(dumps({"type": "roster", "id": request}))
        return request

    async def _on_roster(self, control: _Control, frame: dict[str, Any]) -> None:
        entries = frame.get("entries")
        if isinstance(entries, list):
            self._roster = [e for e in entries if isinstance(e, dict)]
        request = frame.get("id")
        if request == control.roster_in_flight:
            control.roster_in_flight = None
            if control.roster_dirty:
                control.roster_dirty = False
                await self._ask_roster(control)
        waiter = control.roster_waiters.pop(request, None) if isinstance(request, str) else None
        if waiter is not None and not waiter.done():
            waiter.set_result(list(self._roster))

    def principal_of(self, session_id: str) -> str | None:
        """None: these sessions came through no token of this bridge."""
        return None

    async def roster(self) -> list[dict[str, Any]]:
        """A fresh snapshot of the relay's live claims (AEP-0003 §4.1).

        Empty when the relay does not advertise `roster` (it would never answer). Raises
        `RelayUnavailable` when the relay cannot be reached within `ROSTER_TIMEOUT`.
        """
        self._start_control()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ROSTER_TIMEOUT
        while True:
            if self._fatal is not None:
                raise self._fatal
            control = self._control
            if control is not None and self._ready.is_set():
                if "roster" not in control.capabilities:
                    return []
                request = f"roster-{next(self._ids)}"
                waiter: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
                control.roster_waiters[request] = waiter
                try:
                    with contextlib.suppress(ConnectionClosed):
                        await self._ask_roster(control, request)
                    async with asyncio.timeout(max(deadline - loop.time(), 0)):
                        return await waiter
                except Transient:
                    continue  # the connection dropped under us: ask the next one
                except TimeoutError:
                    raise RelayUnavailable(
                        "timeout", f"the relay at {self.url} did not answer the roster request"
                    ) from None
                finally:
                    control.roster_waiters.pop(request, None)
            if not await self._wait_changed(deadline):
                raise RelayUnavailable(
                    "timeout", f"the relay at {self.url} could not be reached for the roster"
                )

    def accepts(self, session: str) -> list[str] | None:
        """The command types the live claimant of `session` declared, from the last roster.

        None when the roster names no claimant, several (a command would be refused
        `ambiguous`), or one that declared no control block. A hint for showing buttons,
        never a promise: the target's declaration at command time is what gates a command.
        """
        entries = [e for e in self._roster if e.get("session") == session]
        if len(entries) != 1:
            return None
        control = entries[0].get("control")
        if not isinstance(control, dict) or not isinstance(control.get("accepts"), list):
            return None
        return [a for a in control["accepts"] if isinstance(a, str)]

    async def _wait(self, future: asyncio.Future[CommandResult], until: float) -> None:
        """Wait until `future` is done, the control connection changes, or `until`."""
        changed = asyncio.ensure_future(self._changed.wait())
        either: set[asyncio.Future[Any]] = {future, changed}
        try:
            remaining = until - asyncio.get_running_loop().time()
            await asyncio.wait(either, timeout=max(remaining, 0), return_when="FIRST_COMPLETED")
        finally:
            changed.cancel()

    async def _wait_changed(self, deadline: float) -> bool:
        """Wait for the control connection to change state; False once `deadline` passed."""
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0 or self._closed.is_set():
            return False
        changed = self._changed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(remaining):
                await changed.wait()
        return not self._closed.is_set()

    # -- commands -----------------------------------------------------------------------------

    async def send_command(self, command: Event, *, timeout: float = 10.0) -> CommandResult:
        """Send `command` and wait, at most `timeout` seconds, for what became of it.

        The target's ack gives `accepted`/`rejected` (with the ack event); a relay-behalf
        refusal gives `refused` with its code; silence until `timeout` gives `timeout`.
        Until then the command is re-sent, with the same id and bytes, after each reconnect
        and whenever `ack_window` passes unanswered. Raises `RelayError` when the relay
        refuses the connection itself (a wrong token).
        """
        if not command.is_command:
            raise ValueError(f"{command.type} is not a command (control.* or x.*.control.*)")
        if command.session is None:
            raise ValueError("a command names its target session")
        self._start_control()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        pending = self._pending.get(command.id)
        if pending is None:
            pending = self._pending[command.id] = _Pending(command, loop.create_future())
        pending.waiters += 1
        try:
            while not pending.future.done():
                now = loop.time()
                if now >= deadline or self._closed.is_set():
                    break
                wake = deadline
                if self._ready.is_set():
                    if pending.sent_on != self._generation:
                        await self._transmit(pending)  # first send on this connection
                        continue
                    assert pending.sent_at is not None
                    window_end = pending.sent_at + self.ack_window
                    if now >= window_end:
                        log.info(
                            "command %s unanswered for %.1fs; sending it again",
                            command.id,
                            self.ack_window,
                        )
                        await self._transmit(pending)
                        continue
                    wake = min(wake, window_end)
                # the ack, a refusal, a reconnect (which re-sends) or the window's end
                await self._wait(pending.future, wake)
            if pending.future.done():
                return pending.future.result()
            if self._closed.is_set():
                return _CLOSED
            return CommandResult.of(None)
        finally:
            pending.waiters -= 1
            if pending.waiters == 0 and self._pending.get(command.id) is pending:
                del self._pending[command.id]

    async def _transmit(self, pending: _Pending) -> None:
        """Put the command's own bytes on the current control connection, if there is one."""
        control = self._control
        if control is None or not self._ready.is_set():
            return  # the next connection sends it
        pending.sent_on = control.generation
        pending.sent_at = asyncio.get_running_loop().time()
        with contextlib.suppress(ConnectionClosed):
            await control.socket.send(pending.command.raw.decode())

    def _settle_ack(self, ack: Event) -> None:
        """An ack settles the pending command it names in `cause` (AEP-0004 §3)."""
        pending = self._pending.get(ack.cause) if ack.cause is not None else None
        if pending is None or pending.future.done():
            return  # a re-sent ack for a command already settled collapses here
        if ack.session is not None and ack.session != pending.command.session:
            log.warning(
                "ack %s names command %s but comes from session %s, not %s; ignored",
                ack.id,
                ack.cause,
                ack.session,
                pending.command.session,
            )
            return
        pending.future.set_result(CommandResult.of(ack))

    # -- closing ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def status(self) -> dict[str, Any]:
        """For `aep-bridge status`: `connected` (events flowing), `connecting` (retrying
        with backoff), or `failed` with what no retry can fix (a refused token)."""
        if self._fatal is not None:
            return {"state": "failed", "reason": str(self._fatal)}
        return {"state": "connected" if self._sockets else "connecting"}

    async def close(self) -> None:
        """Stop: end every `events()` iteration, drop the connections, settle what waits."""
        self._closed.set()
        self._signal()
        sockets = list(self._sockets)  # closed together: one close timeout in all
        if self._control is not None:
            sockets.append(self._control.socket)
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
        task = self._control_task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_result(_CLOSED)


if TYPE_CHECKING:

    def _is_event_source(client: RelayClient) -> EventSource:
        """mypy checks here that `RelayClient` satisfies the `EventSource` protocol."""
        return client


__all__ = [
    "ACK_TYPES",
    "CLOSE_TIMEOUT",
    "MAX_FRAME_BYTES",
    "OPEN_TIMEOUT",
    "ROSTER_TIMEOUT",
    "ROSTER_TRIGGERS",
    "YIELDED_WINDOW",
    "RelayClient",
    "RelayError",
    "RelayUnavailable",
]
