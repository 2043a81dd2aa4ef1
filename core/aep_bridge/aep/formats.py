"""The two string formats the envelope schema asserts: RFC 3339 `date-time` and RFC 3986 `uri`.

They agree with what `jsonschema`'s format checker decides with `rfc3339-validator` and
`rfc3986-validator` installed (the official verdict), with one deliberate difference: a
trailing newline is refused. Python's `$` matches before a final `\\n`, so those validators
accept `"...Z\\n"`; the schemas are written in ECMA-262, where `$` does not.
"""

from __future__ import annotations

import calendar
import re
from functools import lru_cache
from typing import Final

from rfc3986_validator import validate_rfc3986

_RFC3339: Final = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(\d{2})[Tt](?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
    r"(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)


def is_rfc3339(value: str) -> bool:
    """An RFC 3339 date-time with a zone (`Z` or an offset); `t` and `z` may be lowercase."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        return False
    year, month, day = match.groups()
    if year == "0000" or day == "00":
        return False
    return day <= "28" or int(day) <= calendar.monthrange(int(year), int(month))[1]


@lru_cache(maxsize=4096)
def is_uri(value: str) -> bool:
    """An absolute RFC 3986 URI (scheme required). Cached: a stream repeats its sources."""
    return "\n" not in value and validate_rfc3986(value, rule="URI") is not None
