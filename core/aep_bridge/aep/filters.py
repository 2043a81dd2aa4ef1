"""The `attr-match` filter dialect (AEP-0003 §6): which events a subscription receives.

A filter is a JSON object whose members are predicates on envelope attributes; an event
matches when every predicate holds, and `{}` matches everything. `Filter.parse` checks a filter
once and compiles each predicate into a small test, because `matches` runs for every event and
every subscription and must do nothing but look up and compare.

A filter that breaks the grammar is refused with `InvalidFilter`, never widened: a typo in a
key must not turn a narrow subscription into a firehose (fail closed, §6.2 rule 1).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from .errors import InvalidFilter
from .registry import (
    CORE_ATTRIBUTES,
    DEFAULT_CAPTURE,
    DEFAULT_EPOCH,
    DEFAULT_SEVERITY,
    EXTENSION_NAME_PATTERN,
    SEVERITY_ORDER,
    SEVERITY_RANK,
)

if TYPE_CHECKING:
    from .envelope import Event

#: Core attributes a filter may name (§6.2 rule 1).
FILTERABLE: Final = frozenset(
    {
        "id",
        "type",
        "subject",
        "source",
        "agent",
        "session",
        "run",
        "step",
        "epoch",
        "cause",
        "severity",
        "capture",
    }
)

#: Core attributes a filter may not name, each with the reason the specification gives.
NOT_FILTERABLE: Final[Mapping[str, str]] = {
    "aep": "the protocol version is carried, not filtered",
    "time": "time is display metadata, and positions, not times, are how a consumer resumes",
    "seq": "positions are the resume mechanism, not a filter (resume with `from` instead)",
    "traceparent": "trace context is pass-through join metadata",
    "data": "routing never parses payloads",
}

_CORE: Final = frozenset(CORE_ATTRIBUTES)

#: What an absent attribute reads as before matching (§6.2 rule 5, AEP-0001 §5.1).
_DEFAULTS: Final[Mapping[str, object]] = {
    "severity": DEFAULT_SEVERITY,
    "capture": DEFAULT_CAPTURE,
    "epoch": DEFAULT_EPOCH,
}

#: `prefix.*` on `type`: one or more dot-terminated type tokens, then `*`.
_TYPE_PATTERN: Final = re.compile(r"(?:[a-z0-9_-]+\.)+\*")

_COMPARISONS: Final = ("gte", "lte")

_Scalar = str | int | bool
_Test = Callable[[object], bool]


def _fail(key: str, why: str) -> InvalidFilter:
    return InvalidFilter(f"filter key {key!r}: {why}")


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return f"the number {value!r} (predicates take integers, not fractions)"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return f"a {type(value).__name__}"


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidFilter(f"filter keys are attribute names (strings), not {key!r}")
    if key in FILTERABLE:
        return key
    reason = NOT_FILTERABLE.get(key)
    if reason is not None:
        raise _fail(key, f"not filterable: {reason}")
    if key in _CORE or not EXTENSION_NAME_PATTERN.fullmatch(key):
        raise _fail(
            key,
            "neither a filterable attribute nor a legal extension attribute name "
            "(1 to 20 lowercase letters or digits, AEP-0001 §5.4)",
        )
    return key


def _scalar(key: str, value: object) -> _Scalar:
    """One equality operand: a string, integer or boolean; `*` only as a type pattern."""
    if isinstance(value, float) or value is None or not isinstance(value, _Scalar):
        raise _fail(
            key,
            f"a predicate compares strings, integers or booleans, not {_kind(value)}"
            + ("; omit the key to match any value" if value is None else ""),
        )
    if isinstance(value, str) and "*" in value:
        if key != "type":
            raise _fail(key, f"{value!r}: `*` patterns are allowed on 'type' only")
        if not _TYPE_PATTERN.fullmatch(value):
            raise _fail(
                key,
                f"{value!r} is not a type pattern; write `prefix.*` (like 'attention.*'), "
                "and omit the key to match any type",
            )
    return value


def _equality(values: list[_Scalar]) -> _Test:
    """Exact JSON equality against any of `values`: `true` is not `1`, `1` is not `"1"`."""
    prefixes = tuple(v[:-1] for v in values if isinstance(v, str) and v.endswith(".*"))
    strings = frozenset(v for v in values if isinstance(v, str) and not v.endswith(".*"))
    bools = frozenset(v for v in values if isinstance(v, bool))
    ints = frozenset(v for v in values if isinstance(v, int) and not isinstance(v, bool))

    if not prefixes and not bools and not ints:

        def only_strings(value: object) -> bool:
            return isinstance(value, str) and value in strings

        return only_strings

    def any_of(value: object) -> bool:
        if isinstance(value, str):
            return value in strings or (bool(prefixes) and value.startswith(prefixes))
        if isinstance(value, bool):
            return value in bools
        if isinstance(value, int):
            return value in ints
        # JSON has one number type: an event's `3.0` is the integer 3 (JSON Schema agrees).
        if isinstance(value, float) and value.is_integer():
            return int(value) in ints
        return False

    return any_of


def _severity_range(spec: Mapping[object, object]) -> _Test:
    """`{"gte": L}`, `{"lte": L}` or both, inclusive, in the AEP-0001 §8.1 order."""
    if not spec:
        raise _fail("severity", "an empty comparison; use {'gte': level} and/or {'lte': level}")
    bounds: dict[str, int] = {}
    for op, level in spec.items():
        if op not in _COMPARISONS:
            raise _fail("severity", f"{op!r} is not a comparison; use 'gte' and/or 'lte'")
        rank = SEVERITY_RANK.get(level) if isinstance(level, str) else None
        if rank is None:
            raise _fail(
                "severity",
                f"{op}: {level!r} is not a severity level (one of {', '.join(SEVERITY_ORDER)})",
            )
        bounds[str(op)] = rank
    low = bounds.get("gte", 0)
    high = bounds.get("lte", len(SEVERITY_ORDER) - 1)

    def in_range(value: object) -> bool:
        rank = SEVERITY_RANK.get(value) if isinstance(value, str) else None
        return rank is not None and low <= rank <= high

    return in_range


def _compile(key: str, predicate: object) -> _Test:
    if isinstance(predicate, Mapping):
        if key != "severity":
            raise _fail(
                key, "an object is a predicate on 'severity' only ({'gte': level, 'lte': level})"
            )
        return _severity_range(predicate)
    if isinstance(predicate, list | tuple):
        if not predicate:
            raise _fail(key, "an empty any-of array matches nothing; omit the key instead")
        return _equality([_scalar(key, item) for item in predicate])
    return _equality([_scalar(key, predicate)])


class Filter:
    """A parsed, compiled attr-match filter. Make one with `Filter.parse`."""

    __slots__ = ("_canonical", "_checks", "_spec")

    def __init__(self, spec: object) -> None:
        if not isinstance(spec, Mapping):
            raise InvalidFilter(
                f"a filter is a JSON object of attribute predicates, not {_kind(spec)}"
            )
        checks: list[tuple[str, object, bool, _Test]] = []
        for raw_key, predicate in spec.items():
            key = _check_key(raw_key)
            test = _compile(key, predicate)
            checks.append((key, _DEFAULTS.get(key), key not in _CORE, test))
        self._checks: tuple[tuple[str, object, bool, _Test], ...] = tuple(checks)
        self._spec: dict[str, Any] = copy.deepcopy(dict(spec))
        self._canonical = json.dumps(self._spec, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, spec: object) -> Filter:
        """Check and compile `spec` (a decoded JSON object); raise `InvalidFilter` if bad."""
        return cls(spec)

    @property
    def spec(self) -> dict[str, Any]:
        """The filter as given (a copy: changing it does not change what this filter matches)."""
        return copy.deepcopy(self._spec)

    def matches(self, event: Mapping[str, Any]) -> bool:
        """Whether a decoded event object passes every predicate (§6.2)."""
        get = event.get
        for key, default, _, test in self._checks:
            value = get(key)
            if value is None:
                if default is None:
                    return False  # absent attributes never match (§6.2 rule 5)
                value = default
            if not test(value):
                return False
        return True

    def matches_event(self, event: Event) -> bool:
        """`matches` for a validated `Event`, without turning it back into a dict."""
        extensions = event.model_extra or {}
        for key, default, extension, test in self._checks:
            value = extensions.get(key) if extension else getattr(event, key)
            if value is None:
                if default is None:
                    return False
                value = default
            if not test(value):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Filter):
            return NotImplemented
        return self._canonical == other._canonical

    def __hash__(self) -> int:
        return hash(self._canonical)

    def __repr__(self) -> str:
        return f"Filter({self._canonical})"


#: The empty filter: every event matches.
MATCH_ALL: Final = Filter.parse({})

__all__ = ["FILTERABLE", "MATCH_ALL", "NOT_FILTERABLE", "Filter"]
