"""Building the events the bridge itself emits: commands and `attention.routed`.

Everything built here goes through the same validation as received events, so the bridge
can never put an event on the wire that the official schemas would refuse.
"""

from __future__ import annotations

from typing import Any

from .envelope import Event, now_rfc3339
from .ids import new_id
from .payloads import Answer, AttentionRouted, ControlAttentionRespond, Payload
from .registry import AEP_VERSION, CORE_ATTRIBUTES, Capture, Severity
from .validation import validate_event


def make_event(
    type_: str,
    *,
    source: str,
    agent: str,
    data: Payload | dict[str, Any] | None = None,
    session: str | None = None,
    seq: int | None = None,
    epoch: int | None = None,
    subject: str | None = None,
    run: str | None = None,
    step: str | None = None,
    cause: str | None = None,
    severity: Severity | None = None,
    capture: Capture | None = None,
    extensions: dict[str, str | int | bool] | None = None,
    id: str | None = None,
    time: str | None = None,
) -> Event:
    """A new, validated event. Raises `InvalidEvent` if the arguments break a rule."""
    wire: dict[str, Any] = {
        "aep": AEP_VERSION,
        "id": id or new_id(),
        "type": type_,
        "time": time or now_rfc3339(),
        "source": source,
        "agent": agent,
    }
    optional: dict[str, Any] = {
        "subject": subject,
        "session": session,
        "run": run,
        "step": step,
        "seq": seq,
        "epoch": epoch,
        "cause": cause,
        "severity": severity,
        "capture": capture,
    }
    wire.update({k: v for k, v in optional.items() if v is not None})
    if extensions:
        clash = set(extensions) & set(CORE_ATTRIBUTES)
        if clash:  # AEP-0001 §5.4: refused at the producing boundary, never merged
            raise ValueError(f"extension attributes collide with core attributes: {sorted(clash)}")
        wire.update(extensions)
    if data is not None:
        wire["data"] = data.to_data() if isinstance(data, Payload) else data
    return validate_event(wire)


def answer_capture(answer: Answer, fields: list[dict[str, Any]] | None = None) -> Capture:
    """The honest capture of an answer: `full` once it carries words a person typed.

    The answer goes to the agent verbatim (redacting it would change what the person said),
    so free text makes the command `full`; options, numbers, booleans and choice ids are
    structure (`metadata`).
    """
    if answer.text is not None:
        return "full"
    specs = {f.get("id"): f for f in fields or []}
    for key, value in (answer.values or {}).items():
        spec = specs.get(key)
        if spec is None:
            if isinstance(value, str) or (isinstance(value, list) and value):
                return "full"
            continue
        if spec.get("type") == "string":
            return "full"
        if spec.get("type") == "select":
            ids = {c.get("id") for c in spec.get("choices") or []}
            chosen = value if isinstance(value, list) else [value]
            if any(c not in ids for c in chosen):
                return "full"
    return "metadata"


def make_respond_command(
    request: Event, answer: Answer, *, source: str, agent: str, id: str | None = None
) -> Event:
    """`control.attention.respond` for `request` (AEP-0004 §5, §6).

    It names the request's session, carries no `seq` (the bridge does not own the session's
    order), and sets `subject` and `cause` to the request's id.
    """
    if request.type != "attention.requested" or request.session is None:
        raise ValueError(f"can only answer an attention.requested, not {request.type}")
    fields = (request.data or {}).get("fields")
    capture = answer_capture(answer, fields if isinstance(fields, list) else None)
    return make_event(
        "control.attention.respond",
        source=source,
        agent=agent,
        session=request.session,
        run=request.run,
        subject=request.id,
        cause=request.id,
        capture=capture,
        data=ControlAttentionRespond(answer=answer),
        id=id,
    )


def make_command(
    type_: str,
    *,
    session: str,
    source: str,
    agent: str,
    data: Payload | dict[str, Any] | None = None,
    run: str | None = None,
    cause: str | None = None,
    capture: Capture = "metadata",
) -> Event:
    """Any other command (`control.cancel`, `control.pause`, `control.resume`, vendor verbs)."""
    return make_event(
        type_,
        source=source,
        agent=agent,
        session=session,
        run=run,
        cause=cause,
        capture=capture,
        data=data if data is not None else {},
    )


def make_routed(request: Event, *, to: str, via: str, source: str, agent: str) -> Event:
    """`attention.routed`: this consumer put `request` in front of a human (AEP-0002 §7.3)."""
    if request.session is None:
        raise ValueError("attention.routed needs the request's session")
    return make_event(
        "attention.routed",
        source=source,
        agent=agent,
        session=request.session,
        subject=request.id,
        cause=request.id,
        data=AttentionRouted(to=to, via=via),
    )
