"""Pydantic's validation errors in plain words: the key, what is wrong, and the fix.

Pydantic says "Input should be a valid string" or "Field required"; a person editing a
config needs `channels.team.approvers[0]: must be text in double quotes, not true (...)`.
`explain` turns each error a config can produce into `(key, message, fix)`: the key with
list positions as `[i]`, a message that says what the value must be and what it is (a value
is quoted only where it cannot be a secret: a choice or a number out of range), and a fix:
a near-miss suggestion, the field's own description, or how to write the value. Any error
type not mapped here still has pydantic's phrasing rewritten (`Input should be` becomes
`must be`), so its wording never reaches the user.

Key names are the config's own words, and so is anything quoted: each of the three is made
one visible line (`terminal.visible`), so a key with a newline in it cannot print a line that
looks like the bridge's own (`aep-bridge: error: ...`).
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from ..text.terminal import visible

#: what a value of each type must be, for the `*_type` and `*_parsing` errors
_EXPECTED: Final = {
    "string_type": "text in double quotes",
    "string_sub_type": "text in double quotes",
    "string_unicode": "text in double quotes",
    "bytes_type": "text in double quotes",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_parsing_size": "a whole number of a usable size",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "decimal_type": "a number",
    "decimal_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list in brackets",
    "tuple_type": "a list in brackets",
    "set_type": "a list in brackets",
    "frozen_set_type": "a list in brackets",
    "iterable_type": "a list in brackets",
    "dict_type": "an object in braces",
    "model_type": "an object in braces",
    "model_attributes_type": "an object in braces",
    "dataclass_type": "an object in braces",
    "mapping_type": "an object in braces",
    "none_required": "null",
    "url_type": "a URL in double quotes",
    "date_type": "a date such as 2025-01-31",
    "date_parsing": "a date such as 2025-01-31",
    "date_from_datetime_parsing": "a date such as 2025-01-31",
    "datetime_type": "a time such as 2025-01-31T09:30:00Z",
    "datetime_parsing": "a time such as 2025-01-31T09:30:00Z",
    "datetime_from_date_parsing": "a time such as 2025-01-31T09:30:00Z",
    "time_delta_type": "a number of seconds",
    "time_delta_parsing": "a number of seconds",
    "enum": "one of the listed choices",
}

#: how to write a value of each expected kind
_HOW: Final = {
    "text in double quotes": 'put the value in double quotes, such as "value"',
    "a whole number": "write a whole number without quotes, such as 30",
    "a number": "write a number without quotes, such as 2.5",
    "true or false": "write true or false, without quotes",
    "a list in brackets": 'write a list, such as ["one", "two"]',
    "an object in braces": 'write an object, such as {"key": "value"}',
}

#: pydantic's own phrases (and what to say instead), for error types not mapped above
_REWRITES: Final = (
    ("Field required", "is required"),
    ("Extra inputs are not permitted", "is not a known key"),
    ("Value error, ", ""),
    ("Assertion failed, ", ""),
    ("Input should be a valid string", "must be text in double quotes"),
    ("Input should be a valid integer", "must be a whole number"),
    ("Input should be a valid number", "must be a number"),
    ("Input should be a valid boolean", "must be true or false"),
    ("Input should be a valid list", "must be a list in brackets"),
    ("Input should be a valid dictionary", "must be an object in braces"),
    ("Input should be a valid", "must be a"),
    ("Input should be", "must be"),
    ("Input should", "must"),
    ("String should", "must"),
    ("List should", "must"),
    ("Tuple should", "must"),
    ("Set should", "must"),
    ("Dictionary should", "must"),
    ("Value should", "must"),
    ("value is not a valid", "is not a"),
)


def explain(
    error: ValidationError, prefix: str, model: type[BaseModel]
) -> list[tuple[str, str, str | None]]:
    """Each of `error`'s problems as `(key, message, fix)`, keys under `prefix`."""
    problems: list[tuple[str, str, str | None]] = []
    #: a value that fits no member of a union: one problem, naming what each member takes
    unions: dict[str, tuple[int, list[str]]] = {}
    for detail in error.errors(include_url=False):
        walk = _Walk(model, detail["loc"])
        key = _join(prefix, walk.key)
        expected = _EXPECTED.get(detail["type"])
        if walk.tagged and key in unions:
            at, kinds = unions[key]
            if expected is not None and expected not in kinds:
                kinds.append(expected)
                message = f"must be {' or '.join(kinds)}, not {_kind(detail['input'])}"
                problems[at] = (key, message, walk.help)
            continue
        if walk.tagged:
            unions[key] = (len(problems), [expected] if expected is not None else [])
        problems.append((key, *_words(detail, walk, prefix)))
    return [(_line(key), _line(message), fix and _line(fix)) for key, message, fix in problems]


def _line(text: str) -> str:
    """`text` as one line a terminal shows as written (a key's newline shown as `\\n`)."""
    return visible(text, one_line=True)


class _Walk:
    """Where an error's location leads in the model: the key as written in the file, the
    field it ends at (and the model that has it), and the type expected there."""

    def __init__(self, model: type[BaseModel], loc: Sequence[int | str]) -> None:
        self.owner: type[BaseModel] | None = None
        self.field: FieldInfo | None = None
        self.name = ""
        self.tagged = False
        self.parent_type: Any = None
        parts: list[str] = []
        current: Any = model
        for part in loc:
            self.parent_type = current = _unwrap(current)
            if isinstance(part, int):
                parts.append(f"[{part}]")
                args = get_args(current)
                current = args[0] if args else Any
                continue
            if _is_model(current):
                parts.append(f".{part}" if parts else part)
                self.name = part
                fields = current.model_fields
                self.owner, self.field = (current, fields.get(part))
                current = fields[part].annotation if part in fields else Any
                continue
            origin = get_origin(current)
            if origin in (dict, Mapping) or current is dict:
                parts.append(f".{part}" if parts else part)
                self.name = part
                args = get_args(current)
                current = args[1] if len(args) == 2 else Any
                continue
            if _is_union(current):  # pydantic names the union's member it tried
                self.tagged = True
                current = Any
                continue
            parts.append(f".{part}" if parts else part)  # a key inside a free-form value
            self.name = part
            current = Any
        self.key = "".join(parts)
        self.type = _unwrap(current)

    @property
    def help(self) -> str | None:
        """The field's own description, where it has one."""
        return self.field.description if self.field is not None else None

    def known_keys(self) -> list[str]:
        """The keys the object that holds the last key accepts."""
        holder = self.parent_type
        return sorted(holder.model_fields) if _is_model(holder) else []


def _words(detail: ErrorDetails, walk: _Walk, prefix: str) -> tuple[str, str | None]:
    kind = detail["type"]
    ctx: dict[str, Any] = dict(detail.get("ctx") or {})
    value = detail["input"]
    if kind == "missing":
        where = _join(prefix, walk.key.rpartition(".")[0]) or "the top level"
        return "is required", walk.help or f'add "{walk.name}" to {where}'
    if kind == "extra_forbidden":
        known = walk.known_keys()
        close = difflib.get_close_matches(walk.name, known, n=1)
        if close:
            return "is not a known key", f"did you mean {close[0]!r}?"
        if known:
            return "is not a known key", f"remove it; the known keys are {', '.join(known)}"
        return "is not a known key", "remove it"
    if kind in ("literal_error", "enum"):
        expected = str(ctx.get("expected", ""))
        choices = re.findall(r"'([^']*)'", expected)
        shown = f"{value!r}" if isinstance(value, str) and len(value) <= 40 else _kind(value)
        close = (
            difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
            if isinstance(value, str)
            else []
        )
        hint = f"did you mean {close[0]!r}?" if close else walk.help or "write one, in quotes"
        return f"must be one of {expected}, not {shown}", hint
    expected_kind = _EXPECTED.get(kind)
    if expected_kind is not None:
        fix = walk.help or _HOW.get(expected_kind)
        if kind == "model_type" and _is_model(walk.type):
            fix = f"write an object with the keys {', '.join(sorted(walk.type.model_fields))}"
        if isinstance(value, bool) and expected_kind == "text in double quotes":
            fix = "true and false are not text; " + (walk.help or _HOW[expected_kind])
        return f"must be {expected_kind}, not {_kind(value)}", fix
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("more than", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
        "multiple_of": ("a multiple of", "multiple_of"),
    }
    if kind in bounds:
        words, name = bounds[kind]
        low, high = _range(walk.field)
        if low is not None and high is not None and kind != "multiple_of":
            message = f"must be from {low} to {high}"
        else:
            message = f"must be {words} {ctx.get(name)}"
        if isinstance(value, int | float) and not isinstance(value, bool):
            message += f", not {value}"
        return message, walk.help or "write a number in that range"
    if kind in ("string_too_short", "string_too_long", "too_short", "too_long"):
        text = kind.startswith("string")
        limit = int(ctx.get("min_length", ctx.get("max_length", 0)))
        if kind == "string_too_short" and limit == 1:
            return "must not be empty", walk.help
        unit = "character" if text else "item"
        amount = f"{limit} {unit}{'' if limit == 1 else 's'}"
        if text:
            side = "at least" if kind.endswith("short") else "at most"
            return f"must be {side} {amount} long", walk.help
        side = "at least" if kind.endswith("short") else "at most"
        return f"must list {side} {amount}", walk.help
    if kind == "string_pattern_mismatch":
        return "is not in the expected form", walk.help or (
            f"it must match the regular expression {ctx.get('pattern')}"
        )
    if kind.startswith("url_"):
        reason = f" ({ctx['error']})" if "error" in ctx else ""
        if kind == "url_scheme":
            return f"must be a URL starting with {ctx.get('expected_schemes')}", walk.help
        return f"is not a usable URL{reason}", walk.help or "write a full URL such as https://host"
    if kind in ("value_error", "assertion_error"):  # our validators' own words
        return _plain(detail["msg"]), None
    return _plain(detail["msg"]), walk.help


def _plain(message: str) -> str:
    for phrase, words in _REWRITES:
        message = message.replace(phrase, words)
    return message


def _range(info: FieldInfo | None) -> tuple[Any, Any]:
    low = high = None
    for item in info.metadata if info is not None else ():
        low = getattr(item, "ge", None) if getattr(item, "ge", None) is not None else low
        high = getattr(item, "le", None) if getattr(item, "le", None) is not None else high
    return low, high


def _kind(value: object) -> str:
    """What a value is, in JSON's words, without showing it (it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, float):
        return "a number" if value.is_integer() else "a fractional number"
    if isinstance(value, str):
        return "empty text" if not value else "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _unwrap(annotation: Any) -> Any:
    """`X | None` and `Annotated[X, ...]` as `X`."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
            continue
        if _is_union(annotation):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _join(prefix: str, key: str) -> str:
    if not prefix:
        return key
    if not key:
        return prefix
    return f"{prefix}{key}" if key.startswith("[") else f"{prefix}.{key}"
