"""What keeps one hook from cutting the daemon off from the bridge: bounded events.

The bridge refuses an event larger than its limit (1 MiB by default; it says how much in
its `hello`, `capabilities.experimental.max_event_bytes`), and a WebSocket frame far over
it closes the connection. An agent's hook can carry megabytes (a 3 MB Bash command, an MCP
server's 2 MB elicitation message, a 2 MB session id), so before an event exists:

- its identifiers (session, run, subject) are at most `MAX_ID` characters: a longer one
  becomes its first `KEPT` characters, `…`, and 24 hex digits of its SHA-256, the same for
  the same id, so its session stays one session;
- its data fits the limit: the longest strings are cut, all to the same length, each ending
  with a visible "… (N more characters)", so a person sees that the words go on. A string
  is never cut below `FLOOR` characters; data that still does not fit (thousands of keys)
  is refused (`TooLarge`) and the daemon drops that one event with a warning.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

#: the longest session, run or subject an event carries whole
MAX_ID: Final = 128
#: the characters of a longer id kept before its hash
KEPT: Final = 64
#: the shortest a cut string is made
FLOOR: Final = 64


class TooLarge(ValueError):
    """An event whose data does not fit the bridge's limit even with its strings cut."""

    def __init__(self, type_: str, size: int, limit: int) -> None:
        super().__init__(f"a {type_} event of {size} bytes does not fit in {limit} bytes")
        self.type = type_
        self.size = size
        self.limit = limit


def bounded_id(value: str) -> str:
    """`value` when it is at most `MAX_ID` characters, else a stable bounded id for it."""
    if len(value) <= MAX_ID:
        return value
    hashed = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{value[:KEPT]}…{hashed}"


def json_size(value: Any) -> int:
    """The bytes of `value` as compact JSON, as an event carries it."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


def cut(value: Any, limit: int) -> Any:
    """`value` with every string longer than `limit` characters cut there, and marked."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return f"{value[:limit]}… ({len(value) - limit} more characters)"
    if isinstance(value, dict):
        return {key: cut(item, limit) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [cut(item, limit) for item in value]
    return value


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max((_longest(item) for item in value.values()), default=0)
    if isinstance(value, list | tuple):
        return max((_longest(item) for item in value), default=0)
    return 0


def fit(data: dict[str, Any], budget: int) -> dict[str, Any] | None:
    """`data` as compact JSON of at most `budget` bytes: unchanged when it is, else with its
    longest strings cut to the longest length that fits; None when none does."""
    if json_size(data) <= budget:
        return data
    low, high = FLOOR, min(_longest(data), max(budget, FLOOR))
    if high <= low or json_size(cut(data, low)) > budget:
        return None
    while low < high:  # the longest length that fits (`low` always does)
        middle = (low + high + 1) // 2
        if json_size(cut(data, middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    fitted: dict[str, Any] = cut(data, low)
    return fitted


__all__ = ["FLOOR", "MAX_ID", "TooLarge", "bounded_id", "cut", "fit", "json_size"]
