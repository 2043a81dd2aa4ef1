"""The AEP event envelope (AEP-0001 §5): sixteen context attributes, `data`, extensions.

An `Event` is valid by construction at the envelope level: its attribute types, the `type`
grammar, the session/agent/command scoping of §5.2 and the extension attribute rules of §5.4
are checked when it is made. Its payload is checked by `aep_bridge.aep.validation`, which is
the one entry point for bytes from the outside.

A received event keeps its original bytes (`Event.raw`), so a relay hop forwards exactly what
it was given (AEP-0001 §4.2).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError, model_validator

from ._types import NonNegInt, Opt
from .formats import is_rfc3339, is_uri
from .payloads import PAYLOAD_MODELS, RESERVED_MODELS
from .registry import (
    AEP_VERSION,
    CATEGORIES,
    EXTENSION_NAME_PATTERN,
    FOREIGN_EMITTER_PATTERN,
    TYPE_PATTERN,
    Capture,
    Severity,
    is_command_type,
)
from .rules import rule_error

NonEmpty = Annotated[str, StringConstraints(min_length=1)]
TraceParent = Annotated[
    str, StringConstraints(pattern=r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
]

_GENERIC_TYPE: Final = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)+")


class _Verdicts:
    """A bounded memo of strings already found legal: streams repeat types and sources."""

    def __init__(self, limit: int = 4096) -> None:
        self.good: set[str] = set()
        self.limit = limit

    def remember(self, value: str) -> None:
        if len(self.good) < self.limit:
            self.good.add(value)


_GOOD_TYPES: Final = _Verdicts()
_GOOD_SOURCES: Final = _Verdicts()


def type_violation(type_: str) -> tuple[str, str] | None:
    """Why `type_` breaks the type grammar, as (rule, message), or None when it is legal."""
    if TYPE_PATTERN.fullmatch(type_):
        return None
    head = type_.split(".", 1)[0]
    if _GENERIC_TYPE.fullmatch(type_) and head not in CATEGORIES:
        return (
            "AEP-0002 §3",
            f"type {type_!r}: {head!r} is not a registered category (the set is closed)",
        )
    return (
        "AEP-0001 §6",
        f"type {type_!r} is not `category.rest` in lowercase [a-z0-9_] tokens, "
        "or `x.vendor.category.rest` for a vendor type",
    )


class Event(BaseModel):
    """One AEP 0.1 event. Attribute names are the wire names; see AEP-0001 §5.1."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    aep: Literal["0.1"]
    id: NonEmpty
    type: str
    subject: Opt[NonEmpty] = None
    time: str
    source: NonEmpty
    agent: NonEmpty
    session: Opt[NonEmpty] = None
    run: Opt[NonEmpty] = None
    step: Opt[NonEmpty] = None
    seq: Opt[NonNegInt] = None
    epoch: NonNegInt = 0
    cause: Opt[NonEmpty] = None
    traceparent: Opt[TraceParent] = None
    severity: Severity = "info"
    capture: Capture = "metadata"
    data: Opt[dict[str, Any]] = None

    @model_validator(mode="after")
    def _rules(self) -> Event:
        """The rules a field type cannot say; one call per event, for speed."""
        type_ = self.type
        if type_ not in _GOOD_TYPES.good:
            problem = type_violation(type_)
            if problem is not None:
                raise rule_error(*problem)
            _GOOD_TYPES.remember(type_)
        if not is_rfc3339(self.time):
            raise rule_error(
                "AEP-0001 §5.1 #5", f"time {self.time!r} is not an RFC 3339 timestamp with a zone"
            )
        if self.source not in _GOOD_SOURCES.good:
            if not is_uri(self.source):
                raise rule_error(
                    "AEP-0001 §5.1 #6", f"source {self.source!r} is not an absolute URI"
                )
            _GOOD_SOURCES.remember(self.source)
        _check_scope(self)
        extra = self.__pydantic_extra__
        if extra:
            for name, value in extra.items():
                _check_extension(name, value)
        return self

    # -- views ---------------------------------------------------------------------------

    @property
    def extensions(self) -> dict[str, str | int | bool]:
        """Extension attributes (AEP-0001 §5.4), untrusted producer scalars."""
        return dict(self.__pydantic_extra__ or {})

    @property
    def is_agent_scoped(self) -> bool:
        return self.type.startswith("agent.")

    @property
    def is_command(self) -> bool:
        """A command to an emitter (`control.{verb}` or `x.{vendor}.control.*`), not an ack."""
        return is_command_type(self.type)

    @property
    def position(self) -> tuple[int, int] | None:
        """`(epoch, seq)` for events of the session owner's stream; None otherwise."""
        return None if self.seq is None else (self.epoch, self.seq)

    @property
    def session_key(self) -> tuple[str, str] | None:
        """`(source, session)`: session identity is emitter-scoped (AEP-0001 §5.2)."""
        return None if self.session is None else (self.source, self.session)

    @property
    def dedupe_key(self) -> tuple[str, str]:
        """`(source, id)`: the idempotency key every consumer dedupes on (AEP-0001 §7.4)."""
        return (self.source, self.id)

    @property
    def payload(self) -> Any:
        """The typed payload when the type has a model and `data` fits it, else `data` as is."""
        private = self._private
        if private.get("_payload") is None:
            private["_payload"] = parse_payload(self)
        return private["_payload"]

    # -- wire form -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: attributes that were given, never a null (AEP-0001 §5.1)."""
        return self.model_dump(mode="json", exclude_unset=True, exclude_none=True)

    def to_json(self) -> bytes:
        """Compact JSON of `to_dict()`."""
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False).encode()

    @property
    def raw(self) -> bytes:
        """The bytes this event arrived as, or its compact JSON if it was built here."""
        private = self._private
        raw: bytes | None = private.get("_raw")
        if raw is None:
            raw = private["_raw"] = self.to_json()
        return raw

    @property
    def _private(self) -> dict[str, Any]:
        # The original bytes and the parsed payload ride in pydantic's private slot, made on
        # first use: declared private attributes would cost an initialisation per event.
        private = self.__pydantic_private__
        if private is None:
            private = {}
            object.__setattr__(self, "__pydantic_private__", private)
        return private

    def reshaped(self, data: dict[str, Any] | None, capture: Capture | None = None) -> Event:
        """This event with other `data` (and `capture`), as a capture gate passes it on.

        The envelope was validated when this event was made and none of it changes, so the
        copy is not validated again (that cost as much as the rest of the gate); its bytes
        and payload are made afresh when asked for.
        """
        update: dict[str, Any] = {"data": data}
        if capture is not None:
            update["capture"] = capture
        copy = self.model_copy(update=update)
        object.__setattr__(copy, "__pydantic_private__", None)  # not this event's bytes
        return copy

    def _keep(self, raw: bytes | None, payload: Any) -> None:
        """Remember the bytes this event came as and its parsed payload (validation's job)."""
        private = self._private
        private["_raw"] = raw
        private["_payload"] = payload


def _check_scope(event: Event) -> None:
    """AEP-0001 §5.2: which events carry `session` and `seq`."""
    type_ = event.type
    if type_.startswith("agent."):
        present = [k for k in ("session", "run", "step", "seq") if getattr(event, k) is not None]
        if present:
            raise rule_error(
                "AEP-0001 §5.2",
                f"agent-scoped {type_} must omit session, run, step and seq "
                f"(has {', '.join(present)})",
            )
    elif FOREIGN_EMITTER_PATTERN.fullmatch(type_):
        rule = "AEP-0002 §7.3" if type_ == "attention.routed" else "AEP-0004 §2.2"
        if event.session is None:
            raise rule_error(rule, f"{type_} must name the session it addresses")
        if event.seq is not None:
            raise rule_error(rule, f"{type_} is foreign to the session's emitter and must omit seq")
    elif event.session is None or event.seq is None:
        missing = " and ".join(k for k in ("session", "seq") if getattr(event, k) is None)
        raise rule_error(
            "AEP-0001 §5.2", f"session-scoped {type_} must carry session and seq (no {missing})"
        )


def _check_extension(name: str, value: object) -> None:
    if not EXTENSION_NAME_PATTERN.fullmatch(name):
        raise rule_error(
            "AEP-0001 §5.4",
            f"extension attribute {name!r}: names are 1 to 20 lowercase letters or digits",
        )
    if isinstance(value, str | bool | int) or (isinstance(value, float) and value.is_integer()):
        return
    raise rule_error(
        "AEP-0001 §5.4",
        f"extension attribute {name!r} must be a string, integer or boolean, "
        f"not {type(value).__name__ if value is not None else 'null'}",
    )


def now_rfc3339() -> str:
    """The current UTC time as RFC 3339 with milliseconds and a `Z`."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["AEP_VERSION", "Event", "now_rfc3339", "type_violation"]


def parse_payload(event: Event) -> Any:
    """The typed payload if `data` fits a known model (reserved types leniently), else `data`."""
    if event.data is None:
        return None
    model = PAYLOAD_MODELS.get(event.type) or RESERVED_MODELS.get(event.type)
    if model is None:
        return event.data
    try:
        return model.model_validate(event.data)
    except ValidationError:
        return event.data
