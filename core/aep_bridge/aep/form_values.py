"""Form answers checked against their request (AEP-0002 §5.3, AEP-0006).

The rule every party applies before an answer counts: a required field has a value, a
select's value is one of its choices (or free text where the field takes `other`), and each
value has its field's type. The bridge applies it to an answer before sending it (so the
person hears at once what is wrong), and the agent daemon again before applying it (an
emitter must refuse what breaks it: `control.rejected` `invalid`).
"""

from __future__ import annotations

import math
from typing import Any


def is_number(value: Any) -> bool:
    """A finite int or float, and not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def form_problem(fields: list[dict[str, Any]], values: dict[str, Any]) -> str | None:
    """Why an emitter must refuse these form values (AEP-0002 §5.3, AEP-0006), or None.

    Refused (`control.rejected` `invalid`, the request stays open): a required field with
    no value, a string that is not a choice id on a select without `other: true`, and any
    value of the wrong type for its field (`value_problem`). Unknown keys are the caller's
    business (the held loop refuses them before mapping).
    """
    for spec in fields:
        if not isinstance(spec, dict):
            continue
        field_id = spec.get("id")
        name = spec.get("label", field_id)
        if spec.get("required") and field_id not in values:
            return f"{name} is required"
        if field_id in values and spec.get("type") == "select" and not spec.get("other"):
            ids = {c.get("id") for c in spec.get("choices") or [] if isinstance(c, dict)}
            value = values[field_id]
            for chosen in value if isinstance(value, list) else [value]:
                if isinstance(chosen, str) and chosen not in ids:
                    return f"{chosen!r} is not a choice of {name}"
    return value_problem(fields, values)


def value_problem(fields: list[dict[str, Any]], values: dict[str, Any]) -> str | None:
    """Why a value has the wrong type for its field (AEP-0002 §5.3, AEP-0006), or None.

    The value types: a `multi`
    select takes a list of strings, a single select one string, a number field a finite
    number within `min`/`max`, a boolean field a bool, a string field a string.
    """
    for spec in fields:
        if not isinstance(spec, dict) or spec.get("id") not in values:
            continue
        value = values[spec["id"]]
        name = spec.get("label", spec["id"])
        kind = spec.get("type")
        if kind == "select" and spec.get("multi"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return f"{name} takes a list of choices"
        elif kind in ("select", "string"):
            if not isinstance(value, str):
                return (
                    f"{name} takes one text value"
                    if kind == "string"
                    else f"{name} takes one choice"
                )
        elif kind == "number":
            if not is_number(value):
                return f"{name} takes a number"
            low, high = spec.get("min"), spec.get("max")
            if (is_number(low) and value < low) or (is_number(high) and value > high):
                return f"{name} is out of range"
        elif kind == "boolean" and not isinstance(value, bool):
            return f"{name} takes yes or no"
    return None


__all__ = ["form_problem", "is_number", "value_problem"]
