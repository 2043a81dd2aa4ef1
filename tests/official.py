"""The official AEP JSON Schemas as the reference verdict, for tests and benchmarks.

`jsonschema` Draft 2020-12 with its format checker (rfc3339-validator and rfc3986-validator
installed): the envelope schema, then the type's payload schema when `data` is present.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from tests.shared_data import AEP_SCHEMAS

_FORMAT = jsonschema.Draft202012Validator.FORMAT_CHECKER


def _validator(path: Any) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(path.read_text()), format_checker=_FORMAT)


ENVELOPE = _validator(AEP_SCHEMAS / "aep-event.schema.json")
PAYLOADS = {
    path.name.removesuffix(".schema.json"): _validator(path)
    for path in (AEP_SCHEMAS / "types").glob("*.schema.json")
}


def is_valid(event: Any) -> bool:
    """The official verdict on one decoded event."""
    if not ENVELOPE.is_valid(event):
        return False
    type_ = event.get("type")
    validator = PAYLOADS.get(type_) if isinstance(type_, str) else None
    return validator is None or "data" not in event or validator.is_valid(event["data"])


def assert_valid(event: dict[str, Any]) -> None:
    """Raise jsonschema's own error, with its message, if the event is not valid."""
    ENVELOPE.validate(event)
    if "data" in event and event["type"] in PAYLOADS:
        PAYLOADS[event["type"]].validate(event["data"])
