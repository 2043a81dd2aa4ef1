"""Forms in the console: a card that lists each field and how to answer it, and the one typed
line that fills them in.

A form's card numbers its fields and says of each its type, whether it is required and its
choices (`1 = Staging   2 = Production`); the person answers in one line, the card's short id
and then each field's number, `=` and its value, with `;` between fields:
`k3f9 1=2; 2=3; 3=yes; 4=ships the new login`. A choice is its number or its label, several
choices of a multi-select are separated by commas, a yes/no field takes yes or no. What the
line says is turned into the card's field and choice ids (`f1`, `c2`), which the core checks
against the request (required fields, ranges) and maps to the agent's ids. A line that does
not parse is refused with the reason, and nothing is sent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from aep_bridge import FormField

#: a typed answer that fills in a form starts with a field's number and `=`
FILLS = re.compile(r"^\d+\s*=")
_ASSIGNMENT = re.compile(r"^(\d+)\s*=\s*(.*)$", re.DOTALL)
_INTEGER = re.compile(r"^[+-]?\d+$")
_YES = frozenset({"yes", "y", "true"})
_NO = frozenset({"no", "n", "false"})
#: how the answer line is written, said under the fields
HOW = "a field's number, = and its value, with ; between fields; leave a field out to skip it"


def card_lines(short: str, fields: Sequence[FormField]) -> list[str]:
    """The fields of a form's card, one line each, then the line that answers them all."""
    lines = [f"{i}. {_describe(field)}" for i, field in enumerate(fields, 1)]
    template = "; ".join(f"{i}={_slot(field)}" for i, field in enumerate(fields, 1))
    lines.append(f"fill in with: {short} {template}")
    lines.append(f"({HOW})")
    return lines


def _describe(field: FormField) -> str:
    required = " (required)" if field.required else ""
    return f"{field.label}{required}: {_takes(field)}"


def _takes(field: FormField) -> str:
    """What a field takes, in words, with its choices numbered."""
    match field.type:
        case "boolean":
            return "yes or no"
        case "number":
            low, high = field.min, field.max
            if low is not None and high is not None:
                return f"a number from {low:g} to {high:g}"
            if low is not None:
                return f"a number, at least {low:g}"
            if high is not None:
                return f"a number, at most {high:g}"
            return "a number"
        case "string":
            return "words"
    numbered = "   ".join(f"{j} = {c.label}" for j, c in enumerate(field.choices, 1))
    said = f"any of {numbered} (several as 1,2)" if field.multi else f"one of {numbered}"
    return f"{said}, or your own words" if field.other else said


def _slot(field: FormField) -> str:
    match field.type:
        case "boolean":
            return "<yes/no>"
        case "number":
            return "<number>"
        case "string":
            return "<words>"
    return "<choices>" if field.multi else "<choice>"


def values(line: str, fields: Sequence[FormField]) -> dict[str, Any] | str:
    """The card's field ids to values from a typed line (`1=2; 3=yes`), or why it is no
    answer to this form (said to the person; nothing is sent)."""
    out: dict[str, Any] = {}
    for part in line.split(";"):
        part = part.strip()
        if not part:
            continue
        match = _ASSIGNMENT.match(part)
        if match is None:
            return f"{_short(part)!r} is not N=value ({HOW})"
        number, value = int(match.group(1)), match.group(2).strip()
        if not 1 <= number <= len(fields):
            return f"the form has no field {number} (it has 1 to {len(fields)})"
        field = fields[number - 1]
        if field.id in out:
            return f"field {number} is given twice"
        if not value:
            return f"field {number} has no value (leave it out to skip it)"
        converted = _value(field, value)
        if converted is None:
            return f"field {number} ({_short(field.label)}) takes {_short(_takes(field), 80)}"
        out[field.id] = converted
    return out


def _value(field: FormField, value: str) -> Any:
    """`value` as the field's type takes it, or None when it is no such value."""
    match field.type:
        case "string":
            return value
        case "boolean":
            word = value.lower()
            return True if word in _YES else False if word in _NO else None
        case "number":
            return _number(value)
    if not field.multi:
        return _choice(field, value)
    chosen = [_choice(field, item.strip()) for item in value.split(",") if item.strip()]
    return chosen if chosen and None not in chosen else None


def _number(value: str) -> int | float | None:
    if _INTEGER.match(value):
        return int(value)
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _choice(field: FormField, value: str) -> str | None:
    """A choice by its number or its label (any case), else the words where the field takes
    its own (`other`)."""
    if value.isascii() and value.isdigit() and 1 <= int(value) <= len(field.choices):
        return field.choices[int(value) - 1].id
    for choice in field.choices:
        if choice.label.casefold() == value.casefold():
            return choice.id
    return value if field.other else None


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
