"""The held attention loop: a hook waits while a human answers from the chat.

A permission prompt (or a question form) is raised as `attention.requested` and the hook
that raised it stays open. What ends it, exactly once:
- a `control.attention.respond` for it: acknowledged (`control.accepted`, or
  `control.rejected` with `invalid` when the answer does not fit the request, which stays
  open for a better one), then `attention.answered` and `attention.resolved`, and the hook
  returns the agent's decision;
- the hold passing: `attention.timeout`, and the hook returns nothing, so the agent shows
  its own dialog;
- the agent moving on without it (the person answered in the terminal, the tool ran, the
  session ended, the hook was killed): `attention.resolved` `dismissed`.

Commands are deduplicated on `(source, id)` (AEP-0004 §3): a retried command gets the ack
recorded for it, byte for byte, and changes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..aep.capture import gate_form_values
from ..aep.envelope import Event
from ..aep.form_values import form_problem
from ..aep.registry import Capture
from .emitter import SessionState
from .mapping import DENY, Ceiling, Verdict, gated
from .steer import DONE, is_stop_request

#: decisions remembered for retried commands
_RECORDED_ACKS: Final = 4096


class Emit(Protocol):
    def __call__(
        self,
        state: SessionState,
        type_: str,
        data: dict[str, Any],
        *,
        capture: Capture = ...,
        subject: str | None = ...,
        cause: str | None = ...,
    ) -> Event: ...


@dataclass(slots=True)
class Held:
    """One open request and the hook waiting on it."""

    request: Event
    state: SessionState
    #: what the agent's decision concerns: the tool name, or the MCP server for a form
    subject: str | None
    future: asyncio.Future[Verdict | None]
    opened: float = field(default_factory=time.monotonic)

    @property
    def data(self) -> dict[str, Any]:
        return self.request.data or {}

    @property
    def options(self) -> list[dict[str, Any]]:
        return [o for o in self.data.get("options") or [] if isinstance(o, dict)]

    @property
    def fields(self) -> list[dict[str, Any]] | None:
        fields = self.data.get("fields")
        return [f for f in fields if isinstance(f, dict)] if isinstance(fields, list) else None


class Rejected(Exception):
    """An answer that does not fit its request: nacked `invalid`, the request stays open."""


def _option_of(held: Held, text: str) -> str | None:
    """The option a text answer names (its id or label, any case), if exactly one."""
    wanted = text.strip().casefold()
    found = [
        str(o["id"])
        for o in held.options
        if wanted in (str(o.get("id", "")).casefold(), str(o.get("label", "")).casefold())
    ]
    return found[0] if len(found) == 1 else None


def verdict_of(held: Held, answer: Any) -> Verdict:
    """The decision an answer makes (AEP-0008), or `Rejected` with the reason."""
    if not isinstance(answer, dict):
        raise Rejected("the command carries no answer")
    if is_stop_request(held.request):
        return _instruction(held, answer)
    option, text, values = answer.get("option"), answer.get("text"), answer.get("values")
    fields = held.fields
    if fields is not None:  # a form
        if values is None and isinstance(text, str) and len(fields) == 1:
            only = fields[0]
            if only.get("type") == "string" or only.get("other"):
                values = {only.get("id"): text}  # a text answer to a one-question form
        if not isinstance(values, dict):
            raise Rejected("a form is answered with values for its fields")
        unknown = sorted(str(k) for k in values if k not in {f.get("id") for f in fields})
        if unknown:  # recorded but never applied, it would misstate the answer (AEP-0008)
            raise Rejected(f"the form has no field {', '.join(unknown)}")
        problem = form_problem(fields, values)
        if problem is not None:
            raise Rejected(problem)
        return Verdict(values=values)
    ids = {str(o.get("id")) for o in held.options}
    if isinstance(option, str):
        if option not in ids:
            raise Rejected(f"{option!r} is not an option of this request")
        return Verdict(option=option, text=text if isinstance(text, str) and text else None)
    if isinstance(text, str) and text.strip():
        named = _option_of(held, text)
        if named is not None:
            return Verdict(option=named)  # the word is the decision, not guidance
        return Verdict(option=DENY, text=text.strip())  # guidance never grants (AEP-0008)
    raise Rejected("the answer names no option and carries no text")


def _instruction(held: Held, answer: dict[str, Any]) -> Verdict:
    """A held Stop's answer: **Done** (the option, or the word) lets the agent stop; any
    other words are its next instruction, whole (steer.py)."""
    option, text = answer.get("option"), answer.get("text")
    if isinstance(option, str):
        if option != DONE:
            raise Rejected(f"{option!r} is not an option of this request")
        return Verdict(option=DONE)
    if isinstance(text, str) and text.strip():
        if _option_of(held, text) == DONE:
            return Verdict(option=DONE)
        return Verdict(text=text.strip())
    raise Rejected("the answer names no option and carries no instruction")


class AttentionLoop:
    """The open requests of every session, and the commands that answer them."""

    def __init__(
        self,
        emit: Emit,
        send_again: Callable[[Event], None],
        find: Callable[[str | None], SessionState | None],
        ceiling: Ceiling,
    ) -> None:
        self._emit = emit
        self._find = find
        self._send_again = send_again
        self._ceiling = ceiling
        self.pending: dict[str, Held] = {}
        self._acks: OrderedDict[tuple[str, str], Event] = OrderedDict()

    # -- holding --------------------------------------------------------------------------

    async def hold(
        self, state: SessionState, request: Event, subject: str | None, seconds: float
    ) -> Verdict | None:
        """Wait for the answer to `request`; None when the hold passes or the agent moves on."""
        return await self.wait(self.open(state, request, subject), seconds)

    def open(self, state: SessionState, request: Event, subject: str | None) -> Held:
        """Hold `request` open from now: answers, and the agent moving on, find it."""
        held = Held(request, state, subject, asyncio.get_running_loop().create_future())
        self.pending[request.id] = held
        return held

    def release(self) -> None:
        """Free every waiting hook with no decision, closing nothing (the daemon stops with
        the bridge away: the requests stay recorded for the next daemon to close)."""
        for held in list(self.pending.values()):
            self.pending.pop(held.request.id, None)
            if not held.future.done():
                held.future.set_result(None)

    def let_go(self, held: Held) -> None:
        """Close an open request nobody will wait on as dismissed (the bridge is away)."""
        self._dismiss(held)

    async def wait(self, held: Held, seconds: float) -> Verdict | None:
        """Wait up to `seconds` for the answer to an open request (`open`); None when the
        hold passes or the agent moves on."""
        request, state = held.request, held.state
        try:
            return await asyncio.wait_for(asyncio.shield(held.future), seconds)
        except TimeoutError:
            if held.future.done():  # answered after the timer fired, before we woke: it holds
                return held.future.result()
            if self.pending.pop(request.id, None) is not None:
                after = int((time.monotonic() - held.opened) * 1000)
                self._emit(
                    state,
                    "attention.timeout",
                    {"after_ms": after},
                    subject=request.id,
                    cause=request.id,
                )
            return None
        except asyncio.CancelledError:  # the hook went away: the agent decided without us
            self._dismiss(held)
            raise
        finally:
            self.pending.pop(request.id, None)

    def _dismiss(self, held: Held) -> None:
        if self.pending.pop(held.request.id, None) is None:
            return
        self.close(held.state, held.request.id)
        if not held.future.done():
            held.future.set_result(None)

    def close(self, state: SessionState, request_id: str) -> None:
        """Close a request no hook waits on as dismissed: a heads-up once the person is
        back, a prompt nobody can answer (the bridge is away: the agent asks itself), or
        one a killed daemon left open."""
        self._emit(
            state,
            "attention.resolved",
            {"resolution": "dismissed"},
            subject=request_id,
            cause=request_id,
        )

    def dismiss(self, state: SessionState, subject: str | None = None) -> int:
        """Close the session's open requests (those about `subject`, when given) as
        dismissed, and free their hooks with no decision; how many."""
        closing = [
            h
            for h in self.pending.values()
            if h.state is state and (subject is None or h.subject == subject)
        ]
        for held in closing:
            self._dismiss(held)
        return len(closing)

    def dismiss_all(self) -> None:
        """Close every open request as dismissed and free its hook (the daemon stops)."""
        for held in list(self.pending.values()):
            self._dismiss(held)

    def answered_elsewhere(self, state: SessionState, subject: str | None, answer: Any) -> bool:
        """The agent reports the request answered on its own surface: record it, free the
        hook; False when nothing was open."""
        for held in list(self.pending.values()):
            if held.state is state and held.subject == subject:
                self.pending.pop(held.request.id, None)
                answered = self._answered(held, answer, via="oob", cause=held.request.id)
                self._resolved(held, answered.id)
                if not held.future.done():
                    held.future.set_result(None)
                return True
        return False

    # -- answering ------------------------------------------------------------------------

    async def on_command(self, command: Event) -> None:
        """Decide one command, once; a retry gets the recorded decision again."""
        key = command.dedupe_key
        recorded = self._acks.get(key)
        if recorded is not None:
            self._send_again(recorded)  # byte-identical re-ack (AEP-0004 §3)
            return
        held = self.pending.get(command.subject or "")
        if command.type != "control.attention.respond":
            self._ack(command, None, "unsupported", f"{command.type} is not accepted")
            return
        if held is None or held.request.session != command.session:
            self._ack(command, None, "invalid", "no open request has that subject")
            return
        answer = (command.data or {}).get("answer")
        try:
            verdict = verdict_of(held, answer)
        except Rejected as why:
            self._ack(command, held.state, "invalid", str(why))
            return
        self._ack(command, held.state, None, None)
        self.pending.pop(held.request.id, None)
        applied: dict[str, Any] = {}  # what was decided (AEP-0008: the applied option)
        if verdict.option is not None:
            applied["option"] = verdict.option
        if verdict.text is not None:
            applied["text"] = verdict.text
        if verdict.values is not None:
            applied["values"] = verdict.values
        answered = self._answered(
            held, applied, via="control", cause=command.id, by=_answerer(command)
        )
        self._resolved(held, answered.id)
        if not held.future.done():
            held.future.set_result(verdict)

    def _ack(
        self, command: Event, state: SessionState | None, reason: str | None, detail: str | None
    ) -> Event | None:
        if state is None:
            state = self._find(command.session)
        if state is None:  # (the daemon finds a stream for any session: never dropped)
            return None
        if reason is None:
            ack = self._emit(state, "control.accepted", {}, cause=command.id)
        else:
            payload, capture = gated(
                "control.rejected", {"reason": reason, "detail": detail or ""}, self._ceiling
            )
            ack = self._emit(state, "control.rejected", payload, capture=capture, cause=command.id)
        self._acks[command.dedupe_key] = ack
        while len(self._acks) > _RECORDED_ACKS:
            self._acks.popitem(last=False)
        return ack

    def _answered(
        self, held: Held, answer: Any, *, via: str, cause: str, by: str | None = None
    ) -> Event:
        answer = answer if isinstance(answer, dict) else {}
        if isinstance(answer.get("values"), dict):  # typed words need `redacted` (AEP-0002 §5.3)
            values = gate_form_values(held.fields, answer["values"], self._ceiling.attention)
            answer = {**answer, "values": values}
        data: dict[str, Any] = {"answer": answer, "via": via}
        if by:
            data["by"] = by
        payload, capture = gated("attention.answered", data, self._ceiling)
        return self._emit(
            held.state,
            "attention.answered",
            payload,
            capture=capture,
            subject=held.request.id,
            cause=cause,
        )

    def _resolved(self, held: Held, cause: str) -> None:
        latency = int((time.monotonic() - held.opened) * 1000)
        self._emit(
            held.state,
            "attention.resolved",
            {"resolution": "answered", "latency_ms": latency},
            subject=held.request.id,
            cause=cause,
        )


def _answerer(command: Event) -> str | None:
    """Who answered: the command's `by` when the bridge names the person, else its agent."""
    by = (command.data or {}).get("by")
    return by if isinstance(by, str) and by else command.agent


__all__ = ["AttentionLoop", "Held", "Rejected", "verdict_of"]
