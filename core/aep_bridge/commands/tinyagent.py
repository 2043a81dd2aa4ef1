"""A tiny AEP agent: the smallest emitter and control target there is, for humans and tests.

`aep-bridge ask` uses it to put one question through the whole loop from a shell: it connects
to an endpoint's WebSocket as an emitter that accepts `control.attention.respond`, raises an
`attention.requested`, waits for the answer, acknowledges it exactly once (a retried command
gets the recorded ack again, byte for byte), and reports `attention.answered` and
`attention.resolved`. It is also the control target the conformance runs point at.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import websockets
from websockets.asyncio.client import ClientConnection

from ..aep.build import make_event
from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.ids import new_id, source_uri
from ..aep.validation import parse_event

REFUSING_WORDS: Final = frozenset({"deny", "no", "reject", "refuse", "cancel", "abort"})


class AgentError(Exception):
    """The endpoint refused the agent (an error frame), the connection failed, or it closed
    (code `closed`: the bridge stopped)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


#: what the close codes an endpoint sends mean, in words
_CLOSE_CODES: Final = {
    1000: "closed normally",
    1001: "going away",
    1011: "an error in the endpoint",
    1012: "the bridge is stopping or restarting",
}


def _closed(exc: websockets.ConnectionClosed) -> AgentError:
    """A connection that ended under us, as an `AgentError` with code `closed`."""
    frame = exc.rcvd
    if frame is None:
        return AgentError("closed", "the connection to the endpoint was lost")
    why = frame.reason or _CLOSE_CODES.get(frame.code, "")
    return AgentError(
        "closed",
        f"the endpoint closed the connection (code {frame.code}{': ' if why else ''}{why})",
    )


class Cancelled(Exception):
    """A `control.cancel` arrived and the agent honoured it."""


@dataclass(frozen=True, slots=True)
class Answer:
    option: str | None = None
    text: str | None = None
    by: str | None = None

    def __str__(self) -> str:
        if self.option is None:
            return f"text: {self.text}"
        return self.option if self.text is None else f"{self.option} (text: {self.text})"


class TinyAgent:
    """One session over one WebSocket: emit events, receive and acknowledge commands."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        agent: str = "aep-bridge-ask",
        session: str | None = None,
        accepts: Sequence[str] = ("control.attention.respond", "control.cancel"),
        ack_window_ms: int = 10_000,
        host: str | None = None,
        instance: str | None = None,
    ) -> None:
        """`instance`: what its `hello` says identifies this process (AEP-0003 §4); by
        default unique to this object. A connection made again with the same one has the
        answers waiting for its session sent to it before it emits anything."""
        self.url = url
        self.instance = instance or f"{socket.gethostname()}/{id(self):x}"
        self.token = token
        self.agent = agent
        self.session = session or f"ask-{new_id().lower()}"
        self.accepts = list(accepts)
        self.ack_window_ms = ack_window_ms
        self.source = source_uri(host or socket.gethostname(), agent, self.session)
        self.run: str | None = None
        self._seq = 0
        self._socket: ClientConnection | None = None
        self._acks: dict[tuple[str, str], Event] = {}

    async def __aenter__(self) -> TinyAgent:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            self._socket = await websockets.connect(self.url, additional_headers=headers)
        except (OSError, websockets.InvalidStatus, websockets.InvalidHandshake) as exc:
            raise AgentError("connect", f"cannot connect to {self.url}: {exc}") from None
        await self._send_frame(
            {
                "type": "hello",
                "versions": ["0.1"],
                "role": "emitter",
                "identity": {
                    "agent": self.agent,
                    "instance": self.instance,
                },
                "capabilities": {
                    "emits": ["session", "run", "attention", "control"],
                    "control": {"accepts": self.accepts, "ack_window_ms": self.ack_window_ms},
                },
            }
        )
        reply = await self._next_frame()
        if reply.get("type") != "hello":
            raise AgentError(str(reply.get("code", "hello")), str(reply.get("detail", reply)))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._socket is not None:
            await self._socket.close()

    # -- sending -----------------------------------------------------------------------

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        await self._send(json.dumps(frame))

    async def _send(self, text: str) -> None:
        assert self._socket is not None
        try:
            await self._socket.send(text)
        except websockets.ConnectionClosed as exc:
            raise _closed(exc) from None

    async def _recv(self) -> str | bytes:
        assert self._socket is not None
        try:
            return await self._socket.recv()
        except websockets.ConnectionClosed as exc:
            raise _closed(exc) from None

    async def emit(self, type_: str, data: dict[str, Any] | None = None, **envelope: Any) -> Event:
        """Emit one session event at the next position."""
        event = make_event(
            type_,
            source=self.source,
            agent=self.agent,
            session=self.session,
            seq=self._seq,
            epoch=0,
            run=envelope.pop("run", self.run),
            data=data,
            **envelope,
        )
        self._seq += 1
        await self._send(event.raw.decode())
        return event

    # -- receiving ---------------------------------------------------------------------

    async def _next_frame(self) -> dict[str, Any]:
        while True:
            text = await self._recv()
            frame = json.loads(text)
            if isinstance(frame, dict) and frame.get("type") == "ping":
                await self._send_frame({"type": "pong", "t": frame.get("t")})
                continue
            if isinstance(frame, dict):
                return frame

    async def next_command(self) -> Event:
        """The next command addressed to this session (frames in between are handled).

        Raises `AgentError` (code `closed`) when the connection ends first."""
        while True:
            text = await self._recv()
            data = text.encode() if isinstance(text, str) else text
            try:
                frame = json.loads(data)
            except json.JSONDecodeError:
                continue
            if not isinstance(frame, dict):
                continue
            kind = frame.get("type")
            if kind == "ping":
                await self._send_frame({"type": "pong", "t": frame.get("t")})
            elif kind == "error" and frame.get("code") in ("invalid-event", "unauthorized"):
                raise AgentError(str(frame["code"]), str(frame.get("detail", "")))
            elif isinstance(kind, str) and "." in kind:
                try:
                    return parse_event(data)
                except InvalidEvent:
                    continue

    async def ack(
        self, command: Event, reason: str | None = None, detail: str | None = None
    ) -> Event:
        """One decision per command: accept (no reason) or reject; a redelivery gets it again."""
        key = command.dedupe_key
        recorded = self._acks.get(key)
        if recorded is not None:
            await self._send(recorded.raw.decode())  # byte-identical re-ack (AEP-0004 §3)
            return recorded
        if reason is None:
            ack = await self.emit("control.accepted", {}, cause=command.id)
        else:
            payload = {"reason": reason, **({"detail": detail} if detail else {})}
            ack = await self.emit("control.rejected", payload, cause=command.id)
        self._acks[key] = ack
        return ack

    # -- the question ------------------------------------------------------------------

    async def ask(
        self,
        question: str,
        options: Sequence[str] = (),
        *,
        kind: str = "permission",
        timeout: float | None = None,
    ) -> Answer:
        """The whole loop for one question; returns the answer, raises on cancel or timeout."""
        await self.emit(
            "session.started",
            {"label": question[:120], "client": {"name": "aep-bridge-ask"}},
            capture="redacted",
        )
        self.run = "r1"
        await self.emit("run.started", {"trigger": "user"})
        data: dict[str, Any] = {"kind": kind, "prompt": question, "respond_via": ["control"]}
        if options:
            data["options"] = [{"id": o, "label": o} for o in options]
        request = await self.emit(
            "attention.requested", data, severity="notice", capture="redacted", subject="ask"
        )
        try:
            async with asyncio.timeout(timeout):
                answer = await self._await_answer(request, list(options), kind)
        except TimeoutError:
            await self.emit(
                "attention.timeout",
                {"after_ms": int((timeout or 0) * 1000)},
                subject=request.id,
                cause=request.id,
            )
            await self._finish("timeout")
            raise
        except Cancelled:
            await self.emit(
                "attention.resolved",
                {"resolution": "dismissed"},
                subject=request.id,
                cause=request.id,
            )
            await self._finish("killed")
            raise
        await self._finish("normal")
        return answer

    async def _await_answer(self, request: Event, options: list[str], kind: str) -> Answer:
        while True:
            command = await self.next_command()
            if command.type == "control.cancel":
                await self.ack(command)
                await self.emit("run.cancelled", {"by": "control"}, cause=command.id)
                self.run = None
                raise Cancelled()
            if command.type != "control.attention.respond":
                await self.ack(command, "unsupported", f"{command.type} is not accepted here")
                continue
            if command.dedupe_key in self._acks:
                await self.ack(command)  # a retry: the same decision, re-sent
                continue
            if command.subject != request.id:
                await self.ack(command, "invalid", "no open request has that subject")
                continue
            answer = _answer_of(command, options, kind)
            if answer is None:
                await self.ack(command, "invalid", "the answer names no option of this request")
                continue
            given: dict[str, Any] = {}
            if answer.option is not None:
                given["option"] = answer.option
            if answer.text is not None:
                given["text"] = answer.text
            await self.report_answer(command, given)
            return Answer(answer.option, answer.text, command.agent)

    async def report_answer(self, command: Event, answer: dict[str, Any] | None = None) -> None:
        """Take a `control.attention.respond` as an agent does: accept it, then report
        `attention.answered` (with `answer`, by default the command's own) and
        `attention.resolved` for the request it answers."""
        ack = await self.ack(command)
        if answer is None:
            answer = dict((command.data or {}).get("answer") or {})
        await self.emit(
            "attention.answered",
            {"answer": answer, "via": "control", "by": command.agent},
            subject=command.subject,
            cause=command.id,
            capture="full" if "text" in answer else "metadata",
        )
        await self.emit(
            "attention.resolved", {"resolution": "answered"}, subject=command.subject, cause=ack.id
        )

    async def _finish(self, reason: str) -> None:
        if self.run is not None:
            if reason == "normal":
                await self.emit("run.finished", {})
            else:
                await self.emit("run.failed", {"reason": reason})
            self.run = None
        await self.emit("session.ended", {"reason": reason})


def _answer_of(command: Event, options: list[str], kind: str) -> Answer | None:
    """The answer a respond command gives, with AEP-0008's text-to-option rule."""
    answer = (command.data or {}).get("answer") or {}
    option, text = answer.get("option"), answer.get("text")
    if isinstance(option, str):
        return Answer(option=option) if not options or option in options else None
    if not isinstance(text, str):
        return None
    if not options:
        return Answer(text=text)
    wanted = text.strip().casefold()
    matches = [o for o in options if o.casefold() == wanted]
    if len(matches) == 1:
        return Answer(option=matches[0])
    if kind == "permission":  # unmatched text never grants: apply the refusing option
        refusing = [o for o in options if o.casefold() in REFUSING_WORDS]
        return Answer(option=refusing[0], text=text) if refusing else None
    return Answer(text=text)
