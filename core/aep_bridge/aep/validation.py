"""Validation of single events: bytes or objects in, an `Event` or named violations out.

The verdict is the official JSON Schemas' (envelope schema plus the type's payload schema,
with a format checker); the difference is speed, and that every violation names its rule.
`tests/aep/test_schema_parity.py` holds the two side by side on generated input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from .envelope import Event
from .errors import InvalidEvent, Violation
from .payloads import PAYLOAD_MODELS, Payload
from .registry import CORE_ATTRIBUTES, REGISTERED_TYPES
from .rules import RULE_ERROR

#: Default largest event accepted, in bytes. Large enough for a big tool result at `full`.
DEFAULT_MAX_EVENT_BYTES: Final = 1024 * 1024

#: Payload fields holding AEP-0002 §5.2 common objects: errors inside them cite §5.2.
_COMMON_OBJECT_FIELDS: Final = frozenset(
    {
        "tool",
        "error",
        "cost",
        "fields",
        "documents",
        "input_documents",
        "output_documents",
        "citations",
        "guardrail",
    }
)
_ASCII_DIGITS: Final = re.compile(r"[0-9]+")
_UNION_TAG: Final = re.compile(r"[\[\]\-,(]|^(?:int|float|str|bool|dict|list)$")


def _attribute_rule(name: str) -> str:
    if name == "severity":
        return "AEP-0001 §8.1"
    if name == "capture":
        return "AEP-0001 §8.2"
    if name == "type":
        return "AEP-0001 §6"
    if name in CORE_ATTRIBUTES:
        return f"AEP-0001 §5.1 #{CORE_ATTRIBUTES.index(name) + 1}"
    return "AEP-0001 §5.4"


def _payload_rule(type_: str, loc: tuple[int | str, ...]) -> str:
    if len(loc) > 1 and loc[0] in _COMMON_OBJECT_FIELDS:
        return "AEP-0002 §5.2"
    if type_.startswith("control."):
        return "AEP-0004 §3" if type_ in ("control.accepted", "control.rejected") else "AEP-0004 §5"
    registered = REGISTERED_TYPES.get(type_)
    return "AEP-0002 §5.3" if registered and registered.status == "mandatory" else "AEP-0002 §5.4"


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _UNION_TAG.search(part):
            out += f".{part}" if out else part
    return out


def violations_of(error: ValidationError, *, payload_of: str | None = None) -> list[Violation]:
    """Turn pydantic's errors into violations; `payload_of` names the type when it is `data`."""
    details = error.errors(include_url=False)
    for detail in details:
        if payload_of is None and tuple(detail["loc"]) == ("aep",) and _foreign_major(detail):
            # AEP-0003 §3.1: a line of another major version is skipped, not picked apart
            return [Violation("AEP-0003 §3.1", _version_message(detail.get("input")), "aep")]
    found: dict[str, Violation] = {}
    for detail in details:
        loc = tuple(detail["loc"])
        path = _path(loc)
        if payload_of is not None:
            path = f"data.{path}" if path else "data"
        if path in found:
            continue  # one violation per place: a union reports each of its members
        ctx = detail.get("ctx") or {}
        if detail["type"] == RULE_ERROR:
            found[path] = Violation(ctx["rule"], ctx["message"], path)
            continue
        message = detail["msg"]
        if payload_of is not None:
            rule = _payload_rule(payload_of, loc)
            message = f"{payload_of} payload: {message}"
        elif not loc:
            rule, message = "AEP-0001 §5", f"an event is a JSON object: {message}"
        else:
            rule = _attribute_rule(str(loc[0]))
            if detail["type"] == "missing":
                message = f"required attribute {loc[0]!r} is missing"
            elif loc[0] == "aep":
                message = _version_message(detail.get("input"))
            else:
                message = f"{loc[0]}: {message}"
        found[path] = Violation(rule, message, path)
    return list(found.values())


def _major(value: str) -> int | None:
    major = value.split(".", 1)[0]
    return int(major) if _ASCII_DIGITS.fullmatch(major) else None


def _foreign_major(detail: Any) -> bool:
    value = detail.get("input")
    if not isinstance(value, str):
        return False
    major = _major(value)
    return major is not None and major != 0


def _version_message(value: object) -> str:
    if isinstance(value, str):
        major = _major(value)
        if major is not None and major != 0:
            return f"unsupported AEP major version {value!r}: this bridge reads 0.1 (line skipped)"
        return f"unsupported AEP version {value!r}: this bridge reads 0.1"
    return f"aep must be the version string '0.1', not {value!r}"


def check_payload(event: Event) -> tuple[Payload | None, list[Violation]]:
    """Validate `data` against the type's payload model; types without one always pass."""
    model = PAYLOAD_MODELS.get(event.type)
    if model is None or event.data is None:
        return None, []
    try:
        return model.model_validate(event.data), []
    except ValidationError as exc:
        return None, violations_of(exc, payload_of=event.type)


def _finish(event: Event, raw: bytes | None) -> Event:
    payload, problems = check_payload(event)
    if problems:
        raise InvalidEvent(problems, raw=raw)
    event._keep(raw, payload)
    return event


def parse_event(raw: bytes | str, *, max_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> Event:
    """Parse and validate one event from its JSON text, keeping the original bytes.

    Raises `InvalidEvent` naming every broken rule; never anything else for bad input.
    """
    data = raw.encode() if isinstance(raw, str) else bytes(raw)
    if len(data) > max_bytes:
        raise InvalidEvent(
            [Violation("AEP-0003 §3.2", f"event is {len(data)} bytes, over the {max_bytes} limit")],
            raw=data,
        )
    if (b"NaN" in data or b"Infinity" in data) and _has_non_json_number(data):
        raise InvalidEvent(
            [Violation("RFC 8259", "not valid JSON: NaN and Infinity are not JSON numbers")],
            raw=data,
        )
    try:
        event = Event.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid":
            reason = first.get("ctx", {}).get("error", first["msg"])
            raise InvalidEvent(
                [Violation("RFC 8259", f"not valid JSON: {reason}")], raw=data
            ) from None
        if first["type"] in ("model_type", "model_attributes_type") and not first["loc"]:
            raise InvalidEvent(
                [
                    Violation(
                        "AEP-0001 §5", "an event is a JSON object, not a JSON " + _json_kind(data)
                    )
                ],
                raw=data,
            ) from None
        raise InvalidEvent(violations_of(exc), raw=data) from None
    return _finish(event, data)


def validate_event(obj: Mapping[str, Any]) -> Event:
    """Validate an already-decoded JSON object. Raises `InvalidEvent`."""
    try:
        event = Event.model_validate(obj)
    except ValidationError as exc:
        raise InvalidEvent(violations_of(exc), raw=obj) from None
    return _finish(event, None)


def _has_non_json_number(data: bytes) -> bool:
    """Whether the text uses NaN or Infinity as a number (the substring may sit in a string)."""

    def refuse(token: str) -> Any:
        raise ValueError(token)

    try:
        json.loads(data, parse_constant=refuse)
    except ValueError as exc:
        return str(exc) in ("NaN", "Infinity", "-Infinity")
    except RecursionError:
        return False
    return False


def _json_kind(data: bytes) -> str:
    head = data.lstrip()[:1]
    return {b"[": "array", b'"': "string", b"n": "null", b"t": "boolean", b"f": "boolean"}.get(
        head, "number"
    )
